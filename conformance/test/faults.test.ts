/**
 * Proof of power: every fault variant of our server (a wrapper around its handler, see faults/catalogue.ts) is
 * reported under its requirement id by the checks that cover that id.
 */
import { createRelay } from "@custody-relay/server"
import { describe, expect, it } from "vitest"
import { allChecks } from "../src/checks/index.js"
import { runConformance } from "../src/Runner.js"
import { faults } from "../src/faults/catalogue.js"

const token = "secret-token"

describe("fault variants of our server are reported under the right requirement", () => {
  it("has at least 15 faults over distinct requirement ids", () => {
    expect(faults.length).toBeGreaterThanOrEqual(15)
    expect(new Set(faults.map((fault) => fault.requirement)).size).toBeGreaterThanOrEqual(15)
  })

  for (const fault of faults.filter((candidate) => candidate.target !== "fake")) {
    it(`${fault.requirement}: ${fault.name}`, async () => {
      const relay = await createRelay({ database: ":memory:", controlToken: token, rateLimit: { limit: 100000, windowSeconds: 60 } })
      try {
        // Every check that covers the requirement runs, plus the ones the fault names.
        const checks = allChecks.filter((check) => check.requirements.includes(fault.requirement) || (fault.checks ?? []).includes(check.id)).map((check) => check.id)
        const report = await runConformance({ target: { handler: fault.wrap(relay.handler, { token }) }, control: { token }, checks, seed: 20261122, numRuns: 25 })
        const requirement = report.requirements.find((candidate) => candidate.id === fault.requirement)
        const findings = JSON.stringify(report.checks.filter((check) => check.outcome !== "pass").map((check) => [check.id, check.outcome, check.message, check.violations.map((v) => `${v.requirementIds.join(",")}: ${v.message}`)]), null, 1)
        expect(requirement?.violatedBy.length, findings).toBeGreaterThan(0)
        // A SHOULD requirement is reported as a warning; every other level fails the run.
        expect(requirement?.outcome, findings).toBe(requirement?.level === "SHOULD" ? "warn" : "fail")
        if (requirement?.level !== "SHOULD") expect(report.status).toBe("failed")
      } finally {
        await relay.close()
      }
    }, 60_000)
  }
})
