#!/usr/bin/env node
/**
 * The `custody-relay` bin: `serve` (the default, `pnpm start`), `migrate` and `admin` (OperatorCli.ts).
 */
import { runCommandLine } from "./OperatorCli.js"

runCommandLine(process.argv.slice(2)).then(
  (code) => {
    // `serve` resolves once it listens and keeps the process alive; every other command ends here.
    if (code !== 0 || process.argv[2] !== undefined && process.argv[2] !== "serve") process.exit(code)
  },
  (error: unknown) => {
    process.stderr.write(`custody-relay failed: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(1)
  }
)
