/**
 * Idempotency-Key on POST: replay, conflict, a retry during the first run, release on failure, per-key scope and
 * expiry. Exactly-once itself is the core's (core Idempotency); this is the HTTP face of it, on memory storage (the
 * server's and storage's tests run it on SQLite and PostgreSQL, with real processes).
 */
import { CustodyProvider, Relay } from "@custody-relay/core"
import { Context, Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Idempotency from "../src/Idempotency.js"
import { field, type Fixture, makeFixture, makeTenant, record, type Tenant } from "./RelayFixture.js"

let fixture: Fixture
let tenant: Tenant

beforeAll(async () => {
  fixture = makeFixture()
  tenant = await makeTenant(fixture)
})
afterAll(() => fixture.dispose())

const transfer = (t: Tenant, amount = "0.001") => ({
  sourceAccountId: t.source,
  destinationId: t.whitelisted,
  destinationType: "external",
  amount,
  assetType: "BTC"
})

const balanceOf = async (f: Fixture, t: Tenant) => field((await f.as(t.admin).get(`/relay/v1/accounts/${t.source}`)).body, "availableBalance")

describe("Idempotency-Key", () => {
  it("a request's fingerprint is the SHA-256 of its method, path and exact body, in lowercase hex: what earlier versions stored", () => {
    const body = JSON.stringify({ ...transfer(tenant), memo: "ä \u2028 \ud83d\ude80" })
    const expected = createHash("sha256").update(`POST /relay/v1/transactions/initiate\n${body}`, "utf8").digest("hex")
    expect(Idempotency.fingerprint("POST", "/relay/v1/transactions/initiate", body)).toBe(expected)
  })

  it("a retry with the same key and body replays the first answer and initiates once", async () => {
    const as = fixture.as(tenant.admin)
    const before = record((await as.get("/relay/v1/transactions")).body)["total"]
    const first = await as.post("/relay/v1/transactions/initiate", transfer(tenant), { "idempotency-key": "init-1" })
    const balance = await balanceOf(fixture, tenant)
    const second = await as.post("/relay/v1/transactions/initiate", transfer(tenant), { "idempotency-key": "init-1" })
    expect(first.status).toBe(201)
    expect(second.status).toBe(201)
    expect(second.text).toBe(first.text)
    expect(second.headers.get("idempotent-replayed")).toBe("true")
    expect(first.headers.get("idempotent-replayed")).toBeNull()
    expect(await balanceOf(fixture, tenant)).toBe(balance)
    expect(record((await as.get("/relay/v1/transactions")).body)["total"]).toBe(Number(before) + 1)
  })

  it("the same key with another body is 409 IDEMPOTENCY_KEY_REUSED", async () => {
    const as = fixture.as(tenant.admin)
    await as.post("/relay/v1/transactions/initiate", transfer(tenant), { "idempotency-key": "init-2" })
    const other = await as.post("/relay/v1/transactions/initiate", transfer(tenant, "0.002"), { "idempotency-key": "init-2" })
    expect(other.status).toBe(409)
    expect(record(other.body)["code"]).toBe("IDEMPOTENCY_KEY_REUSED")
    const otherPath = await as.post("/relay/v1/transactions/calculate-fee", transfer(tenant), { "idempotency-key": "init-2" })
    expect(otherPath.status).toBe(409)
  })

  it("a refused call does not use the key up: after fixing the cause, the same key succeeds", async () => {
    const as = fixture.as(tenant.admin)
    const body = { name: "Retry me", workspace: "custody", assetId: "BTC" }
    const refused = await as.post("/relay/v1/accounts", { ...body, workspace: "warm" }, { "idempotency-key": "acc-1" })
    expect(refused.status).toBe(400)
    const sameBodyAgain = await as.post("/relay/v1/accounts", { ...body, workspace: "warm" }, { "idempotency-key": "acc-1" })
    expect(sameBodyAgain.status).toBe(400)
    expect(sameBodyAgain.headers.get("idempotent-replayed")).toBeNull()
    const fixed = await as.post("/relay/v1/accounts", body, { "idempotency-key": "acc-1" })
    expect(fixed.status).toBe(201)
  })

  it("keys are scoped to the API key: another key's identical key runs on its own", async () => {
    const as = fixture.as(tenant.admin)
    const mine = await as.post("/relay/v1/transactions/calculate-fee", transfer(tenant), { "idempotency-key": "shared" })
    const theirs = await fixture.as(tenant.approver).post("/relay/v1/transactions/calculate-fee", transfer(tenant, "0.003"), { "idempotency-key": "shared" })
    expect(mine.status).toBe(200)
    expect(theirs.status).toBe(200)
    expect(theirs.headers.get("idempotent-replayed")).toBeNull()
  })

  it("the webhook commands run once under a key: a retried subscription, rotation, toggle or redelivery replays the first answer", async () => {
    const as = fixture.as(tenant.admin)
    const subscriptions = async () => record((await as.get("/relay/v1/webhooks")).body)["total"]
    const before = await subscriptions()
    const body = { url: "https://hooks.example.com/relay" }
    const first = await as.post("/relay/v1/webhooks", body, { "idempotency-key": "hook-1" })
    const retried = await as.post("/relay/v1/webhooks", body, { "idempotency-key": "hook-1" })
    expect([first.status, retried.status]).toEqual([201, 201])
    // The same subscription and the same secret: the only one that signs its deliveries.
    expect(retried.body).toEqual(first.body)
    expect([first.headers.get("idempotent-replayed"), retried.headers.get("idempotent-replayed")]).toEqual([null, "true"])
    expect(await subscriptions()).toBe(Number(before) + 1)
    expect((await as.post("/relay/v1/webhooks", { url: "https://other.example.com/relay" }, { "idempotency-key": "hook-1" })).status).toBe(409)

    const id = field(first.body, "id")
    const original = field(first.body, "secret")
    const rotated = await as.post(`/relay/v1/webhooks/${id}/rotate-secret`, undefined, { "idempotency-key": "rotate-1" })
    const rotatedAgain = await as.post(`/relay/v1/webhooks/${id}/rotate-secret`, undefined, { "idempotency-key": "rotate-1" })
    expect(rotatedAgain.body).toEqual(rotated.body)
    expect(rotatedAgain.headers.get("idempotent-replayed")).toBe("true")
    // Rotated once: the secret before it still signs beside the new one, through its grace period.
    const { Storage } = await import("@custody-relay/core")
    const stored = await fixture.handler.runtime.runPromise(Storage.run("lookup", (unit) => unit.getWebhookSubscription(id)))
    expect(stored._tag === "Some" ? [stored.value.secret, stored.value.previousSecret] : []).toEqual([field(rotated.body, "secret"), original])

    const disabled = await as.post(`/relay/v1/webhooks/${id}/disable`, undefined, { "idempotency-key": "toggle-1" })
    await as.post(`/relay/v1/webhooks/${id}/enable`)
    const disabledAgain = await as.post(`/relay/v1/webhooks/${id}/disable`, undefined, { "idempotency-key": "toggle-1" })
    expect(disabledAgain.headers.get("idempotent-replayed")).toBe("true")
    expect(disabledAgain.body).toEqual(disabled.body)
    // The replay changed nothing: the subscription stays enabled, as the last command left it.
    expect(record((await as.get(`/relay/v1/webhooks/${id}`)).body)["enabled"]).toBe(true)

    const since = { since: "2000-01-01T00:00:00.000Z" }
    const redelivered = await as.post(`/relay/v1/webhooks/${id}/redeliver`, since, { "idempotency-key": "redeliver-1" })
    const deliveries = async () => record((await as.get(`/relay/v1/webhooks/${id}/deliveries`)).body)["total"]
    const queued = await deliveries()
    const redeliveredAgain = await as.post(`/relay/v1/webhooks/${id}/redeliver`, since, { "idempotency-key": "redeliver-1" })
    expect([redelivered.status, redeliveredAgain.status, redeliveredAgain.headers.get("idempotent-replayed")]).toEqual([200, 200, "true"])
    expect(redeliveredAgain.body).toEqual(redelivered.body)
    expect(await deliveries()).toBe(queued)
  })

  it("a malformed key is 400", async () => {
    const answer = await fixture.as(tenant.admin).post("/relay/v1/transactions/calculate-fee", transfer(tenant), { "idempotency-key": "x".repeat(300) })
    expect(answer.status).toBe(400)
  })

  it("a retry while the first call is still running waits for it and replays its answer: one transaction", async () => {
    // A custody provider that takes its time to price the fee keeps the first call in flight; the retry is sent
    // once the first is pricing, so after it holds the key however slowly the machine runs.
    let pricingBegan = () => {}
    const pricing = new Promise<void>((resolve) => {
      pricingBegan = resolve
    })
    const slowProvider = Layer.effectContext(
      Effect.gen(function*() {
        const simulated = yield* CustodyProvider.CustodyProvider
        const controls = yield* CustodyProvider.SimulatedProviderControls
        return Context.make(CustodyProvider.CustodyProvider, {
          ...simulated,
          estimateFee: (asset, amount) => Effect.andThen(Effect.sync(pricingBegan), Effect.delay(simulated.estimateFee(asset, amount), "300 millis"))
        }).pipe(Context.add(CustodyProvider.SimulatedProviderControls, controls))
      })
    ).pipe(Layer.provide(CustodyProvider.layerSimulated()))
    const slow = makeFixture({ layer: Relay.layerMemory({ provider: slowProvider }) })
    try {
      const t = await makeTenant(slow)
      const as = slow.as(t.admin)
      const first = as.post("/relay/v1/transactions/initiate", transfer(t), { "idempotency-key": "slow" })
      await pricing
      const retry = await as.post("/relay/v1/transactions/initiate", transfer(t), { "idempotency-key": "slow" })
      const answered = await first
      expect(answered.status).toBe(201)
      expect(retry.status).toBe(201)
      expect(retry.text).toBe(answered.text)
      expect(retry.headers.get("idempotent-replayed")).toBe("true")
      expect(record((await as.get("/relay/v1/transactions")).body)["total"]).toBe(1)
    } finally {
      await slow.dispose()
    }
  })

  it("keys expire: after the time to live the same key runs again", async () => {
    const short = makeFixture({ idempotency: { ttlSeconds: 1 } })
    try {
      const t = await makeTenant(short)
      const as = short.as(t.admin)
      const first = await as.post("/relay/v1/transactions/calculate-fee", transfer(t), { "idempotency-key": "ttl" })
      expect((await as.post("/relay/v1/transactions/calculate-fee", transfer(t, "0.5"), { "idempotency-key": "ttl" })).status).toBe(409)
      await new Promise((resolve) => setTimeout(resolve, 1100))
      const later = await as.post("/relay/v1/transactions/calculate-fee", transfer(t, "0.5"), { "idempotency-key": "ttl" })
      expect(first.status).toBe(200)
      expect(later.status).toBe(200)
      expect(later.headers.get("idempotent-replayed")).toBeNull()
    } finally {
      await short.dispose()
    }
  })
})
