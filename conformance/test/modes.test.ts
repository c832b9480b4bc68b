/**
 * Targets and control modes: a base URL over real loopback HTTP, the in-process TypeScript control interface,
 * black-box mode from pre-made credentials, capability gating, and the vacuity warning.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { type AddressInfo, createServer as createNetServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createRelay } from "@custody-relay/server"
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest"
import fc from "fast-check"
import { type Check, CheckFailure, defineCheck } from "../src/Check.js"
import { allChecks } from "../src/checks/index.js"
import { FixtureFailure } from "../src/Fixtures.js"
import { formatJunit } from "../src/reporters/junit.js"
import { requirementById } from "../src/requirements.js"
import { runCli } from "../src/CommandLine.js"
import { CapabilityMissing, HttpControl, type Control } from "../src/Control.js"
import { allPermissions } from "../src/Endpoints.js"
import type { Report } from "../src/Report.js"
import { runConformance } from "../src/Runner.js"
import { Transport } from "../src/Transport.js"
import { FakeRelay } from "../src/reference/FakeRelay.js"
import { serve } from "./support/serve.js"

const token = "secret-token"
let relay: Awaited<ReturnType<typeof createRelay>>
let server: Awaited<ReturnType<typeof serve>>

beforeAll(async () => {
  relay = await createRelay({ database: ":memory:", controlToken: token, rateLimit: { limit: 100000, windowSeconds: 60 } })
  server = await serve(relay.handler)
})
afterAll(async () => {
  await server.close()
  await relay.close()
})

const findings = (report: Report): string => JSON.stringify(report.checks.filter((check) => check.outcome !== "pass").map((check) => [check.id, check.outcome, check.message, check.violations]), null, 1)

describe("targets", () => {
  it("runs every check over loopback HTTP through the CLI flags, with real concurrent requests", async () => {
    const out: Array<string> = []
    const code = await runCli(
      ["--base-url", server.baseUrl, "--control-url", `${server.baseUrl}/__control`, "--control-token", token, "--num-runs", "10", "--seed", "9", "--reporter", "json"],
      { stdout: (text) => void out.push(text), stderr: () => undefined, isTty: false }
    )
    const report = JSON.parse(out.join("")) as Report
    expect(report.checks.filter((check) => check.outcome !== "pass" && check.id !== "auth.secret.not-logged"), findings(report)).toEqual([])
    expect(report.target).toBe(server.baseUrl)
    expect(code).toBe(0)
  }, 120_000)

  it("a target that is not running or a refused control token is a harness problem: named, exit 2, no check run", async () => {
    const err: Array<string> = []
    const out: Array<string> = []
    const io = { stdout: (text: string) => void out.push(text), stderr: (text: string) => void err.push(text), isTty: false }
    const probe = createNetServer()
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve))
    const closed = `http://127.0.0.1:${(probe.address() as AddressInfo).port}`
    await new Promise((resolve) => probe.close(resolve))
    expect(await runCli(["--base-url", closed, "--control-token", token], io)).toBe(2)
    expect(err.join("")).toContain(`harness: cannot reach the target at ${closed}: ECONNREFUSED`)
    err.length = 0
    expect(await runCli(["--base-url", server.baseUrl, "--control-url", `${server.baseUrl}/__control`, "--control-token", "wrong"], io)).toBe(2)
    expect(err.join("")).toMatch(/refuses the control token \(401\)/)
    expect(out.join("")).toBe("")
  })

  it("an in-process run says so on its first line", async () => {
    const err: Array<string> = []
    const out: Array<string> = []
    const fake = new FakeRelay({ token: "t" })
    const code = await runCli(["--check", "gen.path.prefix"], { stdout: (text) => void out.push(text), stderr: (text) => void err.push(text), isTty: false }, { target: { handler: fake.handler }, control: { token: "t" } })
    expect(code).toBe(0)
    expect(err.join("").split("\n")[0]).toMatch(/^conformance: in-process run/)
    expect(out.join("").split("\n")[0]).toContain("in-process run")
  })
})

/**
 * The fake's control over HTTP, as an in-process `Control`, with `replaced` calls answering otherwise; its profile
 * declares no capabilities, so a call it lacks is learnt of only when a check makes it.
 */
const controlOver = (fake: FakeRelay, replaced: Partial<Control>): Control => {
  const http = new HttpControl(new Transport({ handler: fake.handler }), "/__control", "t")
  return {
    createClient: () => http.createClient(),
    createApiUser: (clientId, permissions) => http.createApiUser(clientId, permissions),
    revokeApiUser: (id) => http.revokeApiUser(id),
    setPermissions: (id, permissions) => http.setPermissions(id, permissions),
    activateAccount: (id) => http.activateAccount(id),
    creditAccount: (id, amount) => http.creditAccount(id, amount),
    setWhitelistStatus: (id, status) => http.setWhitelistStatus(id, status),
    decideTransaction: (id, apiUserId, decision) => http.decideTransaction(id, apiUserId, decision),
    advanceTransaction: (id, to) => http.advanceTransaction(id, to),
    setRateLimit: (limit, windowSeconds) => http.setRateLimit(limit, windowSeconds),
    setProviderFault: (clientId, fault) => http.setProviderFault(clientId, fault),
    logs: () => http.logs(),
    profile: async () => ({ ...((await http.profile()) as Record<string, unknown>), capabilities: [] }),
    ...replaced
  }
}

describe("the command line refuses what it cannot honour, before any check runs", () => {
  const run = async (argv: ReadonlyArray<string>): Promise<{ code: number | string; err: string }> => {
    const err: Array<string> = []
    const fake = new FakeRelay({ token: "t" })
    const io = { stdout: () => undefined, stderr: (text: string) => void err.push(text), isTty: false }
    try {
      return { code: await runCli(argv, io, { target: { handler: fake.handler }, control: { token: "t" } }), err: err.join("") }
    } catch (error) {
      // The bin prints a thrown error's message and exits 2 (cli.ts).
      return { code: (error as Error).message, err: err.join("") }
    }
  }

  it("a run count that is not a whole number of at least 1, which would pass every property untested", async () => {
    for (const value of ["abc", "0", "1.5"]) {
      expect((await run(["--check", "acc.get.ids", "--num-runs", value])).code, value).toMatch(/--num-runs must be a whole number of at least 1/)
    }
    await expect(runConformance({ target: { handler: new FakeRelay({ token: "t" }).handler }, control: { token: "t" }, checks: ["acc.get.ids"], numRuns: 0 })).rejects.toThrow(/numRuns must be a whole number/)
  })

  it("a selection that matches no check (a misspelt tag, a tag the chosen check lacks), which would pass having checked nothing", async () => {
    expect((await run(["--tag", "nope"])).code).toMatch(/no check matches the selection/)
    expect((await run(["--check", "txn.fee.shape", "--tag", "precision"])).code).toMatch(/no check matches the selection/)
  })

  it("an unknown reporter, and a control URL without its token", async () => {
    const reporter = await run(["--check", "gen.path.prefix", "--reporter", "xml"])
    expect(reporter.code).toBe(2)
    expect(reporter.err).toContain('--reporter must be one of console, json, junit, got "xml"')
    const url = await run(["--base-url", server.baseUrl, "--control-url", `${server.baseUrl}/__control`, "--check", "gen.path.prefix"])
    expect(url.code).toBe(2)
    expect(url.err).toContain("--control-url needs --control-token")
  })

  it("--rerun-failed re-runs with the report's seed and run count", async () => {
    const directory = mkdtempSync(join(tmpdir(), "kit-rerun-"))
    onTestFinished(() => rmSync(directory, { recursive: true, force: true }))
    const previous = join(directory, "report.json")
    writeFileSync(previous, JSON.stringify({ seed: 5, numRuns: 3, checks: [{ id: "acc.get.ids", outcome: "fail" }] }))
    const out: Array<string> = []
    const code = await runCli(["--rerun-failed", previous, "--reporter", "json"], { stdout: (text) => void out.push(text), stderr: () => undefined, isTty: false }, { target: { handler: new FakeRelay({ token: "t" }).handler }, control: { token: "t" } })
    const report = JSON.parse(out.join("")) as Report
    expect([code, report.seed, report.numRuns, report.checks.map((check) => check.id)]).toEqual([0, 5, 3, ["acc.get.ids"]])
  })
})

describe("doctor", () => {
  const doctor = async (handler: (request: Request) => Promise<Response>): Promise<{ code: number; text: string }> => {
    const out: Array<string> = []
    const code = await runCli(["doctor"], { stdout: (text) => void out.push(text), stderr: () => undefined, isTty: false }, { target: { handler }, control: { token: "t" } })
    return { code, text: out.join("") }
  }

  it("passes a target whose profile gives the fixtures what they need, and reports its round trips", async () => {
    const { code, text } = await doctor(new FakeRelay({ token: "t" }).handler)
    expect(text).toMatch(/note: round trips: median \d+\.\d ms for a read/)
    expect(text).not.toContain("warning: slow round trips")
    expect(code).toBe(0)
  })

  it("names a sample address the target refuses, an invalid one it accepts, and a wrong approval template, before any run", async () => {
    const fake = new FakeRelay({ token: "t" })
    const handler = async (request: Request): Promise<Response> => {
      const response = await fake.handler(request)
      if (new URL(request.url).pathname !== "/__control/profile") return response
      const profile = (await response.json()) as { assets: Array<{ assetId: string; sampleAddresses: { valid: Array<string>; invalid: Array<string> } }>; approvals: Record<string, unknown> }
      const btc = profile.assets.find((asset) => asset.assetId === "BTC")!
      btc.sampleAddresses = { valid: [...btc.sampleAddresses.valid, "0xnot-bitcoin-at-all-000000000000"], invalid: [...btc.sampleAddresses.invalid, btc.sampleAddresses.valid[0]!] }
      profile.approvals = { ...profile.approvals, approve: "PUT /relay/v1/decisions/{id}" }
      return Response.json(profile)
    }
    const { code, text } = await doctor(handler)
    expect(text).toContain("problem: profile asset BTC: the valid sample address 0xnot-bitcoin-at-all-000000000000 was refused (400)")
    expect(text).toMatch(/problem: profile asset BTC: the invalid sample address bc1q\S+ answered 201, not 400/)
    expect(text).toMatch(/problem: profile approvals.approve: PUT \/relay\/v1\/decisions\/\S+ without credentials answered 404, not 401: is it an endpoint of the target\?/)
    expect(code).toBe(1)
  })

  it("warns when the target is slow to answer small requests (a server without TCP_NODELAY shows so)", async () => {
    const fake = new FakeRelay({ token: "t" })
    const slow = async (request: Request): Promise<Response> => {
      if (new URL(request.url).pathname.startsWith("/relay/")) await new Promise((resolve) => setTimeout(resolve, 40))
      return fake.handler(request)
    }
    const { text } = await doctor(slow)
    expect(text).toMatch(/note: warning: slow round trips \(\d+ ms\): a run makes about 3000 requests, so expect about \d+ s/)
  })
})

describe("modes", () => {
  it("reads the target, control and black-box credentials from a --config file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "conformance-config-"))
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
    const out: Array<string> = []
    const io = { stdout: (text: string) => void out.push(text), stderr: () => undefined, isTty: false }
    const withControl = join(dir, "control.json")
    writeFileSync(withControl, JSON.stringify({ baseUrl: server.baseUrl, controlToken: token }))
    expect(await runCli(["--config", withControl, "--check", "auth.scope.unscoped", "--reporter", "json"], io)).toBe(0)
    expect((JSON.parse(out.join("")) as Report).checks.map((check) => check.outcome)).toEqual(["pass"])
    const control = new HttpControl(new Transport({ baseUrl: server.baseUrl }), "/__control", token)
    const user = await control.createApiUser((await control.createClient()).clientId, allPermissions)
    const blackBox = join(dir, "black-box.json")
    writeFileSync(blackBox, JSON.stringify({ baseUrl: server.baseUrl, credentials: { primary: { keyId: user.keyId, secret: user.secret } }, profile: await control.profile() }))
    out.length = 0
    expect(await runCli(["--config", blackBox, "--check", "acc.create.duplicate", "--check", "auth.scope.unscoped", "--reporter", "json"], io)).toBe(2)
    const report = JSON.parse(out.join("")) as Report
    expect(report.mode).toBe("black-box")
    expect(report.checks.map((check) => [check.id, check.outcome])).toEqual([
      ["auth.scope.unscoped", "not-applicable"],
      ["acc.create.duplicate", "pass"]
    ])
  }, 60_000)

  it("takes the control as an in-process TypeScript object", async () => {
    const control: Control = new HttpControl(new Transport({ handler: relay.handler }), "/__control", token)
    const report = await runConformance({ target: { handler: relay.handler }, control, tags: ["workflow"], numRuns: 5 })
    expect(report.checks.filter((check) => check.outcome !== "pass"), findings(report)).toEqual([])
    expect(report.status).toBe("passed")
  }, 60_000)
})

describe("capability gating", () => {
  it("reports checks needing a missing control call not-applicable and the run incomplete", async () => {
    const fake = new FakeRelay({ token: "t", without: ["transactions.advance", "provider-fault"] })
    const report = await runConformance({ target: { handler: fake.handler }, control: { token: "t" }, numRuns: 3 })
    const notApplicable = report.checks.filter((check) => check.outcome === "not-applicable").map((check) => check.id)
    expect(notApplicable).toContain("txn.fee.provider")
    expect(notApplicable).toContain("concurrency.transaction.advance")
    expect(report.checks.filter((check) => ["fail", "harness-error"].includes(check.outcome)), findings(report)).toEqual([])
    expect(report.requirements.find((requirement) => requirement.id === "TXN-FEE-3")?.outcome).toBe("untested")
    expect(report.status).toBe("incomplete")
  }, 60_000)

  it("TXN-PREC-1 TXN-PREC-2: a control call missing inside a property's run (the account's activation) makes the check not-applicable, not a violation of its ids", async () => {
    const fake = new FakeRelay({ token: "t" })
    // Nothing declared: the kit learns of the missing call only when a fixture makes it.
    const withoutActivate = controlOver(fake, { activateAccount: () => Promise.reject(new CapabilityMissing("accounts.activate")) })
    const report = await runConformance({ target: { handler: fake.handler }, control: withoutActivate, checks: ["txn.amount.malformed", "txn.precision.boundary"], numRuns: 5 })
    expect(report.checks.map((check) => [check.id, check.outcome, check.message])).toEqual([
      ["txn.amount.malformed", "not-applicable", "the target does not offer the control capability accounts.activate"],
      ["txn.precision.boundary", "not-applicable", "the target does not offer the control capability accounts.activate"]
    ])
    expect(report.requirements.filter((requirement) => ["TXN-PREC-1", "TXN-PREC-2"].includes(requirement.id)).map((requirement) => requirement.outcome)).toEqual(["untested", "untested"])
    expect(report.status).toBe("incomplete")
  })

  it("a target without a valid profile: nothing of it was tested, so the run is incomplete (exit 2), not failed", async () => {
    const fake = new FakeRelay({ token: "t" })
    const noProfile = async (request: Request): Promise<Response> =>
      new URL(request.url).pathname === "/__control/profile" ? Response.json({ name: "broken" }) : fake.handler(request)
    const report = await runConformance({ target: { handler: noProfile }, control: { token: "t" }, checks: ["page.envelope"] })
    expect(report.checks.map((check) => [check.outcome, check.message])).toEqual([["not-applicable", "no valid profile (see doctor)"]])
    expect(report.requirements.filter((requirement) => requirement.outcome === "fail")).toEqual([])
    expect(report.status).toBe("incomplete")
    // Even a selection whose checks name no MUST requirement: nothing was tested, so never passed.
    const noMust = allChecks.find((check) => check.requirements.every((id) => requirementById(id)?.level !== "MUST"))
    expect(noMust).toBeDefined()
    const quiet = await runConformance({ target: { handler: noProfile }, control: { token: "t" }, checks: [noMust?.id ?? ""] })
    expect(quiet.status).toBe("incomplete")
    // The JUnit form names only the untested MUST requirements the selection reaches.
    const line = formatJunit(report).split("\n").find((text) => text.includes("untested MUST requirements")) ?? ""
    const reached = allChecks.find((check) => check.id === "page.envelope")?.requirements.filter((id) => requirementById(id)?.level === "MUST") ?? []
    expect((/untested: ([^<]*)</.exec(line)?.[1] ?? "").split(", ").sort()).toEqual([...reached].sort())
  })

  it("a violation whose shrinking reaches runs that fail only on setting up is still the violation of its requirement", async () => {
    const fake = new FakeRelay({ token: "t" })
    const probe: Check = {
      id: "page.envelope",
      title: "a property violated above 10, whose smaller inputs need a fixture the target refuses",
      requirements: ["PAGE-1"],
      tags: [],
      needs: [],
      run: (context) =>
        context.property(["PAGE-1"], [fc.integer({ min: 0, max: 1000 })], async (n) => {
          if (n < 10) throw new FixtureFailure(`fixture refused for ${n}`, [])
          throw new CheckFailure({ requirementIds: ["PAGE-1"], message: `violation at ${n}`, exchanges: [] })
        }, { numRuns: 20 })
    }
    const report = await runConformance({ target: { handler: fake.handler }, control: { token: "t" }, checks: ["page.envelope"], catalogue: [probe], seed: 1 })
    expect(report.checks.map((check) => check.outcome)).toEqual(["fail"])
    expect(report.checks[0]?.violations[0]?.message).toMatch(/violation at 10\b/)
  })

  it("treats a CapabilityMissing thrown by an in-process control as not-applicable", async () => {
    const fake = new FakeRelay({ token: "t" })
    const withoutRevoke = controlOver(fake, { revokeApiUser: () => Promise.reject(new CapabilityMissing("api-users.revoke")) })
    const report = await runConformance({ target: { handler: fake.handler }, control: withoutRevoke, checks: ["auth.credentials.revoked", "auth.credentials.invalid"] })
    expect(report.checks.map((check) => [check.id, check.outcome])).toEqual([
      ["auth.credentials.invalid", "pass"],
      ["auth.credentials.revoked", "not-applicable"]
    ])
    expect(report.status).toBe("passed")
  })
})

describe("black-box mode", () => {
  it("runs the checks that need only pre-made credentials and marks the rest not-applicable", async () => {
    const control = new HttpControl(new Transport({ handler: relay.handler }), "/__control", token)
    const primaryClient = await control.createClient()
    const primary = await control.createApiUser(primaryClient.clientId, allPermissions)
    const secondaryClient = await control.createClient()
    const secondary = await control.createApiUser(secondaryClient.clientId, allPermissions)
    const profile = await control.profile()
    const report = await runConformance({
      target: { baseUrl: server.baseUrl },
      blackBox: { credentials: { primary: { keyId: primary.keyId, secret: primary.secret }, secondary: { keyId: secondary.keyId, secret: secondary.secret } }, profile },
      numRuns: 10
    })
    expect(report.mode).toBe("black-box")
    const ran = report.checks.filter((check) => check.outcome !== "not-applicable")
    expect(ran.length).toBeGreaterThan(10)
    expect(ran.filter((check) => check.outcome !== "pass"), findings(report)).toEqual([])
    expect(report.status).toBe("incomplete")
  }, 60_000)
})

describe("black-box rate limit", () => {
  it("bursts the declared limit when no control can lower it", async () => {
    const small = await createRelay({ database: ":memory:", controlToken: token, rateLimit: { limit: 20, windowSeconds: 60 } })
    try {
      const control = new HttpControl(new Transport({ handler: small.handler }), "/__control", token)
      const one = await control.createApiUser((await control.createClient()).clientId, allPermissions)
      const two = await control.createApiUser((await control.createClient()).clientId, allPermissions)
      const report = await runConformance({
        target: { handler: small.handler },
        blackBox: { credentials: { primary: { keyId: one.keyId, secret: one.secret }, secondary: { keyId: two.keyId, secret: two.secret } }, profile: await control.profile() },
        checks: ["limit.rate.burst"]
      })
      expect(report.checks.map((check) => [check.id, check.outcome]), findings(report)).toEqual([["limit.rate.burst", "pass"]])
    } finally {
      await small.close()
    }
  })
})

describe("log lines", () => {
  it("a secret in a log line read through the control's logs call is reported under AUTH-SEC-1", async () => {
    const leaky = new FakeRelay({ token: "t", leakSecretsToLogs: true })
    const report = await runConformance({ target: { handler: leaky.handler }, control: { token: "t" }, checks: ["auth.secret.not-logged"] })
    expect(report.checks[0]?.outcome).toBe("fail")
    expect(report.requirements.find((requirement) => requirement.id === "AUTH-SEC-1")?.violatedBy).toEqual(["auth.secret.not-logged"])
    const clean = new FakeRelay({ token: "t" })
    const passed = await runConformance({ target: { handler: clean.handler }, control: { token: "t" }, checks: ["auth.secret.not-logged"] })
    expect(passed.checks[0]?.outcome).toBe("pass")
  })
})

describe("vacuous runs", () => {
  it("warn when most answers were refusals where the check expected work", async () => {
    const fake = new FakeRelay({ token: "t" })
    const probe = defineCheck({
      id: "test.vacuous",
      title: "reads unknown ids only",
      requirements: ["SCOPE-1"],
      tags: ["test"],
      needs: [],
      expectsWork: true,
      async run(context) {
        const tenant = await context.fixtures.tenant()
        for (let index = 0; index < 12; index += 1) await tenant.client.getAccount(crypto.randomUUID())
      }
    })
    const report = await runConformance({ target: { handler: fake.handler }, control: { token: "t" }, catalogue: [probe] })
    expect(report.checks[0]?.outcome).toBe("warn")
    expect(report.checks[0]?.warnings.join()).toMatch(/vacuous run: 12 of 12/)
  })
})

describe("a hanging target", () => {
  it("turns the check into a harness error within its time budget", async () => {
    const fake = new FakeRelay({ token: "t" })
    const hang = defineCheck({
      id: "test.hang",
      title: "waits for an answer that never comes",
      requirements: ["GEN-JSON-1"],
      tags: ["test"],
      needs: [],
      run: () => new Promise<void>(() => undefined)
    })
    const report = await runConformance({ target: { handler: fake.handler }, control: { token: "t" }, catalogue: [hang], checkTimeoutMs: 200 })
    expect(report.checks[0]?.outcome).toBe("harness-error")
    expect(report.checks[0]?.message).toMatch(/did not finish within 200 ms/)
    expect(report.status).toBe("failed")
  })
})
