/**
 * `pnpm conformance`: with no target flags it starts our server in-process (createRelay on an in-memory database,
 * a random control token) and runs the kit's CLI against its handler; with --base-url (or --config) the flags go to
 * the CLI unchanged and the kit runs against that server instead. This script sits outside `src`, so it may
 * import our server; the kit itself never does.
 */
import { randomBytes } from "node:crypto"
import { createRelay } from "@custody-relay/server"
import { runCli } from "../src/CommandLine.js"

const argv = process.argv.slice(2).filter((arg) => arg !== "--")
const io = {
  stdout: (text: string) => process.stdout.write(text),
  stderr: (text: string) => process.stderr.write(text),
  isTty: process.stderr.isTTY === true
}
const external = argv.some((arg) => arg === "--base-url" || arg.startsWith("--base-url=") || arg === "--config" || arg.startsWith("--config="))
const offline = argv.includes("--coverage") || argv.includes("--list") || argv.includes("--help")

const main = async (): Promise<number> => {
  if (external || offline) return runCli(argv, io)
  const controlToken = randomBytes(24).toString("hex")
  const relay = await createRelay({ database: ":memory:", controlToken, rateLimit: { limit: 100000, windowSeconds: 60 } })
  try {
    return await runCli(argv, io, { target: { handler: relay.handler }, control: { token: controlToken } })
  } finally {
    await relay.close()
  }
}

main().then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`conformance: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exitCode = 2
  }
)
