/**
 * The kit against our server, in-process: zero failures at default settings, within the time budget, and the
 * machinery end to end (CLI, reporters, expected failures, replay).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createRelay } from "@custody-relay/server"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest"
import { runCli } from "../src/CommandLine.js"
import { runConformance } from "../src/Runner.js"
import type { Report } from "../src/Report.js"

const pgUrl = process.env["RELAY_TEST_PG_URL"]
if (pgUrl === undefined || pgUrl === "") console.log("server.test.ts: the PostgreSQL run is skipped because RELAY_TEST_PG_URL is not set")

type Relay = Awaited<ReturnType<typeof createRelay>>
let relay: Relay
const token = "secret-token"

beforeAll(async () => {
  relay = await createRelay({ database: ":memory:", controlToken: token, rateLimit: { limit: 100000, windowSeconds: 60 } })
})
afterAll(async () => {
  await relay.close()
})

/** Checks that may be not-applicable on our server: they need a v1.1 control call it does not declare. */
const optional = (report: Report) => (check: Report["checks"][number]): boolean =>
  check.outcome === "pass" || (check.outcome === "not-applicable" && check.id === "auth.secret.not-logged" && report.implementation !== null)

const describeFindings = (report: Report): string =>
  JSON.stringify(
    report.checks.filter((check) => check.outcome !== "pass").map((check) => ({ id: check.id, outcome: check.outcome, message: check.message, violations: check.violations, warnings: check.warnings, replay: check.replay })),
    null,
    1
  )

describe("the kit against our server", () => {
  // How long the kit takes is a number `pnpm conformance` prints (its console reporter's last line), not a limit
  // here: on a shared machine a time limit fails for the machine's load, not for the kit.
  it("passes every check at default settings", async () => {
    const report = await runConformance({ target: { handler: relay.handler }, control: { token } })
    expect(report.checks.filter((check) => !optional(report)(check)), describeFindings(report)).toEqual([])
    expect(report.status).toBe("passed")
    expect(report.implementation?.name).toBe("custody-relay")
    expect(report.requirements.filter((requirement) => requirement.outcome !== "pass").map((requirement) => requirement.id)).toEqual([])
  }, 120_000)

  it("passes every check when approval does not activate (activation through the control), a profile choice", async () => {
    const manual = await createRelay({ database: ":memory:", controlToken: token, rateLimit: { limit: 100000, windowSeconds: 60 }, activateOnApproval: false })
    try {
      const report = await runConformance({ target: { handler: manual.handler }, control: { token }, numRuns: 30, seed: 31 })
      expect(report.checks.filter((check) => !optional(report)(check)), describeFindings(report)).toEqual([])
      expect(report.status).toBe("passed")
    } finally {
      await manual.close()
    }
  }, 120_000)

  for (const quorum of [0, 2]) {
    it(`TXN-INIT-2 TXN-FLOW-1: passes the approval and transaction checks with a quorum of ${quorum}, which its profile declares`, async () => {
      const other = await createRelay({ database: ":memory:", controlToken: token, rateLimit: { limit: 100000, windowSeconds: 60 }, defaultRequiredApprovals: quorum })
      try {
        const report = await runConformance({ target: { handler: other.handler }, control: { token }, tags: ["transactions", "approvals", "model"], numRuns: 10, seed: 41 })
        // Under a policy of no approvals the decision checks stand aside; every other one passes.
        const standsAside = (check: Report["checks"][number]) => quorum === 0 && check.outcome === "not-applicable" && (check.message ?? "").includes("approvals.required is 0")
        expect(report.checks.filter((check) => !optional(report)(check) && !standsAside(check)), describeFindings(report)).toEqual([])
        expect(report.checks.filter((check) => check.id === "txn.approval.policy").map((check) => check.outcome)).toEqual(["pass"])
        expect(report.checks.length).toBeGreaterThan(20)
      } finally {
        await other.close()
      }
    }, 120_000)
  }

  it.skipIf(pgUrl === undefined || pgUrl === "")("GEN-5XX-1: passes every check on PostgreSQL too, the fuzzing included (no 5xx)", async () => {
    const name = `relay_conformance_${process.pid}_${Date.now()}`
    const admin = new pg.Client({ connectionString: pgUrl })
    await admin.connect()
    await admin.query(`CREATE DATABASE ${name}`)
    const url = new URL(pgUrl ?? "")
    url.pathname = `/${name}`
    const onPostgres = await createRelay({ database: url.toString(), controlToken: token, rateLimit: { limit: 100000, windowSeconds: 60 } })
    try {
      const report = await runConformance({ target: { handler: onPostgres.handler }, control: { token }, numRuns: 30, seed: 7 })
      expect(report.checks.filter((check) => !optional(report)(check)), describeFindings(report)).toEqual([])
      expect(report.status).toBe("passed")
    } finally {
      await onPostgres.close()
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await admin.end()
    }
  }, 180_000)

  it("runs through the CLI: JSON statement, exit code, expected failures and re-run", async () => {
    const dir = mkdtempSync(join(tmpdir(), "conformance-"))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    const out: Array<string> = []
    const io = { stdout: (text: string) => void out.push(text), stderr: () => undefined, isTty: false }
    const overrides = { target: { handler: relay.handler }, control: { token } }
    expect(await runCli(["--check", "acc.create.duplicate", "--seed", "3", "--reporter", "json"], io, overrides)).toBe(0)
    const statement = JSON.parse(out.join("")) as Report
    expect(statement.kind).toBe("custody-relay-conformance-statement")
    expect(statement.checks.map((check) => [check.id, check.outcome, check.requirements])).toEqual([["acc.create.duplicate", "pass", ["ACC-CREATE-3", "ERR-CODE-1"]]])
    expect(statement.seed).toBe(3)
    // A listed check that passes is an unexpected pass; an unknown id is stale: both fail the run.
    const expectations = join(dir, "expected.json")
    writeFileSync(expectations, JSON.stringify({ expectedFailures: { "acc.create.duplicate": { reason: "thought broken" }, "no.such.check": "stale" } }))
    out.length = 0
    expect(await runCli(["--check", "acc.create.duplicate", "--expected-failures", expectations, "--reporter", "json"], io, overrides)).toBe(1)
    const failed = JSON.parse(out.join("")) as Report
    expect(failed.checks[0]?.outcome).toBe("unexpected-pass")
    expect(failed.unusedExpectations.map((entry) => entry.checkId)).toEqual(["no.such.check"])
    writeFileSync(join(dir, "report.json"), JSON.stringify(failed))
    out.length = 0
    expect(await runCli(["--rerun-failed", join(dir, "report.json"), "--reporter", "junit"], io, overrides)).toBe(0)
    expect(out.join("")).toContain('<testcase classname="conformance.accounts" name="acc.create.duplicate"')
    out.length = 0
    expect(await runCli(["--coverage"], io)).toBe(0)
    expect(out.join("")).toMatch(/TXN-PREC-2\s+MUST\s+txn\.precision\.boundary/)
    out.length = 0
    expect(await runCli(["doctor"], io, overrides)).toBe(0)
    expect(out.join("")).toContain("capability transactions.advance: probed")
    expect(readFileSync(expectations, "utf8")).toContain("stale")
  }, 60_000)

  it("a selection of checks that leaves its MUST ids tested is passed, and the console report groups by requirement", async () => {
    const out: Array<string> = []
    const code = await runCli(["--tag", "auth", "--num-runs", "5"], { stdout: (text) => void out.push(text), stderr: () => undefined, isTty: false }, { target: { handler: relay.handler }, control: { token } })
    expect(code).toBe(0)
    expect(out.join("")).toMatch(/AUTH-PERM-1\s+MUST\s+pass\s+auth\.permission\.matrix/)
  }, 60_000)
})
