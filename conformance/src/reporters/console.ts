/**
 * The console reporter: a progress line while the run goes, then failures with their evidence and replay
 * arguments, a summary grouped by requirement id, and the run status.
 */
import type { ProgressEvent } from "../Runner.js"
import type { Report } from "../Report.js"

const symbol: Readonly<Record<string, string>> = {
  pass: "✓",
  fail: "✗",
  warn: "!",
  "expected-fail": "x",
  "unexpected-pass": "✗",
  "not-applicable": "-",
  "harness-error": "✗"
}

/** Writes `[12/50] check.id ...` over one line on a TTY, one line per finished check otherwise. */
export const progressLine =
  (write: (text: string) => void, isTty: boolean) =>
  (event: ProgressEvent): void => {
    const counter = `[${event.index + 1}/${event.total}]`
    if (event.outcome === undefined) {
      if (isTty) write(`\r\x1b[2K${counter} ${event.checkId} …`)
      return
    }
    const line = `${counter} ${symbol[event.outcome] ?? "?"} ${event.checkId} ${event.outcome} (${event.durationMs ?? 0} ms)`
    write(isTty ? `\r\x1b[2K${line}\n` : `${line}\n`)
  }

const indent = (text: string, by = "    "): string =>
  text
    .split("\n")
    .map((line) => by + line)
    .join("\n")

export const formatConsole = (report: Report): string => {
  const lines: Array<string> = []
  const inProcess = report.target.startsWith("in-process") ? ", in-process run (no network between kit and target)" : ""
  lines.push(`Custody Relay conformance ${report.kit.version} (interface ${report.interfaceVersion}, control protocol ${report.controlProtocolVersion})${inProcess}`)
  lines.push(`target: ${report.target}; implementation: ${report.implementation === null ? "unknown" : `${report.implementation.name} ${report.implementation.version}`}; mode: ${report.mode}`)
  lines.push(`seed ${report.seed}, numRuns ${report.numRuns}, ${(report.durationMs / 1000).toFixed(1)} s`)
  if (report.doctor.length > 0) {
    lines.push("", "doctor:")
    for (const line of report.doctor) lines.push(`  ${line}`)
  }
  const notable = report.checks.filter((check) => !["pass", "not-applicable", "expected-fail"].includes(check.outcome))
  if (notable.length > 0) lines.push("", "findings:")
  for (const check of notable) {
    lines.push(`  ${symbol[check.outcome] ?? "?"} ${check.id} [${check.requirements.join(", ")}]: ${check.outcome}`)
    if (check.message !== undefined) lines.push(indent(check.message))
    for (const violation of check.violations) {
      lines.push(indent(`violates ${violation.requirementIds.join(", ")}: ${violation.message}`))
      for (const exchange of violation.exchanges) lines.push(indent(exchange, "      "))
    }
    for (const warning of check.warnings) lines.push(indent(`warning: ${warning}`))
    lines.push(indent(`replay: custody-relay-conformance ${check.replay}`))
  }
  const notApplicable = report.checks.filter((check) => check.outcome === "not-applicable")
  if (notApplicable.length > 0) {
    lines.push("", "not applicable:")
    for (const check of notApplicable) lines.push(`  - ${check.id}: ${check.message ?? ""}`)
  }
  const expected = report.checks.filter((check) => check.outcome === "expected-fail")
  if (expected.length > 0) {
    lines.push("", "expected failures:")
    for (const check of expected) lines.push(`  x ${check.id}: ${check.expectation?.reason ?? ""}`)
  }
  if (report.unusedExpectations.length > 0) {
    lines.push("", "stale expected-failure entries (they fail the run):")
    for (const entry of report.unusedExpectations) lines.push(`  ${entry.checkId}: ${entry.reason}`)
  }
  lines.push("", "by requirement:")
  for (const requirement of report.requirements) {
    if (requirement.checks.length === 0 && requirement.outcome === "untested") {
      lines.push(`  ${requirement.id.padEnd(13)} ${requirement.level.padEnd(7)} untested (no selected check)`)
      continue
    }
    lines.push(`  ${requirement.id.padEnd(13)} ${requirement.level.padEnd(7)} ${requirement.outcome.padEnd(13)} ${requirement.checks.join(", ")}`)
  }
  const counts = Object.entries(report.counts)
    .filter(([, count]) => count > 0)
    .map(([outcome, count]) => `${count} ${outcome}`)
    .join(", ")
  lines.push("", `${report.checks.length} checks: ${counts}`)
  lines.push(`status: ${report.status.toUpperCase()}`)
  return lines.join("\n") + "\n"
}
