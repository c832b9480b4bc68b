/**
 * The implementation's expected-failures file: check id -> reason. It belongs to the implementation, never to the
 * kit. A listed check that passes is an unexpected pass, and an entry no check used is stale; both fail the run,
 * so the file cannot drift (the lesson of the OpenID suite and of Kubernetes' skip lists).
 */
import { isRecord } from "./Shape.js"

export interface ExpectedFailure {
  readonly checkId: string
  readonly reason: string
  /** Optional link to the implementation's issue tracker. */
  readonly issue?: string
}

export type ExpectationsParse = { readonly ok: true; readonly entries: ReadonlyArray<ExpectedFailure> } | { readonly ok: false; readonly problems: ReadonlyArray<string> }

/**
 * Accepts `{ "expectedFailures": { "<check id>": { "reason": "...", "issue": "..." } | "<reason>" } }` or the bare
 * map. Every entry needs a non-empty reason.
 */
export const parseExpectations = (value: unknown): ExpectationsParse => {
  const map = isRecord(value) && isRecord(value["expectedFailures"]) ? value["expectedFailures"] : value
  if (!isRecord(map)) return { ok: false, problems: ["the expected-failures file must be a JSON object keyed by check id"] }
  const problems: Array<string> = []
  const entries: Array<ExpectedFailure> = []
  for (const [checkId, raw] of Object.entries(map)) {
    if (typeof raw === "string") {
      if (raw.trim().length === 0) problems.push(`${checkId}: the reason is empty`)
      else entries.push({ checkId, reason: raw })
    } else if (isRecord(raw) && typeof raw["reason"] === "string" && raw["reason"].trim().length > 0) {
      entries.push(typeof raw["issue"] === "string" ? { checkId, reason: raw["reason"], issue: raw["issue"] } : { checkId, reason: raw["reason"] })
    } else {
      problems.push(`${checkId}: an entry needs a non-empty "reason"`)
    }
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, entries }
}
