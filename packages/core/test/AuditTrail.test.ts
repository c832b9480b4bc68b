/**
 * The audit trail's filter as the core takes it from any caller (the Promise facade, an Effect embedder): an instant
 * written as a caller may write it (GEN-TIME-1) bounds the trail at that instant, whatever digits it leaves out; an
 * id in any case finds its record; a value that names nothing is a 400, never an empty or a shifted trail.
 */
import { assert, describe, it } from "@effect/vitest"
import { Accounts, AuditTrail, type DomainEvent, Ids, type Principal, type RelayError } from "@custody-relay/core"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { failureOf, failureTag } from "./Failure.js"
import { layer, newClient, principalOf } from "./TestWorld.js"

const page = { page: 1, limit: 100 }

/** An account created at 2026-01-31T12:00:00.000Z exactly, and another one 500 ms later. */
const twoAccounts = Effect.gen(function*() {
  const me = yield* principalOf(yield* newClient)
  yield* TestClock.setTime(Date.parse("2026-01-31T12:00:00.000Z"))
  const first = yield* Accounts.create(me, { name: "On the second", workspace: "custody", assetId: "BTC" })
  yield* TestClock.adjust("500 millis")
  const second = yield* Accounts.create(me, { name: "Half past", workspace: "custody", assetId: "BTC" })
  return { me, first: first.id, second: second.id }
})

const createdIn = (me: Principal.Principal, filter: DomainEvent.TrailFilter) =>
  Effect.map(AuditTrail.list(me, { ...filter, types: ["account.created"] }, page), (found) => found.items.map((e) => e.entityId))

const operatorCreatedIn = (filter: DomainEvent.TrailFilter) =>
  Effect.map(AuditTrail.acrossClients({ ...filter, types: ["account.created"] }, page), (found) => found.items.map((e) => e.entityId))

describe("AuditTrail filter", () => {
  it.effect("GEN-TIME-1: from and to are inclusive at the instant they name, however many digits of it are written", () =>
    Effect.gen(function*() {
      const { first, me, second } = yield* twoAccounts
      // Stored as 12:00:00.000Z, which sorts as text before 12:00:00Z and 12:00:00.0Z.
      for (const written of ["2026-01-31T12:00:00Z", "2026-01-31T12:00:00.0Z", "2026-01-31T12:00:00.000Z"]) {
        assert.deepStrictEqual(yield* createdIn(me, { from: written }), [second, first], `from ${written}`)
        assert.deepStrictEqual(yield* createdIn(me, { to: written }), [first], `to ${written}`)
        assert.deepStrictEqual(yield* operatorCreatedIn({ from: written, to: written }), [first], `operator ${written}`)
      }
      // 12:00:00.5Z is 12:00:00.500Z, which sorts as text after it.
      assert.deepStrictEqual(yield* createdIn(me, { from: "2026-01-31T12:00:00.5Z" }), [second])
      assert.deepStrictEqual(yield* createdIn(me, { to: "2026-01-31T12:00:00.5Z" }), [second, first])
      assert.deepStrictEqual(yield* createdIn(me, { from: "2026-01-31T12:00:00.501Z" }), [])
    }).pipe(Effect.provide(layer())))

  it.effect("an entity id in upper case finds its record's events, as over HTTP", () =>
    Effect.gen(function*() {
      const { first, me } = yield* twoAccounts
      assert.notStrictEqual(first.toUpperCase(), first, "a real UUIDv7 has hex letters")
      assert.deepStrictEqual(yield* createdIn(me, { entityId: first.toUpperCase() }), [first])
      assert.deepStrictEqual(yield* operatorCreatedIn({ entityId: first.toUpperCase() }), [first])
    }).pipe(Effect.provide(layer({}, Ids.Ids.layer))))

  it.effect("GEN-5XX-1: a filter value that names nothing is an InvalidRequest naming its field, for the caller and the operator", () =>
    Effect.gen(function*() {
      const { me } = yield* twoAccounts
      // What a JavaScript caller or an `as` cast may pass: the types forbid each one.
      const refused: ReadonlyArray<readonly [string, unknown]> = [
        ["from", { from: "yesterday" }],
        ["from", { from: "2026-02-30T00:00:00Z" }],
        ["to", { to: "2026-01-31T12:00:00+01:00" }],
        ["to", { to: 1769860800000 }],
        ["entityId", { entityId: "not-an-id" }],
        ["entityType", { entityType: "wallet" }],
        ["types", { types: ["account.created", "account.exploded"] }],
        ["types", { types: "account.created" }]
      ]
      for (const [field, filter] of refused) {
        for (const call of [AuditTrail.list(me, filter as DomainEvent.TrailFilter, page), AuditTrail.acrossClients(filter as DomainEvent.TrailFilter, page)]) {
          const exit = yield* Effect.exit(call)
          assert.strictEqual(failureTag(exit), "InvalidRequest", JSON.stringify(filter))
          assert.deepStrictEqual((failureOf(exit) as RelayError.InvalidRequest).issues.map((i) => i.path), [[field]])
        }
      }
    }).pipe(Effect.provide(layer())))
})
