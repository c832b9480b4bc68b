/**
 * The requirement-by-check matrix: which checks cover which requirement ids, and which faults of the catalogue
 * prove those checks fail a wrong server. The kit's own tests fail when a MUST or SHOULD id is covered by no check
 * or a MUST id by no fault, and `--coverage` prints the matrix.
 */
import type { Check } from "./Check.js"
import { requirements, type Requirement } from "./requirements.js"

export interface CoverageRow {
  readonly requirement: Requirement
  readonly checks: ReadonlyArray<string>
}

export const coverageMatrix = (checks: ReadonlyArray<Check>, catalogue: ReadonlyArray<Requirement> = requirements): Array<CoverageRow> =>
  catalogue.map((requirement) => ({ requirement, checks: checks.filter((check) => check.requirements.includes(requirement.id)).map((check) => check.id) }))

/** MUST and SHOULD ids no check covers (PROFILE ids too: each is checked against the declared profile). */
export const uncovered = (checks: ReadonlyArray<Check>, catalogue: ReadonlyArray<Requirement> = requirements): Array<Requirement> =>
  coverageMatrix(checks, catalogue)
    .filter((row) => row.checks.length === 0)
    .map((row) => row.requirement)

/** Requirement ids a check names that the catalogue does not know. */
export const unknownRequirementIds = (checks: ReadonlyArray<Check>, catalogue: ReadonlyArray<Requirement> = requirements): Array<string> => {
  const known = new Set(catalogue.map((requirement) => requirement.id))
  return [...new Set(checks.flatMap((check) => check.requirements).filter((id) => !known.has(id)))]
}

export const formatCoverage = (checks: ReadonlyArray<Check>, faults: ReadonlyArray<{ readonly name: string; readonly requirement: string }> = []): string => {
  const rows = coverageMatrix(checks)
  const width = Math.max(...rows.map((row) => row.requirement.id.length))
  return rows
    .map((row) => {
      const line = `${row.requirement.id.padEnd(width)}  ${row.requirement.level.padEnd(7)}  ${row.checks.length === 0 ? "(uncovered)" : row.checks.join(", ")}`
      const proofs = faults.filter((fault) => fault.requirement === row.requirement.id).map((fault) => fault.name)
      if (faults.length === 0) return line
      const none = row.requirement.level === "MUST" ? "(none)" : "-"
      return `${line}\n${" ".repeat(width + 11)}faults: ${proofs.length === 0 ? none : proofs.join("; ")}`
    })
    .join("\n")
}

/** The row of docs/conformance.md's check table for one check: the docs read it from the check itself. */
export const checkTableRow = (check: Check): string => {
  const needs = check.needs.length === 0 ? "none (black-box)" : check.needs.join(", ")
  return `| \`${check.id}\` | ${check.title.replaceAll("|", "\\|")} | ${check.requirements.join(", ")} | ${needs} |`
}
