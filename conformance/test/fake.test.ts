import { describe, expect, it } from "vitest"
import { runConformance } from "../src/Runner.js"
import { FakeRelay } from "../src/reference/FakeRelay.js"

describe("the kit against a spec-written fake", () => {
  it("reports no failure", async () => {
    const fake = new FakeRelay({ token: "t" })
    const report = await runConformance({ target: { handler: fake.handler }, control: { token: "t" }, seed: 7, numRuns: 4 })
    console.log(report.checks.map((c) => `${c.id} ${c.outcome} ${c.durationMs}`).join("\n"))
    const problems = report.checks.filter((check) => check.outcome !== "pass").map((check) => ({ id: check.id, outcome: check.outcome, message: check.message, violations: check.violations.map((v) => `${v.requirementIds.join(",")}: ${v.message}\n${v.exchanges.join("\n")}`), warnings: check.warnings }))
    expect(problems).toEqual([])
    expect(report.status).toBe("passed")
  })
})
