/**
 * Webhook redelivery's bounds (Webhooks.redeliver): one call queues at most MAX_REDELIVERED deliveries, refusing a
 * stretch with more and saying how many matched, so one client cannot hold the node's writes with it; a longer
 * stretch is taken in parts with since and until; an event by id is found without walking the trail.
 */
import { assert, describe, it } from "@effect/vitest"
import { DomainEvent, type Ids, RateLimiter, Relay, Storage, Timestamp, Webhooks } from "@custody-relay/core"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { failureOf } from "./Failure.js"
import { layer, newClient, principalOf } from "./TestWorld.js"

/** `count` account.approved events of one client, a millisecond apart from `atMillis` on, in one unit. */
const eventsAt = (clientId: Ids.ClientId, atMillis: number, count: number) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(atMillis)
    yield* Storage.run("write", (unit) =>
      Effect.forEach(Array.from({ length: count }, (_, i) => i), (i) =>
        Effect.andThen(TestClock.setTime(atMillis + i), DomainEvent.append(unit, {
          type: "account.approved",
          clientId,
          entityId: `0190b6e4-0000-7000-8000-${String(i).padStart(12, "0")}`,
          actor: DomainEvent.operator,
          data: {}
        })), { discard: true }))
  })

/**
 * The memory store, whose write units see `appended` newer events of `clientId` committed by another unit just after
 * they read a trail's first page: what a write unit on PostgreSQL (read committed) can see between two statements.
 */
const appendedBetweenPages = (state: { clientId: Ids.ClientId | undefined; appended: number }) =>
  Relay.layer(Layer.merge(
    Layer.effect(Storage.Storage, Effect.gen(function*() {
      const memory = yield* Storage.Storage
      return Storage.Storage.of({
        transaction: (mode, work) =>
          memory.transaction(mode, (unit) =>
            work(new Proxy(unit, {
              get: (target, name) =>
                name !== "pageEvents"
                  ? Reflect.get(target, name, target)
                  : (clientId: string | null, filter: DomainEvent.TrailFilter, page: { readonly page: number; readonly limit: number }) =>
                    Effect.andThen(
                      page.page === 2 && state.clientId !== undefined && state.appended > 0
                        ? Effect.forEach(Array.from({ length: state.appended }, (_, i) => i), (i) =>
                          DomainEvent.append(target, {
                            type: "account.approved",
                            clientId: state.clientId!,
                            entityId: `0190b6e4-0000-7000-9000-${String(i).padStart(12, "0")}`,
                            actor: DomainEvent.operator,
                            data: {}
                          }), { discard: true }).pipe(Effect.tap(() => Effect.sync(() => (state.appended = 0))))
                        : Effect.void,
                      target.pageEvents(clientId, filter, page)
                    )
            })))
      })
    })).pipe(Layer.provide(Storage.Storage.layerMemory)),
    RateLimiter.RateLimiter.layerMemory
  ))

describe("Webhooks.redeliver", () => {
  it.effect("events committed while a redelivery walks the trail push none of the oldest past its last page", () => {
    const state: { clientId: Ids.ClientId | undefined; appended: number } = { clientId: undefined, appended: 0 }
    return Effect.gen(function*() {
      const clientId = yield* newClient
      const principal = yield* principalOf(clientId)
      const subscription = yield* Webhooks.subscribe(principal, { url: "https://hooks.example.com/relay", eventTypes: ["account.approved"] })
      // 200 events, two whole pages: any event appended after the first page pushes the oldest onto a third.
      yield* eventsAt(clientId, Date.parse("2026-01-01T00:00:00.000Z"), 200)
      Object.assign(state, { clientId, appended: 5 })
      const since = "2026-01-01T00:00:00.000Z"
      // Every one of the 200 is queued again; the five new ones were queued when they were appended, as every event is.
      assert.deepStrictEqual(yield* Webhooks.redeliver(principal, subscription.id, { since }), { redelivered: 200 })
    }).pipe(Effect.provide(appendedBetweenPages(state)))
  })

  it.effect("at most MAX_REDELIVERED events a call: a longer stretch is refused, saying how many matched, and taken in parts with until", () =>
    Effect.gen(function*() {
      const clientId = yield* newClient
      const principal = yield* principalOf(clientId)
      const subscription = yield* Webhooks.subscribe(principal, { url: "https://hooks.example.com/relay", eventTypes: ["account.approved"] })
      const start = Date.parse("2026-01-01T00:00:00.000Z")
      yield* eventsAt(clientId, start, Webhooks.MAX_REDELIVERED + 200)
      const refused = failureOf(yield* Effect.exit(Webhooks.redeliver(principal, subscription.id, { since: "2026-01-01T00:00:00Z" })))
      assert.strictEqual(refused?._tag, "InvalidRequest")
      assert.include(refused?.message ?? "", `${Webhooks.MAX_REDELIVERED + 200} events match; at most ${Webhooks.MAX_REDELIVERED}`)
      // In two parts: the first MAX_REDELIVERED milliseconds, then the rest.
      const until = Timestamp.fromMillis(start + Webhooks.MAX_REDELIVERED - 1)
      const firstPart = yield* Webhooks.redeliver(principal, subscription.id, { since: "2026-01-01T00:00:00Z", until })
      const rest = yield* Webhooks.redeliver(principal, subscription.id, { since: Timestamp.fromMillis(start + Webhooks.MAX_REDELIVERED) })
      assert.deepStrictEqual([firstPart.redelivered, rest.redelivered], [Webhooks.MAX_REDELIVERED, 200])
      // until without since, or an until that is no instant, changes nothing.
      assert.strictEqual(failureOf(yield* Effect.exit(Webhooks.redeliver(principal, subscription.id, { eventId: "x", until })))?.message, "until: goes with since")
      assert.strictEqual(failureOf(yield* Effect.exit(Webhooks.redeliver(principal, subscription.id, { since: until, until: "tomorrow" })))?._tag, "InvalidRequest")
    }).pipe(Effect.provide(layer())))

  it.effect("one event by its id, among many; another client's event, or one the subscription does not take, is NotFound", () =>
    Effect.gen(function*() {
      const clientId = yield* newClient
      const principal = yield* principalOf(clientId)
      const subscription = yield* Webhooks.subscribe(principal, { url: "https://hooks.example.com/relay", eventTypes: ["account.approved"] })
      yield* eventsAt(clientId, Date.parse("2026-01-01T00:00:00.000Z"), 300)
      const page = yield* Storage.run("read", (unit) => unit.pageEvents(clientId, { types: ["account.approved"] }, { page: 3, limit: 100 }))
      const deep = page.items[50]
      assert.isDefined(deep)
      assert.deepStrictEqual(yield* Webhooks.redeliver(principal, subscription.id, { eventId: deep?.id ?? "" }), { redelivered: 1 })
      const other = yield* principalOf(yield* newClient)
      const theirs = yield* Webhooks.subscribe(other, { url: "https://hooks.example.com/other" })
      assert.strictEqual(failureOf(yield* Effect.exit(Webhooks.redeliver(other, theirs.id, { eventId: deep?.id ?? "" })))?._tag, "NotFound")
      const created = yield* Storage.run("read", (unit) => unit.pageEvents(clientId, { types: ["client.created"] }, { page: 1, limit: 1 }))
      const untaken = created.items[0]?.id
      if (untaken !== undefined) {
        assert.strictEqual(failureOf(yield* Effect.exit(Webhooks.redeliver(principal, subscription.id, { eventId: untaken })))?._tag, "NotFound")
      }
    }).pipe(Effect.provide(layer())))
})

describe("Webhooks.setEnabled", () => {
  it.effect("a subscription is turned on or off by true or false only: a JavaScript caller's \"false\" (truthy) is refused and changes nothing", () =>
    Effect.gen(function*() {
      const clientId = yield* newClient
      const principal = yield* principalOf(clientId)
      const subscription = yield* Webhooks.subscribe(principal, { url: "https://hooks.example.com/relay", eventTypes: ["account.approved"] })
      for (const enabled of ["false", 0, null, undefined, "true"] as ReadonlyArray<unknown> as ReadonlyArray<never>) {
        for (const attempt of [Webhooks.setEnabled(principal, subscription.id, enabled), Webhooks.setEnabledByOperator(subscription.id, enabled)]) {
          const refused = failureOf(yield* Effect.exit(attempt))
          assert.strictEqual(refused?._tag, "InvalidRequest", JSON.stringify(enabled))
          assert.strictEqual(refused?.message, "enabled: must be true or false")
        }
      }
      assert.strictEqual((yield* Webhooks.get(principal, subscription.id)).enabled, true)
      assert.strictEqual((yield* Webhooks.setEnabledByOperator(subscription.id.toUpperCase(), false)).enabled, false)
      assert.strictEqual(failureOf(yield* Effect.exit(Webhooks.setEnabledByOperator("not-an-id", true)))?._tag, "InvalidRequest")
      assert.strictEqual((yield* Webhooks.setEnabled(principal, subscription.id, true)).enabled, true)
    }).pipe(Effect.provide(layer())))
})
