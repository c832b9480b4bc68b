import { describe, expect, it } from "vitest"
import { requirements } from "../src/requirements.js"
import { runConformance } from "../src/Runner.js"
import { faults } from "../src/faults/catalogue.js"
import { FakeRelay } from "../src/reference/FakeRelay.js"

describe("the fault catalogue", () => {
  it("has, for every MUST requirement, at least one fault that fails the run", () => {
    const faulted = new Set(faults.map((fault) => fault.requirement))
    expect(requirements.filter((requirement) => requirement.level === "MUST" && !faulted.has(requirement.id)).map((requirement) => requirement.id)).toEqual([])
  })
})

describe.concurrent("fault variants of the spec-written fake are reported under the right requirement", () => {
  for (const fault of faults) {
    it(`${fault.requirement}: ${fault.name}`, async () => {
      const fake = new FakeRelay({ token: "t" })
      const report = await runConformance({ target: { handler: fault.wrap(fake.handler, { token: "t" }) }, control: { token: "t" }, seed: 11, numRuns: 25, ...(fault.checks === undefined ? {} : { checks: fault.checks }) })
      const requirement = report.requirements.find((r) => r.id === fault.requirement)
      expect(requirement?.violatedBy.length, JSON.stringify(report.checks.map((c) => [c.id, c.outcome, c.message, c.violations.map((v) => v.requirementIds.join(",") + " " + v.message)]), null, 1)).toBeGreaterThan(0)
      // A SHOULD requirement is reported as a warning; every other level fails the run.
      expect(requirement?.outcome).toBe(requirement?.level === "SHOULD" ? "warn" : "fail")
      if (requirement?.level !== "SHOULD") expect(report.status).toBe("failed")
    })
  }
})
