/**
 * Outcomes of a check and of a run. A check fails (MUST or PROFILE), warns (only SHOULD violated, or a vacuous
 * run), passes, is not applicable (the target lacks a control call it needs) or breaks the harness. The
 * implementation's expected-failures file turns fail into expected-fail and pass into unexpected-pass.
 */
export type Outcome = "pass" | "fail" | "warn" | "expected-fail" | "unexpected-pass" | "not-applicable" | "harness-error"

export const outcomes: ReadonlyArray<Outcome> = ["pass", "fail", "warn", "expected-fail", "unexpected-pass", "not-applicable", "harness-error"]

/** Outcomes that fail the run. */
export const failingOutcomes: ReadonlySet<Outcome> = new Set<Outcome>(["fail", "unexpected-pass", "harness-error"])

export type RunStatus = "passed" | "failed" | "incomplete"
