/** JUnit XML: one testcase per check, so CI dashboards show the run; requirement ids go in the properties. */
import type { Report } from "../Report.js"

const escape = (text: string): string =>
  text.replace(/[&<>"']/g, (char) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[char] ?? char).replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, "")

/**
 * What fails or stops the run besides its checks, as test cases of their own, so a dashboard that reads only the
 * test cases shows why: each stale expected-failure entry (a failure), and the MUST requirements an incomplete run
 * left untested (an error).
 */
const runCases = (report: Report): ReadonlyArray<{ readonly failure: boolean; readonly xml: string }> => {
  const stale = report.unusedExpectations.map((entry) => ({
    failure: true,
    xml: `    <testcase classname="conformance.run" name="${escape(`expected-failures entry ${entry.checkId}`)}" time="0.000"><failure message="stale expected-failure entry">${escape(`${entry.checkId} is listed in the expected-failures file but did not run or is not a check of this kit (reason given: ${entry.reason})`)}</failure></testcase>`
  }))
  // Those within the run's reach: a requirement some selected check covers (every one, in a full run).
  const untested = report.requirements
    .filter((requirement) => requirement.level === "MUST" && requirement.outcome === "untested" && requirement.checks.length > 0)
    .map((requirement) => requirement.id)
  const incomplete = report.status === "incomplete"
    ? [{
      failure: false,
      xml: `    <testcase classname="conformance.run" name="untested MUST requirements" time="0.000"><error message="incomplete">${escape(`the run left these MUST requirements untested: ${untested.join(", ")}`)}</error></testcase>`
    }]
    : []
  return [...stale, ...incomplete]
}

export const formatJunit = (report: Report): string => {
  const extra = runCases(report)
  const tests = report.checks.length + extra.length
  const failures = report.checks.filter((check) => check.outcome === "fail" || check.outcome === "unexpected-pass").length + extra.filter((entry) => entry.failure).length
  const errors = report.checks.filter((check) => check.outcome === "harness-error").length + extra.filter((entry) => !entry.failure).length
  const skipped = report.checks.filter((check) => check.outcome === "not-applicable" || check.outcome === "expected-fail").length
  const cases = report.checks.map((check) => {
    const details = [check.message ?? "", ...check.violations.map((violation) => `${violation.requirementIds.join(", ")}: ${violation.message}\n${violation.exchanges.join("\n")}`), ...check.warnings.map((warning) => `warning: ${warning}`), `replay: ${check.replay}`]
      .filter((line) => line.length > 0)
      .join("\n\n")
    let body = `<properties><property name="requirements" value="${escape(check.requirements.join(","))}"/><property name="seed" value="${check.seed}"/><property name="outcome" value="${check.outcome}"/></properties>`
    if (check.outcome === "fail" || check.outcome === "unexpected-pass") body += `<failure message="${escape(check.outcome)}">${escape(details)}</failure>`
    else if (check.outcome === "harness-error") body += `<error message="harness-error">${escape(details)}</error>`
    else if (check.outcome === "not-applicable") body += `<skipped message="${escape(check.message ?? "not applicable")}"/>`
    else if (check.outcome === "expected-fail") body += `<skipped message="${escape(`expected failure: ${check.expectation?.reason ?? ""}`)}"/>`
    else if (check.outcome === "warn") body += `<system-out>${escape(details)}</system-out>`
    return `    <testcase classname="conformance.${escape(check.tags[0] ?? "check")}" name="${escape(check.id)}" time="${(check.durationMs / 1000).toFixed(3)}">${body}</testcase>`
  })
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<testsuites name="custody-relay-conformance" tests="${tests}" failures="${failures}" errors="${errors}" skipped="${skipped}" time="${(report.durationMs / 1000).toFixed(3)}">`,
    `  <testsuite name="${escape(report.implementation?.name ?? report.target)}" tests="${tests}" failures="${failures}" errors="${errors}" skipped="${skipped}" timestamp="${report.startedAt}">`,
    `    <properties><property name="seed" value="${report.seed}"/><property name="status" value="${report.status}"/><property name="kitVersion" value="${report.kit.version}"/></properties>`,
    ...cases,
    ...extra.map((entry) => entry.xml),
    "  </testsuite>",
    "</testsuites>",
    ""
  ].join("\n")
}
