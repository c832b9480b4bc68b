/**
 * Runs this repository's TypeScript sources in the processes the tests start (a server, a proof's worker, the bin):
 * `node --conditions=@custody-relay/source --import <this file> src/main.ts`.
 *
 * Why not tsx, as everywhere else: tsx's hooks run in a loader thread, and every module the process loads (Effect's
 * hundreds included) makes a round trip to it. A server started on its sources took 2.2 s of CPU with tsx against
 * 1.1 s with these hooks, which run in the process's own thread and only touch our `.ts` files (0.6 s for the built
 * server); the suite starts about 70 such processes. Node 22.14, the stated minimum, has no in-thread hooks
 * (`module.registerHooks` came in 22.15), so there tsx loads the sources as before.
 */
import { existsSync, readFileSync } from "node:fs"
import * as nodeModule from "node:module"
import { fileURLToPath } from "node:url"

const { registerHooks, stripTypeScriptTypes } = nodeModule

/**
 * Whether this Node transforms TypeScript in this thread. The first call also emits Node's one ExperimentalWarning
 * for `stripTypeScriptTypes`, which is held back here: a child's stderr is what many tests read.
 */
const transformsHere = (() => {
  if (typeof registerHooks !== "function" || typeof stripTypeScriptTypes !== "function") return false
  const emitWarning = process.emitWarning
  process.emitWarning = () => undefined
  try {
    stripTypeScriptTypes("class Probe { constructor(readonly value: number) {} }", { mode: "transform" })
    return true
  } catch {
    return false
  } finally {
    process.emitWarning = emitWarning
  }
})()

if (!transformsHere) {
  await import("tsx")
} else {
  registerHooks({
    // Our sources import each other as `./Module.js` (NodeNext); the file on disk is `./Module.ts`.
    resolve(specifier, context, nextResolve) {
      const parent = context.parentURL
      if (parent?.endsWith(".ts") && specifier.startsWith(".") && specifier.endsWith(".js")) {
        const source = new URL(`${specifier.slice(0, -3)}.ts`, parent)
        if (existsSync(fileURLToPath(source))) return { url: source.href, format: "module", shortCircuit: true }
      }
      return nextResolve(specifier, context)
    },
    // "transform", not "strip": the sources have parameter properties, which only a transform can turn into code.
    load(url, context, nextLoad) {
      if (!url.startsWith("file:") || !url.endsWith(".ts")) return nextLoad(url, context)
      const path = fileURLToPath(url)
      return { format: "module", source: stripTypeScriptTypes(readFileSync(path, "utf8"), { mode: "transform", sourceUrl: path }), shortCircuit: true }
    }
  })
}
