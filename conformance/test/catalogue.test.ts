import { existsSync, readFileSync } from "node:fs"
import { dirname, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { allChecks } from "../src/checks/index.js"
import { checkTableRow, coverageMatrix, formatCoverage, uncovered, unknownRequirementIds } from "../src/Coverage.js"
import { faults } from "../src/faults/catalogue.js"
import { requirements } from "../src/requirements.js"
import frozenIds from "./check-ids.json" with { type: "json" }

const here = dirname(fileURLToPath(import.meta.url))
const sharedCatalogue = resolve(here, "../../../shared/spec/requirements.md")

const parseCatalogue = (text: string): Array<{ id: string; level: string; text: string }> =>
  text
    .split("\n")
    .map((line) => /^\| ([A-Z0-9-]+) \| (MUST|SHOULD|PROFILE) \| (.*) \|$/.exec(line))
    .filter((match): match is RegExpExecArray => match !== null)
    .map((match) => ({ id: match[1] ?? "", level: match[2] ?? "", text: match[3] ?? "" }))

describe("the requirement catalogue", () => {
  it("is in step with ../shared/spec/requirements.md whenever that file is present", () => {
    // The kit ships its own copy so it runs anywhere; next to the shared spec, the two must agree.
    if (!existsSync(sharedCatalogue)) return
    const shared = parseCatalogue(readFileSync(sharedCatalogue, "utf8"))
    expect(shared.length).toBeGreaterThan(0)
    expect(requirements.map((r) => ({ id: r.id, level: r.level, text: r.text }))).toEqual(shared)
  })

  it("has unique ids", () => {
    expect(new Set(requirements.map((r) => r.id)).size).toBe(requirements.length)
  })
})

describe("coverage", () => {
  it("covers every MUST, SHOULD and PROFILE id with at least one check", () => {
    expect(uncovered(allChecks).map((r) => `${r.level} ${r.id}`)).toEqual([])
  })

  it("names only known requirement ids", () => {
    expect(unknownRequirementIds(allChecks)).toEqual([])
  })

  it("--coverage names, for every MUST id, the faults that prove its checks fail a wrong server", () => {
    const printed = formatCoverage(allChecks, faults)
    expect(printed).not.toContain("faults: (none)")
    for (const requirement of requirements.filter((r) => r.level === "MUST")) expect(printed).toMatch(new RegExp(`^${requirement.id} [^\\n]*\\n +faults: \\S`, "m"))
  })

  it("gives every row of the matrix its checks", () => {
    const matrix = coverageMatrix(allChecks)
    expect(matrix).toHaveLength(requirements.length)
    for (const row of matrix) expect(row.checks.length).toBeGreaterThan(0)
  })
})

describe("check ids", () => {
  it("are unique and dotted lower-case", () => {
    const ids = allChecks.map((check) => check.id)
    expect(new Set(ids).size).toBe(ids.length)
    for (const id of ids) expect(id).toMatch(/^[a-z]+(\.[a-z0-9-]+)+$/)
  })

  it("are immutable: every id ever published still exists (new ids are appended to check-ids.json)", () => {
    const ids = new Set(allChecks.map((check) => check.id))
    for (const id of frozenIds) expect(ids.has(id), `check id ${id} was removed or renamed`).toBe(true)
    for (const id of ids) expect(frozenIds.includes(id), `new check id ${id}: add it to test/check-ids.json`).toBe(true)
  })

  it("are listed in docs/conformance.md with their own title, requirements and needs", () => {
    const docs = readFileSync(resolve(here, "../../docs/conformance.md"), "utf8")
    for (const check of allChecks) expect(docs, check.id).toContain(checkTableRow(check))
  })

  it("each name at least one requirement and a tag", () => {
    for (const check of allChecks) {
      expect(check.requirements.length, check.id).toBeGreaterThan(0)
      expect(check.tags.length, check.id).toBeGreaterThan(0)
    }
  })
})
