/**
 * Every regular expression we ship runs in time linear in its input, proven rather than timed. A pattern that
 * backtracks (`/^\d*\.?\d*e\d+$/` once turned a 100 kB amount into seconds of CPU) lets one request stall the event
 * loop for every other; a test that times a hostile input only catches the patterns someone thought to attack.
 * recheck's automaton checker decides it from the pattern alone (Weideman et al., "Analyzing Matching Time Behavior
 * of Backtracking Regular Expression Matchers by Using Ambiguity of NFA"), the same answer on every machine. A pattern
 * it cannot decide (a lookahead, a back-reference) fails here too: write it without, or not as a pattern.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { check as recheck, type Diagnostics } from "recheck"
import ts from "typescript"

// Its own JavaScript build in a worker thread: the native and Java backends are not installed (pnpm-workspace.yaml),
// and a worker runs outside the coverage this process collects, which made the checker four times slower.
process.env["RECHECK_BACKEND"] = "worker"

const root = fileURLToPath(new URL("..", import.meta.url))
const shipped = [
  ...readdirSync(join(root, "packages")).map((name) => join(root, "packages", name, "src")),
  join(root, "conformance", "src")
]

interface Pattern {
  readonly file: string
  readonly source: string
  readonly flags: string
}

/** The regular expression literals of one TypeScript file, found by its parser (not by a pattern). */
const patternsIn = (file: string): ReadonlyArray<Pattern> => {
  const found: Array<Pattern> = []
  const visit = (node: ts.Node): void => {
    if (ts.isRegularExpressionLiteral(node)) {
      const end = node.text.lastIndexOf("/")
      found.push({ file: relative(root, file), source: node.text.slice(1, end), flags: node.text.slice(end + 1) })
    }
    ts.forEachChild(node, visit)
  }
  visit(ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true))
  return found
}

const typeScriptFiles = (dir: string): ReadonlyArray<string> =>
  readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((name) => name.endsWith(".ts")).map((name) => join(dir, name))

const patterns = shipped.flatMap(typeScriptFiles).flatMap(patternsIn)

// No time limit: the answer must not depend on the machine's speed.
const check = (source: string, flags: string): Promise<Diagnostics> => recheck(source, flags, { checker: "automaton", timeout: null })

const verdict = (diagnostics: Diagnostics): string =>
  diagnostics.status === "safe"
    ? "safe"
    : diagnostics.status === "vulnerable"
      ? `${diagnostics.complexity.type}, e.g. ${diagnostics.attack.pattern}`
      : `undecided (${diagnostics.error.kind})`

describe("every regular expression we ship", () => {
  it("is found in every package's source (the scan is not empty)", () => {
    const files = new Set(patterns.map((p) => p.file.split("/").slice(0, 2).join("/")))
    expect([...files].sort()).toEqual(["conformance/src", "packages/core", "packages/http", "packages/server", "packages/storage-sql"])
    expect(patterns).toContainEqual({ file: "packages/core/src/Money.ts", source: "^(0|[1-9][0-9]*)(\\.[0-9]+)?$", flags: "" })
  })

  it("the checker tells a backtracking pattern from a linear one", async () => {
    expect(verdict(await check("^(a+)+$", ""))).toMatch(/^exponential/)
    // The exponent form Money.ts once used, and the same language as it writes it now.
    expect(verdict(await check("^[+-]?\\d*\\.?\\d*[eE][+-]?\\d+$", ""))).toMatch(/^polynomial/)
    expect(verdict(await check("^[+-]?(?:\\d+(?:\\.\\d*)?|\\.\\d*)?[eE][+-]?\\d+$", ""))).toBe("safe")
    expect(verdict(await check("\\/+$", ""))).toMatch(/^polynomial/)
    expect(verdict(await check("^(?!-0$)-?\\d+$", ""))).toMatch(/^undecided/)
  })

  // TXN-PREC-1 and GEN-5XX-1: a hostile amount, path or header is refused in time linear in its length.
  it.each(patterns.map((p) => [`${p.file} /${p.source}/${p.flags}`, p] as const))("%s is linear", async (_, pattern) => {
    expect(verdict(await check(pattern.source, pattern.flags))).toBe("safe")
  })
})
