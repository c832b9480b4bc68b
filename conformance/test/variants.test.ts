/**
 * No false failures: implementations that answer what the interface leaves open ("not shown") otherwise than our
 * server does are correct, and the kit passes each of them with zero failures (issue 14). Each variant of the
 * spec-written fake changes one such answer; one run combines them all.
 */
import { describe, expect, it } from "vitest"
import { runConformance } from "../src/Runner.js"
import { type FakeVariant, FakeRelay } from "./support/FakeRelay.js"

const variants: ReadonlyArray<readonly [string, FakeVariant]> = [
  ["ERR-BODY-1: error bodies as { error: { code, detail } }, no string message", { errorBody: "nested" }],
  ["TXN-SHAPE-2: a transactionType other than WITHDRAWAL", { transactionType: "TRANSFER" }],
  ["TXN-FEE-3: an asset without fee estimation listed first in the profile", { noFeeEstimationFirst: true }],
  ["TXN-FEE-1: calculate-fee refuses an amount beyond the balance", { feeChecksFunds: true }],
  ["TXN-INIT-2: a policy that needs no approval (initiate answers pending_provider_approval)", { noApprovalNeeded: true }],
  ["WL-LIST-1 ACC-LIST-1: several filter values only as one comma-separated value", { commaOnly: true }],
  ["all of them at once", {
    errorBody: "nested",
    transactionType: "TRANSFER",
    noFeeEstimationFirst: true,
    feeChecksFunds: true,
    noApprovalNeeded: true,
    commaOnly: true
  }]
]

describe("the kit against compliant implementations that choose otherwise", () => {
  for (const [name, variant] of variants) {
    it(name, async () => {
      const fake = new FakeRelay({ token: "t", variant })
      const report = await runConformance({ target: { handler: fake.handler }, control: { token: "t" }, seed: 11, numRuns: 4 })
      const problems = report.checks
        .filter((check) => check.outcome !== "pass")
        .map((check) => ({ id: check.id, outcome: check.outcome, message: check.message, violations: check.violations.map((v) => `${v.requirementIds.join(",")}: ${v.message}`) }))
      expect(problems).toEqual([])
    }, 60_000)
  }
})
