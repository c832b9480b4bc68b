/**
 * Every package script that runs one of this repository's TypeScript files is node itself, with tsx as a module hook
 * (`node --import tsx file.ts`), never tsx's CLI: the process a script starts is then the one that does the work and
 * gets a supervisor's or a user's signals (`scriptNodeArguments` says what the CLI would do instead). What that keeps
 * is proven on real processes for the server (packages/server/test/main.test.ts), the examples
 * (examples/test/examples.test.ts) and the benches (packages/server/test/BenchProcess.test.ts); this reads every
 * workspace package's scripts, so a new one cannot slip back to the launcher.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { scriptNodeArguments } from "../packages/storage-sql/test/SourceNodeArguments.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const manifests = [
  "package.json",
  ...readdirSync(join(root, "packages")).map((name) => join("packages", name, "package.json")),
  "conformance/package.json",
  "examples/package.json"
]

/** A script that names a TypeScript file of the repository (`bench/http.bench.ts`, `src/main.ts`, ...). */
const RUNS_TYPESCRIPT = /(?:^|\s)[\w@./-]+\.ts(?:\s|$)/

const scriptsRunningTypeScript = manifests.flatMap((manifest) => {
  const { scripts = {} } = JSON.parse(readFileSync(join(root, manifest), "utf8")) as { scripts?: Record<string, string> }
  return Object.entries(scripts).filter(([, script]) => RUNS_TYPESCRIPT.test(script)).map(([name]) => ({ manifest, name }))
})

describe("package scripts", () => {
  it("are found in every workspace package that runs TypeScript: the root, the server, storage-sql, the examples", () => {
    const found = new Set(scriptsRunningTypeScript.map(({ manifest, name }) => `${manifest} ${name}`))
    const expected = [
      "package.json conformance",
      "packages/server/package.json start",
      "packages/server/package.json bench:http",
      "packages/storage-sql/package.json bench",
      "examples/package.json demo"
    ]
    for (const script of expected) expect(found).toContain(script)
  })

  it.each(scriptsRunningTypeScript)("$manifest $name runs node itself, with tsx as a module hook", ({ manifest, name }) => {
    const nodeArguments = scriptNodeArguments(pathToFileURL(join(root, manifest)), name)
    expect(nodeArguments.slice(0, -1)).toContain("tsx")
  })
})
