/**
 * The audit trail over HTTP (our extension): the client's events newest first in the interface's list envelope,
 * filtered by record kind, record, type and time; the events of one record; another client's record is 404; the
 * permission's exact 403 body; bad filters are 400; no secret in any event.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Fixture, makeFixture, makeTenant, record, type Tenant } from "./RelayFixture.js"

let fixture: Fixture
let tenant: Tenant
let transactionId: string

beforeAll(async () => {
  fixture = makeFixture()
  tenant = await makeTenant(fixture)
  const initiated = await fixture.as(tenant.admin).post("/relay/v1/transactions/initiate", {
    sourceAccountId: tenant.source,
    destinationId: tenant.whitelisted,
    destinationType: "external",
    amount: "0.5",
    assetType: "BTC"
  })
  transactionId = String(record(initiated.body)["id"])
  await fixture.as(tenant.approver).post(`/relay/v1/transactions/${transactionId}/approve`, {})
})
afterAll(() => fixture.dispose())

type Event = Record<string, unknown>
const itemsOf = (body: unknown): ReadonlyArray<Event> => record(body)["items"] as ReadonlyArray<Event>

describe("audit trail", () => {
  it("PAGE-1 PAGE-2 SCOPE-1: lists the client's events newest first in the list envelope, each with its actor and no secret", async () => {
    const answer = await fixture.as(tenant.admin).get("/relay/v1/events?limit=100")
    expect(answer.status).toBe(200)
    const body = record(answer.body)
    expect(Object.keys(body).sort()).toEqual(["items", "limit", "page", "total", "totalPages"])
    const items = itemsOf(body)
    expect(items.length).toBe(body["total"])
    expect(items.map((e) => e["at"])).toEqual([...items.map((e) => String(e["at"]))].sort().reverse())
    expect(items.map((e) => e["type"])).toEqual(expect.arrayContaining([
      "account.created", "account.approved", "account.activated", "funds.credited", "whitelisted_address.created",
      "whitelisted_address.approved", "transaction.initiated", "funds.reserved", "transaction.approved_by_approver",
      "transaction.quorum_reached"
    ]))
    expect(items.every((e) => e["clientId"] === tenant.clientId)).toBe(true)
    expect(answer.text).not.toContain(tenant.admin.secret)
    expect(answer.text).not.toContain(tenant.approver.secret)
    const initiated = items.find((e) => e["type"] === "transaction.initiated")
    expect(record(initiated?.["actor"])["kind"]).toBe("api_user")
    expect(initiated?.["statusAfter"]).toBe("AWAITING_SIGNATURE")
  })

  it("filters by record kind, record, type and time", async () => {
    const as = fixture.as(tenant.admin)
    const ofTransaction = itemsOf((await as.get(`/relay/v1/events?entityType=transaction&entityId=${transactionId}`)).body)
    expect(ofTransaction.map((e) => e["type"])).toEqual(["transaction.quorum_reached", "transaction.approved_by_approver", "transaction.initiated"])
    const byType = itemsOf((await as.get("/relay/v1/events?type=account.created&type=whitelisted_address.created")).body)
    expect(new Set(byType.map((e) => e["type"]))).toEqual(new Set(["account.created", "whitelisted_address.created"]))
    expect(itemsOf((await as.get("/relay/v1/events?to=2000-01-01T00:00:00Z")).body)).toEqual([])
    expect(itemsOf((await as.get("/relay/v1/events?from=2000-01-01T00:00:00Z&limit=1")).body).length).toBe(1)
  })

  it("SCOPE-1 ACC-GET-1: the events of one record, by its id: newest first; another client's record is 404, a malformed id 400", async () => {
    const as = fixture.as(tenant.admin)
    const ofAccount = await as.get(`/relay/v1/accounts/${tenant.source}/events`)
    expect(ofAccount.status).toBe(200)
    expect(itemsOf(ofAccount.body).map((e) => e["type"]).reverse().slice(0, 4)).toEqual(["account.created", "account.approved", "account.activated", "funds.credited"])
    expect((await as.get(`/relay/v1/transactions/${transactionId}/events`)).status).toBe(200)
    expect((await as.get(`/relay/v1/whitelisted-addresses/${tenant.whitelisted}/events`)).status).toBe(200)
    const other = await makeTenant(fixture)
    for (const path of [`/relay/v1/accounts/${tenant.source}/events`, `/relay/v1/transactions/${transactionId}/events`, `/relay/v1/whitelisted-addresses/${tenant.whitelisted}/events`]) {
      expect((await fixture.as(other.admin).get(path)).status, path).toBe(404)
    }
    expect(itemsOf((await fixture.as(other.admin).get(`/relay/v1/events?entityId=${transactionId}`)).body)).toEqual([])
    expect((await as.get("/relay/v1/accounts/not-a-uuid/events")).status).toBe(400)
  })

  it("AUTH-PERM-1: without \"View audit trail\" the answer is the exact 403 body", async () => {
    const viewer = await fixture.createUser(tenant.clientId, ["View custody account"])
    const refused = await fixture.as(viewer).get("/relay/v1/events")
    expect(refused.status).toBe(403)
    expect(refused.body).toEqual({ message: "Missing required API scope: View audit trail" })
  })

  it("PAGE-3 PAGE-4: bad filters and page values are 400; pages walk every event once with totalPages = ceil(total / limit)", async () => {
    const as = fixture.as(tenant.admin)
    const all = itemsOf((await as.get("/relay/v1/events?limit=100")).body).map((e) => e["id"])
    const walked: Array<unknown> = []
    for (let page = 1; ; page++) {
      const body = record((await as.get(`/relay/v1/events?limit=3&page=${page}`)).body)
      expect(body["totalPages"]).toBe(Math.ceil(Number(body["total"]) / 3))
      const items = itemsOf(body)
      expect(items.length).toBeLessThanOrEqual(3)
      walked.push(...items.map((e) => e["id"]))
      if (page >= Number(body["totalPages"])) break
    }
    expect(walked).toEqual(all)
    expect((await fixture.as(tenant.admin).get(`/relay/v1/accounts/${tenant.source}/events?page=0`)).status).toBe(400)
    for (const query of ["type=nope", "entityType=ledger", "from=yesterday", "to=2026-13-01T00:00:00Z", "entityId=x", "limit=101", "page=0", "limit=-1", "page=1.5", "page=1&page=2"]) {
      const answer = await as.get(`/relay/v1/events?${query}`)
      expect(answer.status, query).toBe(400)
    }
  })
})
