/**
 * The handler against the interface, endpoint by endpoint, called with Request objects (no server): shapes,
 * success codes, the order of checks, pagination and filters, scope, and our transaction approval extension.
 */
import { OutboxWorker, RateLimiter, Relay, RelayConfig, Storage } from "@custody-relay/core"
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type HandlerOptions, makeHandler } from "../src/index.js"
import { allPermissions, type Fixture, field, makeFixture, makeTenant, record, silentLogger, type Tenant } from "./RelayFixture.js"

let fixture: Fixture
let tenant: Tenant

beforeAll(async () => {
  fixture = makeFixture()
  tenant = await makeTenant(fixture)
})
afterAll(() => fixture.dispose())

const items = (body: unknown): ReadonlyArray<Record<string, unknown>> => {
  const list = record(body)["items"]
  if (!Array.isArray(list)) throw new Error("no items")
  return list.map(record)
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

describe("accounts", () => {
  it("ACC-CREATE-1 ACC-SHAPE-2: create answers 201 with exactly the nine create fields, pending_approval, no address", async () => {
    const created = await fixture.as(tenant.admin).post("/relay/v1/accounts", { name: "Cold ETH", workspace: "custody", assetId: "ETH" })
    expect(created.status).toBe(201)
    expect(Object.keys(record(created.body)).sort()).toEqual(
      ["id", "name", "workspace", "assetId", "role", "address", "description", "status", "createdAt"].sort()
    )
    expect(record(created.body)).toMatchObject({ status: "pending_approval", address: null, role: "custody" })
    expect(field(created.body, "id")).toMatch(UUID)
    expect(field(created.body, "createdAt")).toMatch(ISO)
  })

  it("ACC-CREATE-2: missing name, short name, bad workspace and unsupported asset are 400 with field details", async () => {
    const as = fixture.as(tenant.admin)
    const missing = await as.post("/relay/v1/accounts", { workspace: "custody", assetId: "BTC" })
    expect(missing.status).toBe(400)
    expect(record(missing.body)).toMatchObject({ code: "INVALID_REQUEST" })
    expect(JSON.stringify(record(missing.body)["details"])).toContain("name")
    expect((await as.post("/relay/v1/accounts", { name: "ab", workspace: "custody", assetId: "BTC" })).status).toBe(400)
    expect((await as.post("/relay/v1/accounts", { name: "Valid", workspace: "warm", assetId: "BTC" })).status).toBe(400)
    const unsupported = await as.post("/relay/v1/accounts", { name: "Valid", workspace: "custody", assetId: "DOGE" })
    expect(unsupported.status).toBe(400)
    expect(record(unsupported.body)["code"]).toBe("UNSUPPORTED_ASSET")
  })

  it("ACC-CREATE-3: an identical account is 409", async () => {
    const as = fixture.as(tenant.admin)
    const body = { name: "Twin", workspace: "transactional", assetId: "BTC" }
    expect((await as.post("/relay/v1/accounts", body)).status).toBe(201)
    const again = await as.post("/relay/v1/accounts", body)
    expect(again.status).toBe(409)
    expect(record(again.body)["code"]).toBe("DUPLICATE_ACCOUNT")
  })

  it("ACC-APPR-1 ACC-APPR-2: approve answers {accountId, status: approved}; a second decision is 409", async () => {
    const as = fixture.as(tenant.admin)
    const id = field((await as.post("/relay/v1/accounts", { name: "To approve", workspace: "custody", assetId: "LTC" })).body, "id")
    const approved = await as.post("/relay/v1/accounts/approve", { accountId: id })
    expect(approved.status).toBe(200)
    expect(approved.body).toEqual({ accountId: id, status: "approved" })
    const rejected = await as.post("/relay/v1/accounts/reject", { accountId: id })
    expect(rejected.status).toBe(409)
    const other = field((await as.post("/relay/v1/accounts", { name: "To reject", workspace: "custody", assetId: "LTC" })).body, "id")
    expect((await as.post("/relay/v1/accounts/reject", { accountId: other })).body).toEqual({ accountId: other, status: "rejected" })
  })

  it("ACC-APPR-3 SCOPE-1: deciding on or reading another client's account is 404, like an unknown id", async () => {
    const otherClient = await fixture.createClient()
    const stranger = await fixture.createUser(otherClient, allPermissions)
    const as = fixture.as(stranger)
    expect((await as.post("/relay/v1/accounts/approve", { accountId: tenant.source })).status).toBe(404)
    expect((await as.get(`/relay/v1/accounts/${tenant.source}`)).status).toBe(404)
    expect((await as.get("/relay/v1/accounts/0190b6e4-0000-7000-8000-000000000000")).status).toBe(404)
    expect(record((await as.get("/relay/v1/accounts")).body)["total"]).toBe(0)
  })

  it("ACC-GET-1 ACC-SHAPE-1: get by id has every list field; a malformed id is 400", async () => {
    const as = fixture.as(tenant.admin)
    const got = await as.get(`/relay/v1/accounts/${tenant.source}`)
    expect(got.status).toBe(200)
    expect(Object.keys(record(got.body)).sort()).toEqual(
      ["id", "name", "description", "workspace", "role", "assetId", "chainType", "address", "status", "availableBalance", "availableBalanceCad", "createdAt", "updatedAt"].sort()
    )
    expect(record(got.body)).toMatchObject({ status: "active", availableBalance: "10", chainType: "BITCOIN" })
    expect((await as.get("/relay/v1/accounts/not-a-uuid")).status).toBe(400)
  })

  it("ACC-LIST-1: repeated role parameters, workspace, assetId, search and status filters all hold", async () => {
    const as = fixture.as(tenant.admin)
    await as.post("/relay/v1/accounts", { name: "Staker", workspace: "custody", assetId: "SOL", role: "staking" })
    const both = await as.get("/relay/v1/accounts?role=staking&role=custody&limit=100")
    const staking = await as.get("/relay/v1/accounts?role=staking")
    expect(items(staking.body).every((a) => a["role"] === "staking")).toBe(true)
    expect(items(staking.body).length).toBeGreaterThan(0)
    expect(items(both.body).length).toBe(record(both.body)["total"])
    const active = await as.get("/relay/v1/accounts?status=active&assetId=BTC&workspace=custody&search=treas")
    expect(items(active.body).map((a) => a["id"])).toEqual([tenant.source])
  })

  it("ACC-LIST-2: an invalid status, role or workspace filter is 400", async () => {
    const as = fixture.as(tenant.admin)
    expect((await as.get("/relay/v1/accounts?status=frozen")).status).toBe(400)
    expect((await as.get("/relay/v1/accounts?role=miner")).status).toBe(400)
    expect((await as.get("/relay/v1/accounts?workspace=warm")).status).toBe(400)
  })
})

describe("pagination", () => {
  it("PAGE-1 PAGE-2 PAGE-4: defaults 1 and 20, requested values echoed, totalPages = ceil(total/limit)", async () => {
    const as = fixture.as(tenant.admin)
    const first = record((await as.get("/relay/v1/accounts")).body)
    expect(first).toMatchObject({ page: 1, limit: 20 })
    const paged = record((await as.get("/relay/v1/accounts?page=2&limit=1")).body)
    expect(paged).toMatchObject({ page: 2, limit: 1, totalPages: paged["total"] })
    expect(items(paged).length).toBe(1)
  })

  it.each(["page=0", "page=-1", "page=1.5", "page=abc", "page=", "limit=0", "limit=101", "limit=1e2", "limit=+5", "page=1&page=2"])(
    "PAGE-3: %s is 400 on every list",
    async (query) => {
      const as = fixture.as(tenant.admin)
      for (const path of ["/relay/v1/accounts", "/relay/v1/transactions", "/relay/v1/whitelisted-addresses"]) {
        const answer = await as.get(`${path}?${query}`)
        expect(answer.status, `${path}?${query}`).toBe(400)
        expect(record(answer.body)["code"]).toBe("INVALID_REQUEST")
      }
    }
  )
})

describe("transactions", () => {
  const transfer = (t: Tenant, overrides: Record<string, unknown> = {}) => ({
    sourceAccountId: t.source,
    destinationId: t.whitelisted,
    destinationType: "external",
    amount: "0.01",
    assetType: "BTC",
    ...overrides
  })

  it("TXN-INIT-1 TXN-INIT-2: initiate answers 201 with a lower-case awaiting_signature status and the request's destinationType", async () => {
    const initiated = await fixture.as(tenant.admin).post("/relay/v1/transactions/initiate", transfer(tenant))
    expect(initiated.status).toBe(201)
    expect(record(initiated.body)).toMatchObject({ status: "awaiting_signature", destinationType: "external", amount: "0.01", assetType: "BTC" })
    expect(Object.keys(record(initiated.body)).sort()).toEqual(
      ["id", "status", "sourceAccountId", "destinationId", "destinationType", "amount", "assetType", "createdAt"].sort()
    )
  })

  it("TXN-SHAPE-1 TXN-SHAPE-2 TXN-SHAPE-3 TXN-SHAPE-4: list, detail and status records read upper case", async () => {
    const as = fixture.as(tenant.admin)
    const id = field((await as.post("/relay/v1/transactions/initiate", transfer(tenant))).body, "id")
    const detail = record((await as.get(`/relay/v1/transactions/${id}`)).body)
    expect(detail).toMatchObject({ id, status: "AWAITING_SIGNATURE", destinationType: "external_wallet", direction: "OUT", transactionType: "WITHDRAWAL" })
    expect(Object.keys(record(detail["approvals"])).sort()).toEqual(
      ["createdBy", "createdAt", "signedBy", "signedAt", "approvedBy", "approvedAt", "providerApprovedAt", "rejectedBy", "rejectedAt"].sort()
    )
    const status = await as.get(`/relay/v1/transactions/${id}/status`)
    expect(Object.keys(record(status.body)).sort()).toEqual(["id", "status", "subStatus", "updatedAt"])
    const listed = items((await as.get("/relay/v1/transactions?limit=100")).body).find((t) => t["id"] === id)
    expect(listed).toMatchObject({ status: "AWAITING_SIGNATURE", direction: "OUT", destinationType: "external_wallet" })
  })

  it("TXN-LIST-1: the status filter is case-insensitive; an unknown group is 400", async () => {
    const as = fixture.as(tenant.admin)
    const pending = await as.get("/relay/v1/transactions?status=PENDING")
    expect(pending.status).toBe(200)
    expect(items(pending.body).every((t) => ["AWAITING_SIGNATURE", "PENDING_PROVIDER_APPROVAL", "BROADCASTING", "CONFIRMING"].includes(String(t["status"])))).toBe(true)
    expect((await as.get("/relay/v1/transactions?status=Completed")).status).toBe(200)
    expect((await as.get("/relay/v1/transactions?status=All")).status).toBe(200)
    expect((await as.get("/relay/v1/transactions?status=done")).status).toBe(400)
  })

  it("SCOPE-3 TXN-LIST-1: accountId must be a uuid (400); an unknown one is 200 with no items", async () => {
    const as = fixture.as(tenant.admin)
    expect((await as.get("/relay/v1/transactions?accountId=abc")).status).toBe(400)
    const unknown = await as.get("/relay/v1/transactions?accountId=0190b6e4-0000-7000-8000-000000000000")
    expect(unknown.status).toBe(200)
    expect(items(unknown.body)).toEqual([])
    const own = await as.get(`/relay/v1/transactions?accountId=${tenant.source}`)
    expect(items(own.body).every((t) => t["sourceAccountId"] === tenant.source)).toBe(true)
  })

  it("an id in upper case names the same record (RFC 9562): in a path, a body and the accountId filter", async () => {
    const as = fixture.as(tenant.admin)
    const upper = (id: string) => {
      expect(id.toUpperCase()).not.toBe(id)
      return id.toUpperCase()
    }
    const initiated = await as.post("/relay/v1/transactions/initiate", transfer(tenant, { sourceAccountId: upper(tenant.source), destinationId: upper(tenant.whitelisted) }))
    expect(initiated.status).toBe(201)
    expect(record(initiated.body)).toMatchObject({ sourceAccountId: tenant.source, destinationId: tenant.whitelisted })
    const id = field(initiated.body, "id")
    expect(record((await as.get(`/relay/v1/transactions/${upper(id)}`)).body)["id"]).toBe(id)
    expect(record((await as.get(`/relay/v1/accounts/${upper(tenant.source)}`)).body)["id"]).toBe(tenant.source)
    const filtered = items((await as.get(`/relay/v1/transactions?limit=100&accountId=${upper(tenant.source)}`)).body)
    expect(filtered.map((t) => t["id"])).toContain(id)
  })

  it("TXN-FEE-1 TXN-FEE-2: calculate-fee answers a JSON number estimate and creates nothing", async () => {
    const as = fixture.as(tenant.admin)
    const before = record((await as.get("/relay/v1/transactions")).body)["total"]
    const fee = await as.post("/relay/v1/transactions/calculate-fee", transfer(tenant))
    expect(fee.status).toBe(200)
    expect(typeof record(fee.body)["estimatedFee"]).toBe("number")
    expect(record(fee.body)).toMatchObject({ assetType: "BTC", amount: "0.01", feeAssetType: "BTC" })
    expect(record((await as.get("/relay/v1/transactions")).body)["total"]).toBe(before)
  })

  it("TXN-FEE-2 GEN-DEC-1: estimatedFee is a JSON number written with the fee's exact digits, however many", async () => {
    const fee = await fixture.as(tenant.admin).post("/relay/v1/transactions/calculate-fee", transfer(tenant, { amount: "12345678901234567890.12345678" }))
    expect(fee.status).toBe(200)
    // 0.00002 + 0.01% of the amount, rounded down to BTC's 8 places: 24 significant digits, more than a double holds.
    expect(fee.text).toContain('"estimatedFee":1234567890123456.78903234,')
    expect(typeof record(fee.body)["estimatedFee"]).toBe("number")
  })

  it("TXN-VAL-1 TXN-PREC-1 TXN-PREC-2 TXN-VAL-2 TXN-DEST-1: bad transfers are refused with the right status", async () => {
    const as = fixture.as(tenant.admin)
    const status = async (overrides: Record<string, unknown>) => (await as.post("/relay/v1/transactions/initiate", transfer(tenant, overrides))).status
    expect(await status({ amount: "1e-8" })).toBe(400)
    expect(await status({ amount: "0" })).toBe(400)
    expect(await status({ amount: "-1" })).toBe(400)
    expect(await status({ amount: "0.000000001" })).toBe(400)
    expect(await status({ amount: 1 })).toBe(400)
    expect(await status({ destinationType: "sideways" })).toBe(400)
    expect(await status({ assetType: "ETH" })).toBe(400)
    expect(await status({ destinationId: "0190b6e4-0000-7000-8000-000000000000" })).toBe(404)
    expect(await status({ destinationType: "internal", destinationId: tenant.destination, amount: "0.00000001" })).toBe(201)
  })

  it("TXN-GET-1: a non-uuid id is 400 and an unknown one 404 on detail and status", async () => {
    const as = fixture.as(tenant.admin)
    expect((await as.get("/relay/v1/transactions/xyz")).status).toBe(400)
    expect((await as.get("/relay/v1/transactions/xyz/status")).status).toBe(400)
    expect((await as.get("/relay/v1/transactions/0190b6e4-0000-7000-8000-000000000000")).status).toBe(404)
    expect((await as.get("/relay/v1/transactions/0190b6e4-0000-7000-8000-000000000000/status")).status).toBe(404)
  })

  it("extension: POST transactions/{id}/approve by another approver moves the quorum; the initiator may not; reject ends it", async () => {
    const as = fixture.as(tenant.admin)
    const id = field((await as.post("/relay/v1/transactions/initiate", transfer(tenant))).body, "id")
    const own = await as.post(`/relay/v1/transactions/${id}/approve`)
    expect(own.status).toBe(403)
    expect(record(own.body)["code"]).toBe("INITIATOR_CANNOT_APPROVE")
    const approved = await fixture.as(tenant.approver).post(`/relay/v1/transactions/${id}/approve`)
    expect(approved.status).toBe(200)
    expect(record(approved.body)["status"]).toBe("PENDING_PROVIDER_APPROVAL")
    expect((await fixture.as(tenant.approver).post(`/relay/v1/transactions/${id}/approve`)).status).toBe(409)

    const second = field((await as.post("/relay/v1/transactions/initiate", transfer(tenant))).body, "id")
    const rejected = await fixture.as(tenant.approver).post(`/relay/v1/transactions/${second}/reject`, {})
    expect(record(rejected.body)["status"]).toBe("REJECTED")
  })

  it("AUTH-PERM-1: the extension needs \"Approve transaction\"", async () => {
    const viewer = await fixture.createUser(tenant.clientId, ["View custody transaction detail"])
    const denied = await fixture.as(viewer).post(`/relay/v1/transactions/${tenant.source}/approve`)
    expect(denied.status).toBe(403)
    expect(denied.body).toEqual({ message: "Missing required API scope: Approve transaction" })
  })
})

describe("whitelisted addresses", () => {
  it("WL-CREATE-1 WL-CREATE-2 WL-SHAPE-1: create is 201 PENDING without providerId; get has providerId", async () => {
    const as = fixture.as(tenant.admin)
    const created = await as.post("/relay/v1/whitelisted-addresses", {
      name: "Cold storage",
      address: "0x52908400098527886E0F7030069857D2E4169EE7",
      assetType: "ETH",
      description: "multisig"
    })
    expect(created.status).toBe(201)
    expect(Object.keys(record(created.body)).sort()).toEqual(["address", "assetType", "description", "id", "name", "status"])
    expect(record(created.body)["status"]).toBe("PENDING")
    const got = await as.get(`/relay/v1/whitelisted-addresses/${field(created.body, "id")}`)
    expect(Object.keys(record(got.body)).sort()).toEqual(["address", "assetType", "description", "id", "name", "providerId", "status"])
  })

  it("WL-CREATE-1: an address invalid for the asset is 400", async () => {
    const bad = await fixture.as(tenant.admin).post("/relay/v1/whitelisted-addresses", {
      name: "Typo",
      address: "0x52908400098527886E0F7030069857D2E4169EEZ",
      assetType: "ETH"
    })
    expect(bad.status).toBe(400)
    expect(record(bad.body)["code"]).toBe("INVALID_ADDRESS")
  })

  it("WL-LIST-1: assetType and status accept several values; an invalid status is 400", async () => {
    const as = fixture.as(tenant.admin)
    const list = await as.get("/relay/v1/whitelisted-addresses?status=APPROVED&status=PENDING&assetType=BTC&assetType=ETH")
    expect(list.status).toBe(200)
    expect(items(list.body).length).toBeGreaterThanOrEqual(2)
    expect(items(list.body).every((e) => ["APPROVED", "PENDING"].includes(String(e["status"])))).toBe(true)
    const approved = items((await as.get("/relay/v1/whitelisted-addresses?status=APPROVED")).body)
    expect(approved.map((e) => e["id"])).toEqual([tenant.whitelisted])
    expect((await as.get("/relay/v1/whitelisted-addresses?status=LOST")).status).toBe(400)
  })

  it("WL-GET-1: malformed id 400, unknown 404", async () => {
    const as = fixture.as(tenant.admin)
    expect((await as.get("/relay/v1/whitelisted-addresses/nope")).status).toBe(400)
    expect((await as.get("/relay/v1/whitelisted-addresses/0190b6e4-0000-7000-8000-000000000000")).status).toBe(404)
  })
})

describe("authentication, permissions and the order of checks", () => {
  it("AUTH-401-1: missing, malformed, unknown, wrong and revoked credentials are 401 with one message", async () => {
    const user = await fixture.createUser(tenant.clientId, ["View custody account"])
    const bodies: Array<unknown> = []
    const check = async (headers: Record<string, string>) => {
      const answer = await fixture.send("GET", "/relay/v1/accounts", { headers })
      expect(answer.status).toBe(401)
      bodies.push(record(answer.body)["message"])
    }
    await check({})
    await check({ "x-api-key": "nope", "x-api-secret": "nope" })
    await check({ "x-api-key": "crk_00000000000000000000000000000000", "x-api-secret": user.secret })
    await check({ "x-api-key": user.keyId, "x-api-secret": `${user.secret.slice(0, -1)}A` === user.secret ? `${user.secret.slice(0, -1)}B` : `${user.secret.slice(0, -1)}A` })
    await fixture.control("POST", `/api-users/${user.apiUserId}/revoke`)
    await check({ "x-api-key": user.keyId, "x-api-secret": user.secret })
    expect(new Set(bodies).size).toBe(1)
  })

  it("AUTH-PERM-1: a missing permission is 403 with exactly the interface's body, for every endpoint", async () => {
    const nobody = await fixture.createUser(tenant.clientId, [])
    const as = fixture.as(nobody)
    const cases: ReadonlyArray<readonly [string, string, string]> = [
      ["GET", "/relay/v1/accounts", "View custody account"],
      ["GET", `/relay/v1/accounts/${tenant.source}`, "View custody account"],
      ["POST", "/relay/v1/accounts", "Initiate new custody account"],
      ["POST", "/relay/v1/accounts/approve", "Approve new custody account"],
      ["POST", "/relay/v1/accounts/reject", "Approve new custody account"],
      ["GET", "/relay/v1/transactions", "View custody transaction list"],
      ["GET", `/relay/v1/transactions/${tenant.source}`, "View custody transaction detail"],
      ["GET", `/relay/v1/transactions/${tenant.source}/status`, "View custody transaction status"],
      ["POST", "/relay/v1/transactions/calculate-fee", "Initiate account transactions"],
      ["POST", "/relay/v1/transactions/initiate", "Initiate account transactions"],
      ["POST", "/relay/v1/whitelisted-addresses", "Initiate external wallet address"],
      ["GET", "/relay/v1/whitelisted-addresses", "View whitelisted address"],
      ["GET", `/relay/v1/whitelisted-addresses/${tenant.source}`, "View whitelisted address"]
    ]
    for (const [method, path, permission] of cases) {
      const answer = method === "GET" ? await as.get(path) : await as.post(path, {})
      expect(answer.status, `${method} ${path}`).toBe(403)
      expect(answer.text).toBe(JSON.stringify({ message: `Missing required API scope: ${permission}` }))
    }
  })

  it("AUTH-PERM-2: a permission change applies to the next request", async () => {
    const user = await fixture.createUser(tenant.clientId, [])
    expect((await fixture.as(user).get("/relay/v1/accounts")).status).toBe(403)
    await fixture.control("PUT", `/api-users/${user.apiUserId}/permissions`, { permissions: ["View custody account"] })
    expect((await fixture.as(user).get("/relay/v1/accounts")).status).toBe(200)
  })

  it("AUTH-SCOPE-1: a credential that is not client-scoped is 403 (after its permission is checked)", async () => {
    const global = await fixture.createUser(null, allPermissions)
    const answer = await fixture.as(global).get("/relay/v1/accounts")
    expect(answer.status).toBe(403)
    expect(record(answer.body)["code"]).toBe("CREDENTIAL_NOT_CLIENT_SCOPED")
  })

  it("AUTH-ORDER-1: bad credentials with a bad body is 401; no permission with a bad body is 403; then 400 before 404", async () => {
    const bad = await fixture.send("POST", "/relay/v1/accounts", { headers: { "x-api-key": "x", "x-api-secret": "y" }, body: "{not json" })
    expect(bad.status).toBe(401)
    const nobody = await fixture.createUser(tenant.clientId, [])
    const denied = await fixture.as(nobody).post("/relay/v1/accounts", "{not json")
    expect(denied.status).toBe(403)
    const tooBig = await fixture.as(nobody).post("/relay/v1/accounts", { name: "x".repeat(200_000) })
    expect(tooBig.status).toBe(403)
    const as = fixture.as(tenant.admin)
    expect((await as.post("/relay/v1/accounts/approve", { accountId: "not-a-uuid" })).status).toBe(400)
    expect((await as.post("/relay/v1/accounts/approve", { accountId: "0190b6e4-0000-7000-8000-000000000000" })).status).toBe(404)
  })
})

describe("routing", () => {
  it("GEN-PATH-1: an unknown route is 404; a known path with another method is 405 with Allow", async () => {
    const unknown = await fixture.send("GET", "/relay/v2/accounts")
    expect(unknown.status).toBe(404)
    expect(record(unknown.body)["code"]).toBe("ROUTE_NOT_FOUND")
    const wrong = await fixture.send("DELETE", "/relay/v1/accounts")
    expect(wrong.status).toBe(405)
    expect(wrong.headers.get("allow")).toBe("GET, HEAD, POST")
    const fee = await fixture.send("GET", "/relay/v1/transactions/calculate-fee")
    expect(fee.status).toBe(405)
    expect(fee.headers.get("allow")).toBe("POST")
    expect((await fixture.send("GET", "/relay/v1/accounts/")).status).toBe(404)
    const head = await fixture.send("HEAD", "/relay/v1/openapi.json")
    expect([head.status, head.text]).toEqual([200, ""])
    expect((await fixture.send("HEAD", "/relay/v1/transactions/calculate-fee")).status).toBe(405)
  })

  it("a path parameter is percent-decoded: an id written with escapes reads the same account", async () => {
    const as = fixture.as(tenant.admin)
    const escaped = tenant.source.replaceAll("-", "%2D").replace(/^./, (first) => `%${first.charCodeAt(0).toString(16)}`)
    const got = await as.get(`/relay/v1/accounts/${escaped}`)
    expect(got.status).toBe(200)
    expect(record(got.body)["id"]).toBe(tenant.source)
  })

  it("GEN-JSON-1: answers are JSON and carry x-request-id, echoing a well-formed one", async () => {
    const answer = await fixture.send("GET", "/relay/v1/accounts", { headers: { "x-request-id": "trace-123" } })
    expect(answer.headers.get("content-type")).toContain("application/json")
    expect(answer.headers.get("x-request-id")).toBe("trace-123")
    expect(record(answer.body)["requestId"]).toBe("trace-123")
    const replaced = await fixture.send("GET", "/relay/v1/accounts", { headers: { "x-request-id": "bad id with spaces" } })
    expect(replaced.headers.get("x-request-id")).toMatch(UUID)
  })
})

describe("options", () => {
  it("tracing: true registers spans and serves the same answers", async () => {
    const traced = makeFixture({ tracing: true })
    try {
      const t = await makeTenant(traced)
      const answer = await traced.as(t.admin).get(`/relay/v1/accounts/${t.source}`)
      expect(answer.status).toBe(200)
      expect(record(answer.body)["id"]).toBe(t.source)
    } finally {
      await traced.dispose()
    }
  })
})

describe("units of work per request", () => {
  /** The memory relay, with every unit the Storage opens counted by mode. */
  const counted = () => {
    const units = { lookup: 0, read: 0, write: 0 }
    const storage = Layer.effect(
      Storage.Storage,
      Effect.map(Effect.service(Storage.Storage), (inner) =>
        Storage.Storage.of({
          transaction: (mode, work) => Effect.suspend(() => {
            units[mode]++
            return inner.transaction(mode, work)
          })
        }))
    ).pipe(Layer.provide(Storage.Storage.layerMemory))
    const reset = () => Object.assign(units, { lookup: 0, read: 0, write: 0 })
    return { units, reset, fixture: makeFixture({ layer: Relay.layer(Layer.merge(storage, RateLimiter.RateLimiter.layerMemory)) }) }
  }

  it("AUTH-PERM-2: a record by id and a first page are two lookups (the credential, then the record or the page with its total) and no snapshot; a later page is a lookup and a read", async () => {
    const { fixture: relay, units, reset } = counted()
    try {
      const ours = await makeTenant(relay)
      reset()
      const got = await relay.as(ours.admin).get(`/relay/v1/accounts/${ours.source}`)
      expect(got.status).toBe(200)
      expect(units).toEqual({ lookup: 2, read: 0, write: 0 })
      reset()
      const page = await relay.as(ours.admin).get("/relay/v1/accounts")
      expect(page.status).toBe(200)
      expect(units).toEqual({ lookup: 2, read: 0, write: 0 })
      reset()
      const later = await relay.as(ours.admin).get("/relay/v1/accounts?page=2")
      expect(later.status).toBe(200)
      expect(units).toEqual({ lookup: 1, read: 1, write: 0 })
      reset()
      const refused = await relay.send("GET", `/relay/v1/accounts/${ours.source}`, { headers: { "x-api-key": ours.admin.keyId, "x-api-secret": `crs_${"A".repeat(43)}` } })
      expect(refused.status).toBe(401)
      expect(units).toEqual({ lookup: 1, read: 0, write: 0 })
    } finally {
      await relay.dispose()
    }
  })

  it("TXN-FEE-1: initiate validates in a lookup before the fee quote, then writes in one unit", async () => {
    const { fixture: relay, units, reset } = counted()
    try {
      const ours = await makeTenant(relay)
      const transfer = { sourceAccountId: ours.source, destinationId: ours.whitelisted, destinationType: "external", amount: "0.0001", assetType: "BTC" }
      reset()
      const fee = await relay.as(ours.admin).post("/relay/v1/transactions/calculate-fee", transfer)
      expect(fee.status).toBe(200)
      expect(units).toEqual({ lookup: 2, read: 0, write: 0 })
      reset()
      const initiated = await relay.as(ours.admin).post("/relay/v1/transactions/initiate", transfer)
      expect(initiated.status).toBe(201)
      expect(units).toEqual({ lookup: 2, read: 0, write: 1 })
    } finally {
      await relay.dispose()
    }
  })
})

describe("the options an embedder passes in code", () => {
  it("a number that would break the relay stops the handler being made, naming the setting: a key kept 0 seconds let a retried transfer run twice, a worker with 0 places never carried one out", () => {
    const refused: ReadonlyArray<readonly [HandlerOptions, RegExp]> = [
      [{ idempotency: { ttlSeconds: 0 } }, /config\.idempotencyKeyTtlSeconds must be a whole number from 1 to 316224000, got 0/],
      [{ idempotency: { ttlSeconds: -1 } }, /idempotencyKeyTtlSeconds/],
      [{ config: { idempotencyKeyTtlSeconds: Number.NaN } }, /idempotencyKeyTtlSeconds must be a whole number from 1 to 316224000, got NaN/],
      [{ config: { defaultRequiredApprovals: 11 } }, /config\.defaultRequiredApprovals must be a whole number from 0 to 10, got 11/],
      // Past ten years a retention's cut is no instant (it would fail every housekeeping pass); 0 keeps for good.
      [{ config: { outboxEntryRetentionSeconds: 1e13 } }, /config\.outboxEntryRetentionSeconds must be a whole number from 0 to 316224000/],
      [{ config: { webhookDeliveryRetentionSeconds: -1 } }, /config\.webhookDeliveryRetentionSeconds/],
      [{ outbox: { concurrency: 0 } }, /outbox\.concurrency must be a whole number at least 1, got 0/],
      [{ outbox: { concurrency: Number.NaN } }, /outbox\.concurrency/],
      [{ rateLimit: { limit: 100, windowSeconds: 0 } }, /rateLimit\.windowSeconds must be a whole number from 1 to 86400, got 0/],
      // The same bounds as a budget the operator gives an API user (core RateLimiter.RateLimitPolicyInput).
      [{ rateLimit: { limit: 100, windowSeconds: 86_401 } }, /rateLimit\.windowSeconds must be a whole number from 1 to 86400, got 86401/],
      [{ rateLimit: { limit: Infinity, windowSeconds: 60 } }, /rateLimit\.limit must be a whole number from 1 to 1000000000, got Infinity/],
      [{ rateLimit: { limit: Number.NaN, windowSeconds: 60 } }, /rateLimit\.limit/],
      [{ rateLimit: { limit: 10, windowSeconds: 60, perKey: { crk_partner: { limit: 0, windowSeconds: 60 } } } }, /rateLimit\.perKey\[crk_partner\]\.limit/],
      [{ maxBodyBytes: Number.NaN }, /maxBodyBytes must be a whole number at least 1, got NaN/],
      [{ maxBodyBytes: -5 }, /maxBodyBytes/],
      [{ webhooks: { timeoutMillis: 0 } }, /webhooks\.timeoutMillis/]
    ]
    for (const [options, message] of refused) {
      expect(() => makeHandler({ logger: silentLogger, ...options }), JSON.stringify(options)).toThrow(message)
    }
  })

  it("an option given as undefined keeps its default, as if left out", async () => {
    const handler = makeHandler({
      logger: silentLogger,
      config: { defaultRequiredApprovals: undefined, idempotencyKeyTtlSeconds: undefined },
      outbox: { concurrency: undefined },
      webhooks: { timeoutMillis: undefined },
      rateLimit: { limit: undefined as unknown as number, windowSeconds: 60 }
    })
    try {
      await handler.ready
      const config = await handler.runtime.runPromise(Effect.service(RelayConfig.RelayConfig))
      expect(config).toEqual(RelayConfig.RelayConfig.defaultValue())
      expect(OutboxWorker.optionsOf({ concurrency: undefined })).toEqual(OutboxWorker.defaults)
    } finally {
      await handler.dispose()
    }
  })
})
