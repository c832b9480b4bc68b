/**
 * The conformance statement: who was tested (from the profile), with which kit and interface version, every check
 * with its outcome, seed and requirement ids, and a summary per requirement. Pure functions, so the outcome and
 * expectation rules are unit-tested without a server.
 */
import type { Violation } from "./Check.js"
import type { ExpectedFailure } from "./Expectations.js"
import { failingOutcomes, outcomes, type Outcome, type RunStatus } from "./Outcome.js"
import { requirements as catalogue, type Requirement, type RequirementLevel } from "./requirements.js"

export interface CheckReport {
  readonly id: string
  readonly title: string
  readonly requirements: ReadonlyArray<string>
  readonly tags: ReadonlyArray<string>
  readonly outcome: Outcome
  /** The outcome before the expected-failures file was applied. */
  readonly rawOutcome: Outcome
  readonly seed: number
  readonly path?: string
  readonly counterexample?: string
  readonly durationMs: number
  readonly violations: ReadonlyArray<Violation>
  readonly warnings: ReadonlyArray<string>
  readonly message?: string
  readonly expectation?: ExpectedFailure
  /** CLI arguments that replay this check alone. */
  readonly replay: string
}

export type RequirementOutcome = "pass" | "fail" | "warn" | "expected-fail" | "untested"

export interface RequirementReport {
  readonly id: string
  readonly level: RequirementLevel
  readonly outcome: RequirementOutcome
  readonly checks: ReadonlyArray<string>
  /** Checks that reported a violation of this id. */
  readonly violatedBy: ReadonlyArray<string>
}

export interface Report {
  readonly kind: "custody-relay-conformance-statement"
  readonly kit: { readonly name: string; readonly version: string }
  readonly interfaceVersion: string
  readonly controlProtocolVersion: string
  readonly implementation: { readonly name: string; readonly version: string; readonly interfaceVersion: string } | null
  readonly target: string
  readonly mode: "control" | "black-box"
  readonly startedAt: string
  readonly durationMs: number
  readonly seed: number
  readonly numRuns: number
  readonly status: RunStatus
  readonly counts: Readonly<Record<Outcome, number>>
  readonly checks: ReadonlyArray<CheckReport>
  readonly requirements: ReadonlyArray<RequirementReport>
  readonly unusedExpectations: ReadonlyArray<ExpectedFailure>
  readonly doctor: ReadonlyArray<string>
}

/** The expected-failures rule: a listed failure becomes expected, a listed pass becomes unexpected. */
export const applyExpectation = (raw: Outcome, entry: ExpectedFailure | undefined): Outcome => {
  if (entry === undefined) return raw
  if (raw === "fail" || raw === "warn") return "expected-fail"
  if (raw === "pass") return "unexpected-pass"
  return raw
}

/** Entries whose check did not run, is unknown, or was not applicable: they are stale and fail the run. */
export const unusedExpectations = (
  entries: ReadonlyArray<ExpectedFailure>,
  checks: ReadonlyArray<Pick<CheckReport, "id" | "outcome">>,
  knownIds: ReadonlySet<string>,
  selectedIds: ReadonlySet<string>
): Array<ExpectedFailure> =>
  entries.filter((entry) => {
    if (!knownIds.has(entry.checkId)) return true
    if (!selectedIds.has(entry.checkId)) return false
    const check = checks.find((candidate) => candidate.id === entry.checkId)
    return check === undefined || check.outcome === "not-applicable"
  })

const rank: Readonly<Record<RequirementOutcome, number>> = { untested: 0, pass: 1, warn: 2, "expected-fail": 3, fail: 4 }

/** Per requirement: the worst outcome among the checks that cover it; untested when none of them ran. */
export const summarizeRequirements = (
  checks: ReadonlyArray<Pick<CheckReport, "id" | "requirements" | "outcome" | "violations">>,
  requirementList: ReadonlyArray<Requirement> = catalogue
): Array<RequirementReport> =>
  requirementList.map((requirement) => {
    const covering = checks.filter((check) => check.requirements.includes(requirement.id))
    const violatedBy = covering
      .filter((check) => check.violations.some((violation) => violation.requirementIds.includes(requirement.id)))
      .map((check) => check.id)
    let outcome: RequirementOutcome = "untested"
    for (const check of covering) {
      const violated = violatedBy.includes(check.id)
      let mine: RequirementOutcome
      switch (check.outcome) {
        case "pass":
        case "unexpected-pass":
          mine = "pass"
          break
        case "fail":
        case "harness-error":
          // A failing check fails the ids it reported; its other ids are at least tested.
          mine = violated || check.outcome === "harness-error" ? "fail" : "pass"
          break
        case "warn":
          mine = violated ? "warn" : "pass"
          break
        case "expected-fail":
          mine = violated ? "expected-fail" : "pass"
          break
        case "not-applicable":
          mine = "untested"
          break
      }
      if (rank[mine] > rank[outcome]) outcome = mine
    }
    return { id: requirement.id, level: requirement.level, outcome, checks: covering.map((check) => check.id), violatedBy }
  })

/**
 * Failed when any check failed, passed unexpectedly or broke the harness, or an expectation is stale; incomplete
 * when a MUST requirement within reach of the selected checks was left untested; passed otherwise.
 */
export const runStatus = (
  checks: ReadonlyArray<Pick<CheckReport, "outcome" | "requirements">>,
  requirementReports: ReadonlyArray<RequirementReport>,
  unused: ReadonlyArray<ExpectedFailure>,
  fullRun: boolean
): RunStatus => {
  if (unused.length > 0 || checks.some((check) => failingOutcomes.has(check.outcome))) return "failed"
  const inReach = new Set(checks.flatMap((check) => check.requirements))
  const untestedMust = requirementReports.some(
    (requirement) => requirement.level === "MUST" && requirement.outcome === "untested" && (fullRun || inReach.has(requirement.id))
  )
  return untestedMust ? "incomplete" : "passed"
}

export const countOutcomes = (checks: ReadonlyArray<Pick<CheckReport, "outcome">>): Record<Outcome, number> => {
  const counts = Object.fromEntries(outcomes.map((outcome) => [outcome, 0])) as Record<Outcome, number>
  for (const check of checks) counts[check.outcome] += 1
  return counts
}

/** Exit code of the CLI: 0 only when everything expected passed. */
export const exitCodeOf = (status: RunStatus): number => (status === "passed" ? 0 : status === "failed" ? 1 : 2)
