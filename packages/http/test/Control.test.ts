/**
 * The test control protocol v1 (and the kit's v1.1 provider-fault call), mounted only with a token.
 */
import { Permission } from "@custody-relay/core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeHandler } from "../src/index.js"
import { allPermissions, CONTROL_TOKEN, field, type Fixture, makeFixture, makeTenant, record, silentLogger, type Tenant } from "./RelayFixture.js"

let fixture: Fixture
let tenant: Tenant
beforeAll(async () => {
  fixture = makeFixture()
  tenant = await makeTenant(fixture)
})
afterAll(() => fixture.dispose())

const transfer = (t: Tenant) => ({ sourceAccountId: t.source, destinationId: t.whitelisted, destinationType: "external", amount: "0.01", assetType: "BTC" })

describe("control protocol", () => {
  it("is not mounted without a token: /__control is an unknown route", async () => {
    const handler = makeHandler({ logger: silentLogger })
    try {
      const answer = await handler(new Request("http://relay.test/__control/clients", { method: "POST", headers: { "x-control-token": "" } }))
      expect(answer.status).toBe(404)
    } finally {
      await handler.dispose()
    }
  })

  it("an empty or blank token is refused when the handler is made: it would let any caller in with an empty header", () => {
    for (const controlToken of ["", "   "]) {
      expect(() => makeHandler({ logger: silentLogger, controlToken }), JSON.stringify(controlToken)).toThrow(/controlToken must not be empty or blank/)
    }
  })

  it("refuses a missing or wrong token with 401, an unknown call with 501, an unknown id with 404", async () => {
    expect((await fixture.send("POST", "/__control/clients")).status).toBe(401)
    expect((await fixture.send("POST", "/__control/clients", { headers: { "x-control-token": `${CONTROL_TOKEN}!` } })).status).toBe(401)
    expect((await fixture.control("POST", "/teleport")).status).toBe(501)
    expect((await fixture.control("DELETE", "/clients")).status).toBe(501)
    expect((await fixture.control("POST", "/api-users/0190b6e4-0000-7000-8000-000000000000/revoke")).status).toBe(404)
    expect((await fixture.control("POST", "/accounts/0190b6e4-0000-7000-8000-000000000000/activate")).status).toBe(404)
    expect((await fixture.control("POST", "/transactions/0190b6e4-0000-7000-8000-000000000000/advance", { to: "completed" })).status).toBe(404)
    expect((await fixture.control("POST", "/api-users", { clientId: "0190b6e4-0000-7000-8000-000000000000", permissions: [] })).status).toBe(404)
  })

  it("AUTH-KEY-1: api-users answers 201 {apiUserId, keyId, secret} with the key prefix; an unknown permission is 400", async () => {
    const created = await fixture.control("POST", "/api-users", { clientId: tenant.clientId, permissions: ["View custody account"] })
    expect(created.status).toBe(201)
    expect(field(created.body, "keyId")).toMatch(/^crk_/)
    expect(field(created.body, "secret")).toMatch(/^crs_/)
    const unknown = await fixture.control("POST", "/api-users", { clientId: tenant.clientId, permissions: ["Launch rockets"] })
    expect(unknown.status).toBe(400)
  })

  it("ACC-ACTIVE-1: activate answers {accountId, status, address}; credit answers the new balance", async () => {
    const as = fixture.as(tenant.admin)
    const id = field((await as.post("/relay/v1/accounts", { name: "Ctl", workspace: "custody", assetId: "ETH" })).body, "id")
    expect((await fixture.control("POST", `/accounts/${id}/activate`)).status).toBe(409)
    await as.post("/relay/v1/accounts/approve", { accountId: id })
    const activated = await fixture.control("POST", `/accounts/${id}/activate`)
    expect(activated.status).toBe(200)
    expect(record(activated.body)).toMatchObject({ accountId: id, status: "active" })
    expect(field(activated.body, "address")).toMatch(/^0x[0-9a-fA-F]{40}$/)
    const credited = await fixture.control("POST", `/accounts/${id}/credit`, { amount: "1.5" })
    expect(record(credited.body)["availableBalance"]).toBe("1.5")
    expect((await fixture.control("POST", `/accounts/${id}/credit`, { amount: "1e3" })).status).toBe(400)
  })

  it("TXN-FLOW-1: advance moves a pending transaction to COMPLETED or FAILED, then 409", async () => {
    const as = fixture.as(tenant.admin)
    const id = field((await as.post("/relay/v1/transactions/initiate", transfer(tenant))).body, "id")
    const done = await fixture.control("POST", `/transactions/${id}/advance`, { to: "completed" })
    expect(record(done.body)["status"]).toBe("COMPLETED")
    expect((await fixture.control("POST", `/transactions/${id}/advance`, { to: "failed" })).status).toBe(409)
    const other = field((await as.post("/relay/v1/transactions/initiate", transfer(tenant))).body, "id")
    expect(record((await fixture.control("POST", `/transactions/${other}/advance`, { to: "failed" })).body)["status"]).toBe("FAILED")
    expect((await fixture.control("POST", `/transactions/${other}/advance`, { to: "sideways" })).status).toBe(400)
  })

  it("WL-FLOW-1: whitelist status changes follow the state table", async () => {
    const as = fixture.as(tenant.admin)
    const id = field((await as.post("/relay/v1/whitelisted-addresses", { name: "Ctl", address: "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", assetType: "BTC" })).body, "id")
    expect((await fixture.control("POST", `/whitelisted-addresses/${id}/status`, { status: "REJECTED" })).status).toBe(200)
    expect((await fixture.control("POST", `/whitelisted-addresses/${id}/status`, { status: "APPROVED" })).status).toBe(409)
    expect((await fixture.control("POST", `/whitelisted-addresses/${id}/status`, { status: "ARCHIVED" })).status).toBe(200)
  })

  it("TXN-FEE-3: provider-fault makes one client's fee estimation refuse (400) or fail (500), and none restores it", async () => {
    const as = fixture.as(tenant.admin)
    const other = await makeTenant(fixture)
    await fixture.control("PUT", `/clients/${tenant.clientId}/provider-fault`, { calculateFee: "unsupported" })
    const unsupported = await as.post("/relay/v1/transactions/calculate-fee", transfer(tenant))
    expect(unsupported.status).toBe(400)
    expect(record(unsupported.body)["code"]).toBe("FEE_ESTIMATION_UNSUPPORTED")
    expect((await fixture.as(other.admin).post("/relay/v1/transactions/calculate-fee", transfer(other))).status).toBe(200)
    await fixture.control("PUT", `/clients/${tenant.clientId}/provider-fault`, { calculateFee: "error" })
    const failed = await as.post("/relay/v1/transactions/calculate-fee", transfer(tenant))
    expect(failed.status).toBe(500)
    expect(record(failed.body)["code"]).toBe("CUSTODY_PROVIDER_FAILED")
    await fixture.control("PUT", `/clients/${tenant.clientId}/provider-fault`, { calculateFee: "none" })
    expect((await as.post("/relay/v1/transactions/calculate-fee", transfer(tenant))).status).toBe(200)
  })

  it("TXN-LIST-2 TXN-FLOW-1 WL-STATE-1: the profile declares assets with checked sample addresses, statuses and groups", async () => {
    const profile = record((await fixture.control("GET", "/profile")).body)
    expect(profile).toMatchObject({ name: "custody-relay", interfaceVersion: "v1" })
    expect(profile["accountStatuses"]).toEqual(expect.arrayContaining(["pending_approval", "approved", "rejected", "active"]))
    expect(profile["whitelistStatuses"]).toEqual(["PENDING", "APPROVED", "REJECTED", "ARCHIVED"])
    const groups = (profile["transactionStatuses"] as ReadonlyArray<Record<string, string>>).map((s) => s["group"])
    expect(new Set(groups)).toEqual(new Set(["completed", "pending", "failed"]))
    const assets = profile["assets"] as ReadonlyArray<Record<string, unknown>>
    expect(assets.map((a) => a["assetId"])).toEqual(expect.arrayContaining(["BTC", "ETH", "USDC"]))
    const as = fixture.as(tenant.admin)
    for (const asset of assets) {
      const samples = record(asset["sampleAddresses"])
      const valid = samples["valid"] as ReadonlyArray<string>
      const invalid = samples["invalid"] as ReadonlyArray<string>
      expect(valid.length).toBeGreaterThan(0)
      expect(invalid.length).toBeGreaterThan(0)
      const accepted = await as.post("/relay/v1/whitelisted-addresses", { name: `ok ${asset["assetId"]}`, address: valid[0], assetType: asset["assetId"] })
      expect(accepted.status, String(valid[0])).toBe(201)
      for (const address of invalid) {
        const refused = await as.post("/relay/v1/whitelisted-addresses", { name: "bad", address, assetType: asset["assetId"] })
        expect(refused.status, address).toBe(400)
      }
    }
    expect(profile["capabilities"]).toEqual(expect.arrayContaining(["rate-limit", "transactions.advance", "provider-fault"]))
    expect(Permission.permissionNames.length).toBe(allPermissions.length)
  })
})

describe("control protocol ids", () => {
  it("provider-fault for an unknown client is 404", async () => {
    expect((await fixture.control("PUT", "/clients/0190b6e4-0000-7000-8000-000000000000/provider-fault", { calculateFee: "error" })).status).toBe(404)
  })

  it("two parallel advance calls on one pending transaction: exactly one wins, the other is 409", async () => {
    const id = field((await fixture.as(tenant.admin).post("/relay/v1/transactions/initiate", transfer(tenant))).body, "id")
    const answers = await Promise.all([
      fixture.control("POST", `/transactions/${id}/advance`, { to: "completed" }),
      fixture.control("POST", `/transactions/${id}/advance`, { to: "failed" })
    ])
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409])
  })
})

describe("control protocol logs (v1.1)", () => {
  it("AUTH-SEC-1: GET /logs returns the lines written since the previous call, each request's line included, and no secret", async () => {
    await fixture.control("GET", "/logs")
    const answer = await fixture.as(tenant.admin).get("/relay/v1/accounts", { "x-request-id": "logs-check-1" })
    expect(answer.status).toBe(200)
    await fixture.send("GET", "/relay/v1/accounts", { headers: { "x-api-key": tenant.admin.keyId, "x-api-secret": `${tenant.admin.secret}x` } })
    const logs = await fixture.control("GET", "/logs")
    const lines = record(logs.body)["lines"] as ReadonlyArray<string>
    expect(lines.some((line) => line.includes("logs-check-1"))).toBe(true)
    for (const line of lines) expect(line).not.toContain(tenant.admin.secret)
    const again = record((await fixture.control("GET", "/logs")).body)["lines"] as ReadonlyArray<string>
    expect(again.every((line) => !line.includes("logs-check-1"))).toBe(true)
  })
})
