/**
 * Webhooks end to end (our extension): a real receiver (node:http) subscribes, a custody flow runs through HTTP,
 * and the receiver gets every event, in order per record, each verified with the `standardwebhooks` reference
 * library; a receiver that fails its first attempts still gets each event exactly once after retries (it
 * de-duplicates by webhook-id); a dead receiver's subscription is disabled after the policy's attempts while
 * everything else keeps working; a rotated secret and the old one both sign during the grace period; a receiver
 * holding a delivery gets no other until it answers and holds up no transfer approved meanwhile.
 */
import { createServer, type Server } from "node:http"
import { Webhook } from "standardwebhooks"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { type Fixture, makeFixture, makeTenant, record, type Tenant } from "./RelayFixture.js"

interface Received {
  readonly headers: Record<string, string>
  readonly body: string
}

/** A receiver on a free port that answers `statusFor(n)` to its n-th request (from 0) and keeps every request. */
const receiver = async (statusFor: (n: number) => number = () => 200) => {
  const received: Array<Received> = []
  let count = 0
  const server: Server = createServer((request, response) => {
    let body = ""
    request.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
    request.on("end", () => {
      const status = statusFor(count++)
      if (status < 300) {
        const headers: Record<string, string> = {}
        for (const [name, value] of Object.entries(request.headers)) if (typeof value === "string") headers[name] = value
        received.push({ headers, body })
      }
      response.writeHead(status).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  return { url: `http://127.0.0.1:${port}/hooks`, received, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

const fast = { idleMillis: 5, baseBackoffMillis: 10, maxBackoffMillis: 40, maxAttempts: 4 }
const fixtures: Array<Fixture> = []
const open = (): Fixture => {
  const fixture = makeFixture({ outbox: fast, webhooks: { allowPrivateTargets: true } })
  fixtures.push(fixture)
  return fixture
}
afterAll(() => Promise.all(fixtures.map((f) => f.dispose())))

const until = async (done: () => boolean | Promise<boolean>, millis = 10_000) => {
  const deadline = Date.now() + millis
  while (!(await done()) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
}

/** A flow that changes an account, an address and a transaction, all through the API. */
const custodyFlow = async (fixture: Fixture, tenant: Tenant) => {
  const as = fixture.as(tenant.admin)
  const account = await as.post("/relay/v1/accounts", { name: "Hooked", workspace: "custody", assetId: "BTC" })
  await as.post("/relay/v1/accounts/approve", { accountId: record(account.body)["id"] })
  await as.post("/relay/v1/whitelisted-addresses", { name: "Desk", address: "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", assetType: "BTC" })
  const tx = await as.post("/relay/v1/transactions/initiate", {
    sourceAccountId: tenant.source,
    destinationId: tenant.whitelisted,
    destinationType: "external",
    amount: "0.25",
    assetType: "BTC"
  })
  await fixture.as(tenant.approver).post(`/relay/v1/transactions/${String(record(tx.body)["id"])}/approve`, {})
}

/** The client's events from the audit trail, oldest first. */
const trail = async (fixture: Fixture, tenant: Tenant) =>
  (record((await fixture.as(tenant.admin).get("/relay/v1/events?limit=100")).body)["items"] as ReadonlyArray<Record<string, unknown>>).toReversed()

describe("webhooks", () => {
  let close: Array<() => Promise<void>> = []
  afterEach(async () => {
    await Promise.all(close.map((c) => c()))
    close = []
  })

  it("every event of a custody flow reaches the receiver, in order per record, signed (verified with standardwebhooks)", async () => {
    const fixture = open()
    const tenant = await makeTenant(fixture)
    const target = await receiver()
    close.push(target.close)
    const subscribed = await fixture.as(tenant.admin).post("/relay/v1/webhooks", { url: target.url })
    expect(subscribed.status).toBe(201)
    const secret = String(record(subscribed.body)["secret"])
    expect(secret).toMatch(/^whsec_/)
    const since = (await trail(fixture, tenant)).length
    await custodyFlow(fixture, tenant)
    // The outbox worker adds events of its own (a registration, a submission): wait until every event so far
    // has been received.
    let events: ReadonlyArray<Record<string, unknown>> = []
    await until(async () => {
      events = (await trail(fixture, tenant)).slice(since)
      return events.length > 0 && target.received.length === events.length
    })
    expect(target.received.length).toBe(events.length)
    const verifier = new Webhook(secret)
    const delivered = target.received.map((r) => verifier.verify(r.body, r.headers) as Record<string, unknown>)
    expect(new Set(delivered.map((e) => e["id"]))).toEqual(new Set(events.map((e) => e["id"])))
    expect(target.received.every((r, i) => r.headers["webhook-id"] === delivered[i]?.["id"])).toBe(true)
    for (const entityId of new Set(events.map((e) => e["entityId"]))) {
      const expected = events.filter((e) => e["entityId"] === entityId).map((e) => e["id"])
      expect(delivered.filter((e) => e["entityId"] === entityId).map((e) => e["id"]), String(entityId)).toEqual(expected)
    }
    // The secret is shown once: never in a read or a log.
    expect((await fixture.as(tenant.admin).get("/relay/v1/webhooks")).text).not.toContain(secret)
  })

  it("a receiver holding a delivery gets no other until it answers, and holds up no transfer approved meanwhile (the worker leases while a lane is out)", async () => {
    // The receiver's timeout far beyond this test's waits: only the worker's leasing can hand the transfer over.
    const fixture = makeFixture({ outbox: fast, webhooks: { allowPrivateTargets: true, timeoutMillis: 120_000 } })
    fixtures.push(fixture)
    const tenant = await makeTenant(fixture)
    let holding = true
    const held: Array<{ readonly answer: () => void; aborted: boolean }> = []
    const server: Server = createServer((request, response) => {
      request.resume()
      request.on("end", () => {
        if (!holding) return void response.writeHead(200).end()
        const open = { answer: () => void response.writeHead(200).end(), aborted: false }
        response.on("close", () => (open.aborted = !response.writableEnded))
        held.push(open)
      })
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    close.push(() => new Promise<void>((resolve) => server.close(() => resolve())))
    const address = server.address()
    const url = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}/hooks`
    const as = fixture.as(tenant.admin)
    const subscribed = await as.post("/relay/v1/webhooks", { url })
    expect(subscribed.status).toBe(201)
    const initiated = await as.post("/relay/v1/transactions/initiate", {
      sourceAccountId: tenant.source,
      destinationId: tenant.whitelisted,
      destinationType: "external",
      amount: "0.25",
      assetType: "BTC"
    })
    const id = String(record(initiated.body)["id"])
    await until(() => held.length === 1)
    expect(held.length).toBe(1)
    // The initiation's delivery is held; the approval's events wait behind it in its lane, the transfer does not.
    expect((await fixture.as(tenant.approver).post(`/relay/v1/transactions/${id}/approve`, {})).status).toBe(200)
    const submitted = async () => (await trail(fixture, tenant)).some((e) => e["type"] === "transaction.submitted" && e["entityId"] === id)
    await until(submitted)
    expect(await submitted()).toBe(true)
    expect(held.map((h) => h.aborted)).toEqual([false])
    holding = false
    for (const h of held) h.answer()
    const deliveries = async () =>
      record((await as.get(`/relay/v1/webhooks/${String(record(subscribed.body)["id"])}/deliveries?limit=100`)).body)["items"] as ReadonlyArray<Record<string, unknown>>
    await until(async () => (await deliveries()).every((d) => d["state"] === "delivered"))
    const all = await deliveries()
    expect(all.length).toBeGreaterThan(3)
    expect(all.map((d) => d["state"])).toEqual(all.map(() => "delivered"))
  })

  it("a receiver that fails its first attempts gets each event exactly once after retries (de-duplicated by webhook-id)", async () => {
    const fixture = open()
    const tenant = await makeTenant(fixture)
    const target = await receiver((n) => (n < 3 ? 503 : 200))
    close.push(target.close)
    const subscribed = await fixture.as(tenant.admin).post("/relay/v1/webhooks", { url: target.url, eventTypes: ["account.created", "account.approved"] })
    const id = String(record(subscribed.body)["id"])
    await custodyFlow(fixture, tenant)
    await until(() => new Set(target.received.map((r) => r.headers["webhook-id"])).size >= 2)
    const ids = target.received.map((r) => r.headers["webhook-id"])
    expect(new Set(ids).size).toBe(2)
    expect(target.received.map((r) => JSON.parse(r.body)["type"])).toEqual(["account.created", "account.approved"])
    const logOf = async () =>
      record((await fixture.as(tenant.admin).get(`/relay/v1/webhooks/${id}/deliveries`)).body)["items"] as ReadonlyArray<Record<string, unknown>>
    // The receiver answers before the relay records the answer: wait for the log to say so.
    await until(async () => (await logOf()).every((d) => d["state"] === "delivered"))
    const log = await logOf()
    expect(log.map((d) => d["state"])).toEqual(["delivered", "delivered"])
    expect(log.reduce((sum, d) => sum + Number(d["attempts"]), 0)).toBe(5)
    expect(log.every((d) => d["lastStatus"] === 200 && typeof d["lastLatencyMillis"] === "number")).toBe(true)
    // Redelivery of one event: the same webhook-id again, for the receiver to de-duplicate.
    const first = String(ids[0])
    expect(record((await fixture.as(tenant.admin).post(`/relay/v1/webhooks/${id}/redeliver`, { eventId: first })).body)["redelivered"]).toBe(1)
    await until(() => target.received.length >= 3)
    expect(target.received.at(-1)?.headers["webhook-id"]).toBe(first)
    // Every event since a time, written as the events' `from` filter takes it: milliseconds optional (GEN-TIME-1).
    const since = async (value: string) => fixture.as(tenant.admin).post(`/relay/v1/webhooks/${id}/redeliver`, { since: value })
    const all = record((await since("2000-01-01T00:00:00Z")).body)["redelivered"]
    expect(all).toBeGreaterThanOrEqual(2)
    expect(record((await since("2000-01-01T00:00:00.5Z")).body)["redelivered"]).toBe(all)
    expect(record((await since("2999-01-01T00:00:00.000Z")).body)["redelivered"]).toBe(0)
    // Dates that do not exist are refused, not rolled over into the next month or day (GEN-TIME-1).
    for (const value of ["2000-01-01", "2000-01-01T00:00:00+01:00", "2000-13-45T00:00:00Z", "yesterday", "2026-02-30T00:00:00Z", "2026-04-31T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T23:60:00Z"]) {
      expect((await since(value)).status, value).toBe(400)
    }
    expect((await since("2024-02-29T00:00:00Z")).status).toBe(200)
    // A disabled subscription's deliveries would be skipped unsent: its redelivery is refused until it is enabled.
    expect((await fixture.as(tenant.admin).post(`/relay/v1/webhooks/${id}/disable`, {})).status).toBe(200)
    const refused = await since("2000-01-01T00:00:00Z")
    expect(refused.status).toBe(409)
    expect(record(refused.body)["code"]).toBe("TRANSITION_NOT_ALLOWED")
    expect((await fixture.as(tenant.admin).post(`/relay/v1/webhooks/${id}/enable`, {})).status).toBe(200)
    expect((await since("2000-01-01T00:00:00Z")).status).toBe(200)
  })

  it("a dead receiver's subscription is disabled with its reason after the policy's attempts; the API keeps answering", async () => {
    const fixture = open()
    const tenant = await makeTenant(fixture)
    const target = await receiver(() => 500)
    close.push(target.close)
    const subscribed = await fixture.as(tenant.admin).post("/relay/v1/webhooks", { url: target.url, eventTypes: ["account.created"] })
    const id = String(record(subscribed.body)["id"])
    await fixture.as(tenant.admin).post("/relay/v1/accounts", { name: "Dead end", workspace: "custody", assetId: "BTC" })
    await until(async () => record((await fixture.as(tenant.admin).get(`/relay/v1/webhooks/${id}`)).body)["enabled"] === false)
    const view = record((await fixture.as(tenant.admin).get(`/relay/v1/webhooks/${id}`)).body)
    expect(view["enabled"]).toBe(false)
    expect(String(view["disabledReason"])).toMatch(/given up after 4 attempts: answered 500/)
    expect((await fixture.as(tenant.admin).get("/relay/v1/accounts")).status).toBe(200)
    // Enabled again by its owner, it takes new events.
    expect(record((await fixture.as(tenant.admin).post(`/relay/v1/webhooks/${id}/enable`, {})).body)["enabled"]).toBe(true)
  })

  it("a rotated secret and the old one both sign during the grace period", async () => {
    const fixture = open()
    const tenant = await makeTenant(fixture)
    const target = await receiver()
    close.push(target.close)
    const subscribed = await fixture.as(tenant.admin).post("/relay/v1/webhooks", { url: target.url, eventTypes: ["account.created"] })
    const id = String(record(subscribed.body)["id"])
    const old = String(record(subscribed.body)["secret"])
    const rotated = await fixture.as(tenant.admin).post(`/relay/v1/webhooks/${id}/rotate-secret`, {})
    const fresh = String(record(rotated.body)["secret"])
    expect(fresh).not.toBe(old)
    expect(record(rotated.body)["previousSecretValidUntil"]).toEqual(expect.any(String))
    await fixture.as(tenant.admin).post("/relay/v1/accounts", { name: "Rotated", workspace: "custody", assetId: "BTC" })
    await until(() => target.received.length >= 1)
    const delivery = target.received[0]!
    expect(() => new Webhook(fresh).verify(delivery.body, delivery.headers)).not.toThrow()
    expect(() => new Webhook(old).verify(delivery.body, delivery.headers)).not.toThrow()
  })

  it("targets are checked: http(s) only, no credentials, no private address by default; the permission's exact 403", async () => {
    const fixture = makeFixture()
    fixtures.push(fixture)
    const tenant = await makeTenant(fixture)
    const as = fixture.as(tenant.admin)
    for (const url of ["ftp://example.com/x", "https://user:pass@example.com/x", "http://127.0.0.1:9/x", "http://10.0.0.1/x", "http://[::1]/x", "not a url"]) {
      expect((await as.post("/relay/v1/webhooks", { url })).status, url).toBe(400)
    }
    expect((await as.post("/relay/v1/webhooks", { url: "https://hooks.example.com/x", eventTypes: ["no.such.event"] })).status).toBe(400)
    expect((await as.post("/relay/v1/webhooks", { url: "https://hooks.example.com/x" })).status).toBe(201)
  })

  it("no address but a public one is a target by default, however it is written: IPv4 forms, IPv6 forms that carry an IPv4 address, special ranges", async () => {
    const fixture = makeFixture()
    fixtures.push(fixture)
    const tenant = await makeTenant(fixture)
    const as = fixture.as(tenant.admin)
    const refused = [
      // Loopback, private, link-local (the cloud's metadata service), unspecified, in the spellings URL accepts.
      "http://localhost/x", "http://LOCALHOST./x", "http://api.localhost/x", "http://127.1/x", "http://0x7f000001/x", "http://2130706433/x",
      "http://0.0.0.0/x", "http://192.168.1.1/x", "http://172.16.0.1/x", "http://169.254.169.254/latest/meta-data",
      // Carrier-grade NAT, multicast, broadcast, benchmarking, documentation, reserved.
      "http://100.64.0.1/x", "http://224.0.0.1/x", "http://255.255.255.255/x", "http://198.18.0.1/x", "http://192.0.2.1/x", "http://240.0.0.1/x",
      // IPv6: loopback, unspecified, unique-local, link-local, multicast, documentation.
      "http://[::1]/x", "http://[::]/x", "http://[fd00::1]/x", "http://[fe80::1]/x", "http://[ff02::1]/x", "http://[2001:db8::1]/x",
      // IPv6 that reaches an IPv4 address: mapped, compatible, NAT64, 6to4, Teredo.
      "http://[::ffff:127.0.0.1]/x", "http://[::ffff:169.254.169.254]/x", "http://[::ffff:10.0.0.1]/x", "http://[::127.0.0.1]/x",
      "http://[64:ff9b::a00:1]/x", "http://[2002:a00:1::]/x", "http://[2001::1]/x"
    ]
    for (const url of refused) {
      const answer = await as.post("/relay/v1/webhooks", { url })
      expect([answer.status, record(answer.body)["message"]], url).toEqual([400, "url: must not target a loopback, private or link-local address"])
    }
    // Public addresses, in both families and as an IPv4-mapped one, and names that are not localhost's.
    for (const url of ["http://8.8.8.8/x", "http://[2606:4700::1111]/x", "http://[::ffff:8.8.8.8]/x", "https://localhost.example.com/x", "https://hooks.example.com/x"]) {
      expect((await as.post("/relay/v1/webhooks", { url })).status, url).toBe(201)
    }
  })

  it("the permission's exact 403, and another client's subscription is 404", async () => {
    const fixture = makeFixture()
    fixtures.push(fixture)
    const tenant = await makeTenant(fixture)
    const as = fixture.as(tenant.admin)
    const viewer = await fixture.createUser(tenant.clientId, ["View custody account"])
    const refused = await fixture.as(viewer).get("/relay/v1/webhooks")
    expect(refused.status).toBe(403)
    expect(refused.body).toEqual({ message: "Missing required API scope: Manage webhooks" })
    const other = await makeTenant(fixture)
    const created = await fixture.as(other.admin).post("/relay/v1/webhooks", { url: "https://hooks.example.com/y" })
    expect(created.status, created.text).toBe(201)
    const theirs = String(record(created.body)["id"])
    const foreign = await as.get(`/relay/v1/webhooks/${theirs}`)
    expect(foreign.status, foreign.text).toBe(404)
  })

  it("ids are UUIDs in any case: upper case names the same subscription and event, anything else is 400 before it reaches a store (a NUL byte was PostgreSQL's 500)", async () => {
    const fixture = open()
    const tenant = await makeTenant(fixture)
    const as = fixture.as(tenant.admin)
    const id = String(record((await as.post("/relay/v1/webhooks", { url: "https://hooks.example.com/ids" })).body)["id"])
    for (const path of ["", "/deliveries"]) {
      expect((await as.get(`/relay/v1/webhooks/${id.toUpperCase()}${path}`)).status, path).toBe(200)
      for (const wrong of ["%00", "a%00b", `${id}%00`, "not-a-uuid"]) {
        const answer = await as.get(`/relay/v1/webhooks/${wrong}${path}`)
        expect(answer.status, `${wrong}${path}`).toBe(400)
        expect(record(answer.body)["code"]).toBe("INVALID_REQUEST")
      }
    }
    for (const action of ["rotate-secret", "enable", "disable"]) expect((await as.post(`/relay/v1/webhooks/%00/${action}`, {})).status, action).toBe(400)
    const events = record((await as.get("/relay/v1/events")).body)["items"] as ReadonlyArray<Record<string, unknown>>
    const eventId = String(events[0]?.["id"])
    const redeliver = (body: unknown) => as.post(`/relay/v1/webhooks/${id}/redeliver`, body)
    expect((await redeliver({ eventId: "x" })).status).toBe(400)
    expect((await redeliver({ eventId: "%00" })).status).toBe(400)
    // Found by its canonical id (when the subscription takes it), or 404: never 400 for an upper-case UUID.
    expect([200, 404]).toContain((await redeliver({ eventId: eventId.toUpperCase() })).status)
    expect((await redeliver({ eventId: eventId.toUpperCase() })).status).toBe((await redeliver({ eventId })).status)
  })

  it("PAGE-2 PAGE-3: the subscriptions are paged as every list is; the delivery log is one page of the newest `limit`", async () => {
    const fixture = open()
    const tenant = await makeTenant(fixture)
    const as = fixture.as(tenant.admin)
    const ids: Array<string> = []
    for (const n of [1, 2, 3]) ids.push(String(record((await as.post("/relay/v1/webhooks", { url: `https://hooks.example.com/${n}` })).body)["id"]))
    const page = async (query: string) => record((await as.get(`/relay/v1/webhooks?${query}`)).body)
    const second = await page("page=2&limit=2")
    expect([second["page"], second["limit"], second["total"], (second["items"] as ReadonlyArray<Record<string, unknown>>).map((item) => item["id"])]).toEqual([2, 2, 3, [ids[2]]])
    for (const bad of ["limit=0", "limit=101", "page=0", "page=1e309", "page=1&page=2"]) expect((await as.get(`/relay/v1/webhooks?${bad}`)).status, bad).toBe(400)
    const log = record((await as.get(`/relay/v1/webhooks/${ids[0]}/deliveries?limit=5`)).body)
    expect([log["page"], log["limit"]]).toEqual([1, 5])
    expect((await as.get(`/relay/v1/webhooks/${ids[0]}/deliveries?page=2`)).status).toBe(400)
  })
})
