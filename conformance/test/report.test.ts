import { describe, expect, it } from "vitest"
import { parseExpectations } from "../src/Expectations.js"
import type { Outcome } from "../src/Outcome.js"
import { applyExpectation, exitCodeOf, runStatus, summarizeRequirements, unusedExpectations, type CheckReport } from "../src/Report.js"
import type { Requirement } from "../src/requirements.js"

const catalogue: ReadonlyArray<Requirement> = [
  { id: "A-1", level: "MUST", text: "a" },
  { id: "B-1", level: "SHOULD", text: "b" },
  { id: "C-1", level: "PROFILE", text: "c" }
]

const check = (id: string, requirements: ReadonlyArray<string>, outcome: Outcome, violated: ReadonlyArray<string> = []): Pick<CheckReport, "id" | "requirements" | "outcome" | "violations"> => ({
  id,
  requirements,
  outcome,
  violations: violated.length === 0 ? [] : [{ requirementIds: violated, message: "m", exchanges: [] }]
})

describe("expected failures", () => {
  it("turn a failure or warning into expected-fail and a pass into unexpected-pass", () => {
    const entry = { checkId: "x", reason: "known" }
    expect(applyExpectation("fail", entry)).toBe("expected-fail")
    expect(applyExpectation("warn", entry)).toBe("expected-fail")
    expect(applyExpectation("pass", entry)).toBe("unexpected-pass")
    expect(applyExpectation("not-applicable", entry)).toBe("not-applicable")
    expect(applyExpectation("harness-error", entry)).toBe("harness-error")
    expect(applyExpectation("fail", undefined)).toBe("fail")
  })

  it("report entries for unknown, not-applicable or unrun-but-selected checks as unused", () => {
    const entries = [
      { checkId: "unknown.check", reason: "r" },
      { checkId: "na", reason: "r" },
      { checkId: "used", reason: "r" },
      { checkId: "unselected", reason: "r" }
    ]
    const checks = [
      { id: "na", outcome: "not-applicable" as const },
      { id: "used", outcome: "expected-fail" as const }
    ]
    const unused = unusedExpectations(entries, checks, new Set(["na", "used", "unselected"]), new Set(["na", "used"]))
    expect(unused.map((entry) => entry.checkId)).toEqual(["unknown.check", "na"])
  })

  it("parse both the wrapped and the bare form and demand a reason", () => {
    expect(parseExpectations({ expectedFailures: { "a.b": { reason: "why", issue: "https://x" } } })).toEqual({ ok: true, entries: [{ checkId: "a.b", reason: "why", issue: "https://x" }] })
    expect(parseExpectations({ "a.b": "why" })).toEqual({ ok: true, entries: [{ checkId: "a.b", reason: "why" }] })
    expect(parseExpectations({ "a.b": { reason: "" } }).ok).toBe(false)
    expect(parseExpectations({ "a.b": 3 }).ok).toBe(false)
    expect(parseExpectations([]).ok).toBe(false)
  })
})

describe("requirement summary", () => {
  it("takes the worst outcome over the checks covering an id, and only the ids a failure violated", () => {
    const summary = summarizeRequirements([check("one", ["A-1", "B-1"], "fail", ["A-1"]), check("two", ["B-1"], "pass")], catalogue)
    expect(summary.find((r) => r.id === "A-1")?.outcome).toBe("fail")
    expect(summary.find((r) => r.id === "A-1")?.violatedBy).toEqual(["one"])
    expect(summary.find((r) => r.id === "B-1")?.outcome).toBe("pass")
    expect(summary.find((r) => r.id === "C-1")?.outcome).toBe("untested")
  })

  it("marks ids covered only by not-applicable checks untested", () => {
    const summary = summarizeRequirements([check("one", ["A-1"], "not-applicable")], catalogue)
    expect(summary.find((r) => r.id === "A-1")?.outcome).toBe("untested")
  })
})

describe("run status", () => {
  it("fails on a failure, an unexpected pass, a harness error or a stale expectation", () => {
    for (const outcome of ["fail", "unexpected-pass", "harness-error"] as const) {
      const checks = [check("one", ["A-1"], outcome, ["A-1"])]
      expect(runStatus(checks, summarizeRequirements(checks, catalogue), [], true)).toBe("failed")
    }
    const passing = [check("one", ["A-1", "B-1", "C-1"], "pass")]
    expect(runStatus(passing, summarizeRequirements(passing, catalogue), [{ checkId: "gone", reason: "r" }], true)).toBe("failed")
  })

  it("is incomplete, never passed, when a MUST id was left untested", () => {
    const checks = [check("one", ["A-1"], "not-applicable"), check("two", ["B-1", "C-1"], "pass")]
    expect(runStatus(checks, summarizeRequirements(checks, catalogue), [], true)).toBe("incomplete")
  })

  it("passes with warnings, expected failures and untested SHOULD ids", () => {
    const checks = [check("one", ["A-1"], "warn", ["A-1"]), check("two", ["C-1"], "expected-fail", ["C-1"])]
    expect(runStatus(checks, summarizeRequirements(checks, catalogue), [], true)).toBe("passed")
  })

  it("judges a selection only on the ids its checks reach", () => {
    const checks = [check("two", ["B-1"], "pass")]
    expect(runStatus(checks, summarizeRequirements(checks, catalogue), [], false)).toBe("passed")
    expect(runStatus(checks, summarizeRequirements(checks, catalogue), [], true)).toBe("incomplete")
  })

  it("exits 0 only when passed", () => {
    expect(exitCodeOf("passed")).toBe(0)
    expect(exitCodeOf("failed")).toBe(1)
    expect(exitCodeOf("incomplete")).toBe(2)
  })
})
