import { Decimal } from "decimal.js"
import { describe, expect, it } from "vitest"
import { sequentiallyExplainable } from "../src/checks/concurrency.js"
import { balances, RelayModel } from "../src/checks/model.js"
import { parseProfile } from "../src/Profile.js"
import { checkSeed, selectChecks } from "../src/Runner.js"
import { allChecks } from "../src/checks/index.js"
import { isDecimalString, isIsoUtc } from "../src/Shape.js"
import { formatJunit } from "../src/reporters/junit.js"
import { formatExchange, type HttpResult, joinPath, parseJson } from "../src/Transport.js"
import { estimatedFeeText } from "../src/checks/records.js"
import type { Report } from "../src/Report.js"

export const sampleProfile = {
  name: "sample",
  version: "1.0.0",
  interfaceVersion: "v1",
  assets: [{ assetId: "BTC", precision: 8, chainType: "bitcoin", sampleAddresses: { valid: ["bc1q"], invalid: ["x"] } }],
  accountStatuses: ["pending_approval", "approved", "rejected", "active"],
  transactionStatuses: [
    { status: "AWAITING_SIGNATURE", group: "pending" },
    { status: "COMPLETED", group: "completed" },
    { status: "FAILED", group: "failed" }
  ],
  whitelistStatuses: ["PENDING", "APPROVED", "REJECTED", "ARCHIVED"],
  rateLimit: { limit: 100, windowSeconds: 60 },
  capabilities: ["accounts.activate"]
}

describe("profile validation", () => {
  it("accepts a complete profile and reads feeEstimation as true by default", () => {
    const parsed = parseProfile(sampleProfile)
    expect(parsed.ok).toBe(true)
    if (parsed.ok) expect(parsed.profile.assets[0]?.feeEstimation).toBe(true)
  })

  it("names every problem of a broken profile", () => {
    const parsed = parseProfile({ ...sampleProfile, rateLimit: { limit: "many" }, transactionStatuses: [{ status: "DONE", group: "completed" }] })
    expect(parsed.ok).toBe(false)
    if (!parsed.ok) expect(parsed.problems.join("\n")).toMatch(/rateLimit.limit/)
  })

  it("demands the statuses the interface names and a status per group", () => {
    const parsed = parseProfile({ ...sampleProfile, accountStatuses: ["pending_approval"], transactionStatuses: [{ status: "DONE", group: "completed" }] })
    expect(parsed.ok).toBe(false)
    if (!parsed.ok) {
      expect(parsed.problems.join("\n")).toMatch(/lacks approved/)
      expect(parsed.problems.join("\n")).toMatch(/group pending/)
    }
  })
})

describe("sequential explanations of concurrent initiations", () => {
  const cost = [new Decimal(3), new Decimal(3), new Decimal(3), new Decimal(3)]
  it("accept exactly what a sequential order would accept", () => {
    expect(sequentiallyExplainable(new Decimal(10), cost, [true, true, true, false])).toBe(true)
    expect(sequentiallyExplainable(new Decimal(10), cost, [true, false, true, true])).toBe(true)
  })
  it("reject an overspend and a refusal no order explains", () => {
    expect(sequentiallyExplainable(new Decimal(10), cost, [true, true, true, true])).toBe(false)
    expect(sequentiallyExplainable(new Decimal(10), cost, [true, true, false, false])).toBe(false)
  })
})

describe("the reference model", () => {
  it("moves a pending account once and refuses a second decision", () => {
    const model = new RelayModel(undefined)
    model.accounts.push({ id: "a", assetId: "BTC", status: "pending_approval", balance: balances(0) })
    const account = model.accounts[0]!
    expect(model.decide(account, "approved")).toBe(true)
    expect(model.decide(account, "rejected")).toBe(false)
    expect(account.status).toBe("approved")
  })

  it("TXN-FLOW-1: reserves on initiation, releases on failure, settles and credits on completion, under each funds reading", () => {
    const model = new RelayModel(undefined)
    model.accounts.push({ id: "s", assetId: "BTC", status: "active", balance: balances(10) }, { id: "d", assetId: "BTC", status: "active", balance: balances(0) })
    const base = { sourceId: "s", destinationId: "d", destinationType: "internal" as const, amount: new Decimal(2), fee: new Decimal("0.5"), group: "pending" as const }
    model.reserve({ ...base, id: "t1" })
    model.reserve({ ...base, id: "t2" })
    const source = model.accountById("s")!
    expect([source.balance["amount-and-fee"].toFixed(), source.balance.amount.toFixed()]).toEqual(["5", "6"])
    expect(model.advance(model.transactions[0]!, "failed")).toBe(true)
    expect([source.balance["amount-and-fee"].toFixed(), source.balance.amount.toFixed()]).toEqual(["7.5", "8"])
    expect(model.advance(model.transactions[1]!, "completed")).toBe(true)
    expect([source.balance["amount-and-fee"].toFixed(), source.balance.amount.toFixed()]).toEqual(["7.5", "7.5"])
    expect(model.accountById("d")?.balance.amount.toFixed()).toBe("2")
    expect(model.advance(model.transactions[1]!, "failed")).toBe(false)
  })

  it("TXN-FLOW-1: an undeclared funds model keeps the readings the observed balances fit, and fails when none fits", () => {
    const model = new RelayModel(undefined)
    model.accounts.push({ id: "s", assetId: "BTC", status: "active", balance: balances(10) })
    const source = model.accountById("s")!
    model.reserve({ id: "t", sourceId: "s", destinationId: "d", destinationType: "external", amount: new Decimal(2), fee: new Decimal(1), group: "pending" })
    expect(model.observe(source, new Decimal(8))).toBe(true)
    expect(model.readings).toEqual(["amount"])
    expect(model.observe(source, new Decimal(7))).toBe(false)
    const declared = new RelayModel("amount-and-fee")
    declared.accounts.push({ id: "s", assetId: "BTC", status: "active", balance: balances(10) })
    declared.reserve({ id: "t", sourceId: "s", destinationId: "d", destinationType: "external", amount: new Decimal(2), fee: new Decimal(1), group: "pending" })
    expect(declared.observe(declared.accountById("s")!, new Decimal(8))).toBe(false)
  })

  it("refuses initiation from inactive sources and to unusable destinations", () => {
    const model = new RelayModel(undefined)
    const active = { id: "s", assetId: "BTC", status: "active" as const, balance: balances(1) }
    const pending = { id: "p", assetId: "BTC", status: "pending_approval" as const, balance: balances(0) }
    expect(model.expectedInitiation(pending, { kind: "internal", account: active })).toBe("inactive-source")
    expect(model.expectedInitiation(active, { kind: "internal", account: pending })).toBe("bad-destination")
    expect(model.expectedInitiation(active, { kind: "external", entry: { id: "w", assetType: "BTC", status: "PENDING" } })).toBe("bad-destination")
    expect(model.expectedInitiation(active, { kind: "external", entry: { id: "w", assetType: "BTC", status: "APPROVED" } })).toBe("ok")
  })
})

describe("runner helpers", () => {
  it("derive a stable seed per check", () => {
    expect(checkSeed(42, "txn.precision.boundary")).toBe(checkSeed(42, "txn.precision.boundary"))
    expect(checkSeed(42, "txn.precision.boundary")).not.toBe(checkSeed(43, "txn.precision.boundary"))
    expect(checkSeed(42, "a")).not.toBe(checkSeed(42, "b"))
  })

  it("select by exact id or by tag, and refuse unknown ids", () => {
    expect(selectChecks(allChecks, ["txn.precision.boundary"], undefined).map((check) => check.id)).toEqual(["txn.precision.boundary"])
    expect(selectChecks(allChecks, undefined, ["concurrency"]).length).toBe(4)
    expect(() => selectChecks(allChecks, ["txn.precision"], undefined)).toThrow(/unknown check/)
  })
})

describe("shapes", () => {
  it("recognise UTC ISO timestamps and plain decimal strings", () => {
    expect(isIsoUtc("2026-01-02T03:04:05.678Z")).toBe(true)
    expect(isIsoUtc("2026-01-02T03:04:05+02:00")).toBe(false)
    expect(isDecimalString("0.00000001")).toBe(true)
    expect(isDecimalString("1e-8")).toBe(false)
    expect(isDecimalString(1)).toBe(false)
  })

  it("read estimatedFee with the digits the server wrote, not as a double", () => {
    const answer = (text: string): HttpResult => ({ status: 200, headers: new Headers(), text, json: parseJson(text), exchange: undefined as never })
    expect(estimatedFeeText(answer('{"assetType":"BTC","estimatedFee":1234567890123456.78903234,"feeAssetType":"BTC"}'))).toBe("1234567890123456.78903234")
    expect(estimatedFeeText(answer('{"estimatedFee":0.00042}'))).toBe("0.00042")
    expect(estimatedFeeText(answer('{"estimatedFee":"0.00042"}'))).toBe("0.00042")
    expect(estimatedFeeText(answer("not json"))).toBe("undefined")
  })
})

/** A report of one passing check, for the reporters' tests to vary. */
const sampleReport = {
  kind: "custody-relay-conformance-statement",
  kit: { name: "k", version: "0" },
  interfaceVersion: "v1",
  controlProtocolVersion: "1.1",
  implementation: { name: "impl", version: "1", interfaceVersion: "v1" },
  target: "t",
  mode: "control",
  startedAt: "2026-01-01T00:00:00.000Z",
  durationMs: 5,
  seed: 1,
  numRuns: 1,
  status: "passed",
  counts: { pass: 1, fail: 0, warn: 0, "expected-fail": 0, "unexpected-pass": 0, "not-applicable": 0, "harness-error": 0 },
  checks: [{ id: "a.b", title: "t", requirements: ["A-1"], tags: ["x"], outcome: "pass", rawOutcome: "pass", seed: 1, durationMs: 1, violations: [], warnings: [], replay: "--check a.b" }],
  requirements: [],
  unusedExpectations: [],
  doctor: []
} satisfies Report

describe("reporting", () => {
  it("redacts secrets in printed exchanges", () => {
    const text = formatExchange({ method: "GET", path: "/relay/v1/accounts", requestHeaders: { "x-api-key": "ck_1", "x-api-secret": "s3cr3t" }, requestBody: undefined, status: 200, responseHeaders: {}, responseBody: "{}", durationMs: 1 })
    expect(text).toContain("ck_1")
    expect(text).not.toContain("s3cr3t")
  })

  it("writes well-formed JUnit with escaped details", () => {
    const report = {
      ...sampleReport,
      implementation: { name: "impl <&>", version: "1", interfaceVersion: "v1" },
      status: "failed",
      counts: { ...sampleReport.counts, pass: 0, fail: 1 },
      checks: [{ id: "a.b", title: "t", requirements: ["A-1"], tags: ["x"], outcome: "fail", rawOutcome: "fail", seed: 1, durationMs: 1, violations: [{ requirementIds: ["A-1"], message: "bad <tag> & \"quote\"", exchanges: [] }], warnings: [], replay: "--check a.b" }]
    } satisfies Report
    const xml = formatJunit(report)
    expect(xml).toContain('failures="1"')
    expect(xml).toContain("bad &lt;tag&gt; &amp; &quot;quote&quot;")
    expect(xml).toContain("impl &lt;&amp;&gt;")
  })
})

describe("JUnit: what fails or stops a run besides its checks", () => {
  const base = sampleReport

  it("a stale expected-failure entry fails the run, and the XML names it as a failing test case", () => {
    const xml = formatJunit({ ...base, status: "failed", requirements: [], unusedExpectations: [{ checkId: "page.envlope", reason: "typo" }] } satisfies Report)
    expect(xml).toContain('tests="2" failures="1"')
    expect(xml).toMatch(/<testcase classname="conformance.run" name="expected-failures entry page.envlope"[^>]*><failure message="stale expected-failure entry">/)
  })

  it("an incomplete run names the MUST requirements it left untested, as an error", () => {
    const requirements = [
      { id: "A-1", level: "MUST", outcome: "pass", checks: ["a.b"], violatedBy: [] },
      { id: "B-2", level: "MUST", outcome: "untested", checks: ["a.b"], violatedBy: [] },
      // Out of the selection's reach: no selected check covers it, so it is not named.
      { id: "D-4", level: "MUST", outcome: "untested", checks: [], violatedBy: [] },
      { id: "C-3", level: "SHOULD", outcome: "untested", checks: [], violatedBy: [] }
    ] as const
    const xml = formatJunit({ ...base, status: "incomplete", requirements, unusedExpectations: [] } satisfies Report)
    expect(xml).toContain('tests="2" failures="0" errors="1"')
    expect(xml).toContain("<error message=\"incomplete\">the run left these MUST requirements untested: B-2</error>")
    expect(formatJunit({ ...base, status: "passed", requirements: [], unusedExpectations: [] } satisfies Report)).toContain('tests="1" failures="0" errors="0"')
  })
})

describe("joinPath", () => {
  it("joins a base URL or path, with any number of trailing slashes, to a path", () => {
    for (const base of ["http://127.0.0.1:8080", "http://127.0.0.1:8080/", "http://127.0.0.1:8080///"]) {
      expect(joinPath(base, "/relay/v1/accounts")).toBe("http://127.0.0.1:8080/relay/v1/accounts")
    }
    expect(joinPath("/__control/", "/profile")).toBe("/__control/profile")
    expect(joinPath("", "/profile")).toBe("/profile")
    expect(joinPath(`http://h${"/".repeat(100_000)}`, "/p")).toBe("http://h/p")
  })
})
