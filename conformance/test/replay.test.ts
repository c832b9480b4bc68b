/**
 * Replay: a property failure prints its seed and path, and `--seed` with the path reproduces the same shrunk
 * counterexample on a fresh client (here against a fault variant of our server).
 */
import { createRelay } from "@custody-relay/server"
import { describe, expect, it } from "vitest"
import { runConformance } from "../src/Runner.js"
import { faults } from "../src/faults/catalogue.js"

const token = "secret-token"

describe("replaying a failure", () => {
  for (const [requirement, check] of [["TXN-PREC-2", "txn.precision.boundary"], ["TXN-FLOW-1", "model.sequences"]] as const) {
    it(`reproduces the shrunk counterexample of ${check} from its seed and path`, async () => {
      const fault = faults.find((candidate) => candidate.requirement === requirement)
      if (fault === undefined) throw new Error(`no fault for ${requirement}`)
      const relay = await createRelay({ database: ":memory:", controlToken: token, rateLimit: { limit: 100000, windowSeconds: 60 } })
      try {
        const target = { handler: fault.wrap(relay.handler, { token }) }
        const first = await runConformance({ target, control: { token }, checks: [check], seed: 77, numRuns: 40 })
        const failed = first.checks[0]
        expect(failed?.outcome).toBe("fail")
        expect(failed?.path).toMatch(/^\d+(:\d+)*$/)
        expect(failed?.violations[0]?.message).toContain(`seed ${failed?.seed}`)
        expect(failed?.replay).toContain(`--check ${check} --seed 77 --path ${failed?.path}`)
        const replayPath = /--replay-path (\S+)/.exec(failed?.replay ?? "")?.[1]
        const again = await runConformance({ target, control: { token }, checks: [check], seed: 77, numRuns: 40, ...(failed?.path === undefined ? {} : { path: failed.path }), ...(replayPath === undefined ? {} : { replayPath }) })
        expect(again.checks[0]?.outcome).toBe("fail")
        expect(again.checks[0]?.counterexample).toBe(failed?.counterexample)
      } finally {
        await relay.close()
      }
    }, 60_000)
  }
})
