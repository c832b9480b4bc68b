#!/usr/bin/env node
/**
 * The `custody-relay` bin: `serve` (the default, `pnpm start`), `migrate` and `admin` (OperatorCli.ts). The Node
 * version is checked before anything else loads: below 22.14 the SQLite driver crashes on its first query with no
 * message at all (measured on 22.12 and 22.13), so this says why instead.
 */
const [major = 0, minor = 0] = process.versions.node.split(".").map(Number)
if (major < 22 || (major === 22 && minor < 14)) {
  process.stderr.write(`custody-relay needs Node 22.14 or later; this is Node ${process.versions.node}. Install a current LTS (24) from nodejs.org.\n`)
  process.exit(1)
}

const { runCommandLine } = await import("./OperatorCli.js")
runCommandLine(process.argv.slice(2)).then(
  (code) => {
    // `serve` resolves once it listens and keeps the process alive; every other command ends here.
    if (code !== 0 || (process.argv[2] !== undefined && process.argv[2] !== "serve")) process.exit(code)
  },
  (error: unknown) => {
    process.stderr.write(`custody-relay failed: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(1)
  }
)
