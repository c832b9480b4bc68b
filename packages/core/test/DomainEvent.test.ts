/**
 * The event log: every type of the catalogue is appended by the change it names, each event's data is what its
 * Schema says, events of one entity come in the order of their changes with the status before and after, and no
 * event carries a secret.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  Accounts,
  Administration,
  DomainEvent,
  OutboxWorker,
  Storage,
  Transactions,
  WhitelistedAddresses
} from "@custody-relay/core"
import { Effect, Redacted, Schema } from "effect"
import { TestClock } from "effect/testing"
import { activeAccount, approvedWhitelistEntry, layer, newClient, newPrincipal, principalOf, validAddress } from "./TestWorld.js"

const allEvents = Storage.run("read", (unit) => unit.listEvents({}, 0, 100_000))

describe("DomainEvent", () => {
  it.effect("every type of the catalogue is appended by its change, with data of its Schema and no secret", () =>
    Effect.gen(function*() {
      const client = yield* newClient
      const { principal: admin, issued } = yield* newPrincipal(client, undefined, "admin")
      const approver = yield* principalOf(client, ["Approve transaction"], "approver")
      yield* Administration.setPermissions(issued.apiUserId, [...admin.permissions].reverse())
      yield* Administration.setRateLimit(issued.apiUserId, { limit: 100, windowSeconds: 60 })
      const other = yield* newPrincipal(client, ["View custody account"])
      yield* Administration.rotateSecret(other.issued.apiUserId)
      yield* Administration.revokeApiUser(other.issued.apiUserId)

      const source = yield* activeAccount(admin, "BTC", "10", 1)
      const rejected = yield* Accounts.create(admin, { name: "Refused", workspace: "custody", assetId: "BTC" })
      yield* Accounts.reject(admin, { accountId: rejected.id })
      const destination = yield* approvedWhitelistEntry(admin, "BTC")
      for (const step of [WhitelistedAddresses.reject, WhitelistedAddresses.archive]) {
        const entry = yield* WhitelistedAddresses.create(admin, { name: "Desk", address: validAddress("BTC"), assetType: "BTC" })
        yield* step(entry.id)
      }
      const initiate = Transactions.initiate(admin, {
        sourceAccountId: source,
        destinationId: destination,
        destinationType: "external",
        amount: "0.1",
        assetType: "BTC"
      })
      const completed = yield* initiate
      yield* Transactions.approve(approver, completed.id)
      yield* OutboxWorker.drain()
      yield* Transactions.advanceTo(completed.id, "completed")
      yield* Transactions.reject(approver, (yield* initiate).id)
      yield* Transactions.cancel((yield* initiate).id)
      yield* Transactions.advanceTo((yield* initiate).id, "failed")
      const blocked = yield* initiate
      yield* Transactions.approve(approver, blocked.id)
      yield* Transactions.applyProviderEvent(blocked.id, "providerReject")
      yield* TestClock.adjust("1 minute")

      const events = yield* allEvents
      const seen = new Set(events.map((e) => e.type))
      assert.deepStrictEqual(DomainEvent.eventTypes.filter((type) => !seen.has(type)), [])
      for (const event of events) {
        const kind = DomainEvent.catalogue[event.type]
        assert.strictEqual(event.entityType, kind.entity)
        Schema.decodeUnknownSync(kind.data as Schema.Codec<unknown, unknown>)(event.data)
      }
      const log = JSON.stringify(events)
      assert.notInclude(log, Redacted.value(issued.secret))
      assert.notInclude(log, Redacted.value(other.issued.secret))
      assert.notInclude(log, "secretHash")

      // One entity's events: in order, each starting where the last ended, each with who made it.
      const trail = events.filter((e) => e.entityId === completed.id)
      assert.deepStrictEqual(trail.map((e) => [e.type, e.actor.kind]), [
        ["transaction.initiated", "api_user"],
        ["transaction.approved_by_approver", "api_user"],
        ["transaction.quorum_reached", "api_user"],
        ["transaction.submitted", "system"],
        ["transaction.provider_approved", "operator"],
        ["transaction.broadcast", "operator"],
        ["transaction.completed", "operator"]
      ])
      const statuses = trail.map((e) => [e.statusBefore, e.statusAfter])
      for (let i = 1; i < statuses.length; i++) assert.strictEqual(statuses[i]?.[0], statuses[i - 1]?.[1])
      assert.isTrue(trail.every((e, i) => i === 0 || e.position > trail[i - 1]!.position))
    }).pipe(Effect.provide(layer())))

  it.effect("a refused change appends nothing", () =>
    Effect.gen(function*() {
      const client = yield* newClient
      const admin = yield* principalOf(client)
      const before = (yield* allEvents).length
      const account = yield* Accounts.create(admin, { name: "Once", workspace: "custody", assetId: "BTC" })
      const afterCreate = (yield* allEvents).length
      yield* Effect.flip(Accounts.create(admin, { name: "Once", workspace: "custody", assetId: "BTC" }))
      yield* Accounts.approve(admin, { accountId: account.id })
      yield* Effect.flip(Accounts.approve(admin, { accountId: account.id }))
      const after = yield* allEvents
      assert.strictEqual(afterCreate, before + 1)
      assert.deepStrictEqual(after.slice(before).map((e) => e.type), ["account.created", "account.approved"])
    }).pipe(Effect.provide(layer())))
})
