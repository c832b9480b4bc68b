/**
 * Scalar's prebuilt browser bundle, the API reference page's renderer, which this server serves itself (never from
 * a CDN). The build copies it, with its license, beside the bundled code (`BUILT_PATH` in dist/), and the server's
 * package depends on `@scalar/api-reference` only to build: installed, that package brings a Vue application's
 * dependencies (the five packed packages installed with npm: 219 packages and 388 MB with it, 36 and 102 MB
 * without), none of which the bundle needs. Run from source (a checkout), the bundle is read from that package.
 */
import { existsSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

/** Where the build puts the bundle, relative to the bundled code. */
export const BUILT_PATH = "api-reference/standalone.js"

/** The bundle inside `@scalar/api-reference`, resolved from `from`: the package exports no path to it. */
export const packagedPath = (from: string | URL): string =>
  join(dirname(createRequire(from).resolve("@scalar/api-reference")), "browser", "standalone.js")

let script: string | undefined

/** The bundle, read once. */
export const read = (): string => {
  if (script === undefined) {
    const built = fileURLToPath(new URL(BUILT_PATH, import.meta.url))
    script = readFileSync(existsSync(built) ? built : packagedPath(import.meta.url), "utf8")
  }
  return script
}
