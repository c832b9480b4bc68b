/** JUnit XML: one testcase per check, so CI dashboards show the run; requirement ids go in the properties. */
import type { Report } from "../Report.js"

const escape = (text: string): string =>
  text.replace(/[&<>"']/g, (char) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[char] ?? char).replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, "")

export const formatJunit = (report: Report): string => {
  const failures = report.checks.filter((check) => check.outcome === "fail" || check.outcome === "unexpected-pass").length
  const errors = report.checks.filter((check) => check.outcome === "harness-error").length
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
    `<testsuites name="custody-relay-conformance" tests="${report.checks.length}" failures="${failures}" errors="${errors}" skipped="${skipped}" time="${(report.durationMs / 1000).toFixed(3)}">`,
    `  <testsuite name="${escape(report.implementation?.name ?? report.target)}" tests="${report.checks.length}" failures="${failures}" errors="${errors}" skipped="${skipped}" timestamp="${report.startedAt}">`,
    `    <properties><property name="seed" value="${report.seed}"/><property name="status" value="${report.status}"/><property name="kitVersion" value="${report.kit.version}"/></properties>`,
    ...cases,
    "  </testsuite>",
    "</testsuites>",
    ""
  ].join("\n")
}
