#!/usr/bin/env node
/** The bin `custody-relay-conformance`. */
import { runCli } from "./CommandLine.js"

// A closed pipe (`| head`) ends the output, not the process with a stack trace.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(process.exitCode ?? 0)
  throw error
})

runCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  isTty: process.stderr.isTTY === true
}).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`custody-relay-conformance: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = 2
  }
)
