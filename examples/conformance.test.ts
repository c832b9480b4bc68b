/**
 * The conformance kit as a library in your own vitest suite: start your server (here ours, in process; yours
 * might be a child process or a container), point the kit at it, and fail the suite with the kit's own report.
 * Copy this file next to your server's tests and replace `startServer`.
 *
 *   pnpm vitest run examples/conformance.test.ts
 */
import { formatConsole, runConformance } from "@custody-relay/conformance"
import { createRelay } from "@custody-relay/server"
import { afterAll, beforeAll, expect, it } from "vitest"

const controlToken = "a-long-random-token-for-tests-only"
let server: Awaited<ReturnType<typeof createRelay>>

/** Your server, with the test control protocol switched on for this run only. */
const startServer = () => createRelay({ database: ":memory:", controlToken, rateLimit: { limit: 100000, windowSeconds: 60 } })

beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server.close())

it("conforms to the Custody Relay interface", async () => {
  // An in-process handler here; for a server over the network: target: { baseUrl: "http://127.0.0.1:8080" }.
  const report = await runConformance({ target: { handler: server.handler }, control: { token: controlToken }, numRuns: 20, seed: 1 })
  // The console report names each violated requirement, the failing exchanges and how to replay them.
  expect(report.status, formatConsole(report)).toBe("passed")
}, 120_000)
