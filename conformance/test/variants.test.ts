/**
 * No false failures: implementations that answer what the interface leaves open ("not shown") otherwise than our
 * server does are correct, and the kit passes each of them with zero failures (issue 14). Each variant of the
 * spec-written fake changes one such answer; one run combines them all.
 */
import { describe, expect, it } from "vitest"
import { runConformance } from "../src/Runner.js"
import { type FakeVariant, FakeRelay } from "../src/reference/FakeRelay.js"

const all: FakeVariant = {
  errorBody: "nested",
  transactionType: "TRANSFER",
  noFeeEstimationFirst: true,
  feeChecksFunds: true,
  multiValue: "comma",
  quorum: 2,
  decisionCalls: "body",
  statusNames: "own",
  activateOnApproval: true,
  whitelistCreate200: true,
  reserveAmountOnly: true
}

const variants: ReadonlyArray<readonly [string, FakeVariant]> = [
  ["ERR-BODY-1: error bodies as { error: { code, detail } }, no string message", { errorBody: "nested" }],
  ["ERR-BODY-1: the same, declared with messagePointer /error/detail", { errorBody: "nested", declare: true }],
  ["TXN-FLOW-1 TXN-LIST-2: status names and groups of its own (QUEUED, CONFIRMED, REJECTED, CANCELLED)", { statusNames: "own" }],
  ["TXN-SHAPE-2: a transactionType other than WITHDRAWAL, declared", { transactionType: "TRANSFER", declare: true }],
  ["TXN-INIT-2 TXN-FLOW-1: quorum 0 (initiate answers a pending status past approval)", { quorum: 0 }],
  ["TXN-FLOW-1: quorum 2", { quorum: 2 }],
  ["TXN-FLOW-1: quorum 1, decisions called with the id in the body", { decisionCalls: "body" }],
  ["TXN-FLOW-1: quorum 2, no approval endpoint: decisions through the control protocol (transactions.decide)", { quorum: 2, decisionCalls: "control" }],
  ["ACC-ACTIVE-1: approval activates the account at once", { activateOnApproval: true }],
  ["WL-CREATE-1: whitelist creation answers 200", { whitelistCreate200: true }],
  ["WL-LIST-1 ACC-LIST-1: several filter values only as one comma-separated value", { multiValue: "comma" }],
  ["WL-LIST-1 ACC-LIST-1: several filter values only as repeated keys, declared", { multiValue: "repeat", declare: true }],
  ["TXN-FEE-3: an asset without fee estimation listed first in the profile", { noFeeEstimationFirst: true }],
  ["TXN-FEE-1: calculate-fee refuses an amount beyond the balance", { feeChecksFunds: true }],
  ["TXN-FEE-1: calculate-fee checks funds, declared", { feeChecksFunds: true, declare: true }],
  ["TXN-FLOW-1: initiation reserves only the amount, the fee is charged at completion (undeclared)", { reserveAmountOnly: true }],
  ["TXN-FLOW-1: initiation reserves only the amount, declared", { reserveAmountOnly: true, declare: true }],
  ["all of them at once, undeclared", all],
  ["all of them at once, declared", { ...all, declare: true }]
]

describe.concurrent("the kit against compliant implementations that choose otherwise", () => {
  for (const [name, variant] of variants) {
    it(name, async () => {
      const fake = new FakeRelay({ token: "t", variant })
      const report = await runConformance({ target: { handler: fake.handler }, control: { token: "t" }, seed: 11, numRuns: 4 })
      // Zero failures; the only checks allowed to stand aside are the decision checks under a policy without approvals.
      // ...and the endpoint-permission check when decisions go through the control protocol (there is no endpoint).
      const standsAside = (check: (typeof report.checks)[number]) =>
        check.outcome === "not-applicable" &&
        ((variant.quorum === 0 && (check.message ?? "").includes("approvals.required is 0")) ||
          (variant.decisionCalls === "control" && check.id === "txn.approval.permission"))
      const problems = report.checks
        .filter((check) => check.outcome !== "pass" && !standsAside(check))
        .map((check) => ({ id: check.id, outcome: check.outcome, message: check.message, violations: check.violations.map((v) => `${v.requirementIds.join(",")}: ${v.message}`) }))
      expect(problems).toEqual([])
    }, 60_000)
  }
})
