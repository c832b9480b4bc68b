/**
 * Exactly-once commands (Idempotency.ts) where a unit of work runs more than once: the answer says it was replayed
 * only when the run that committed replayed it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Accounts, Idempotency, RateLimiter, Relay, Storage, Timestamp } from "@custody-relay/core"
import { Effect, Layer, Option } from "effect"
import { newClient, principalOf } from "./TestWorld.js"

/**
 * The memory store, whose next write unit, once `rerunNext` is set, first runs on a view where every key's claim
 * meets `met` (another unit's result under the key, not yet committed), then is undone with it and runs again: what a
 * SQLite commit group rolled back by another member does to a unit that had replayed a member's result.
 */
const rerunOnce = () => {
  const state: { rerunNext: boolean; met: Idempotency.IdempotencyRecord | undefined } = { rerunNext: false, met: undefined }
  const layer = Layer.effect(Storage.Storage, Effect.gen(function*() {
    const memory = yield* Storage.Storage
    return Storage.Storage.of({
      transaction: (mode, work) =>
        Effect.suspend(() => {
          const met = state.met
          if (mode !== "write" || !state.rerunNext || met === undefined) return memory.transaction(mode, work)
          state.rerunNext = false
          const meeting = (unit: Storage.StorageUnit) =>
            new Proxy(unit, {
              get: (target, name) =>
                name === "claimIdempotencyKey"
                  ? (claim: Idempotency.IdempotencyClaim) => Effect.succeed(Option.some({ ...met, scope: claim.scope, key: claim.key, fingerprint: claim.fingerprint }))
                  : Reflect.get(target, name, target)
            })
          return Effect.andThen(Effect.exit(memory.transaction(mode, (unit) => work(meeting(unit)))), memory.transaction(mode, work))
        })
    })
  })).pipe(Layer.provide(Storage.Storage.layerMemory))
  return { state, layer: Relay.layer(Layer.merge(layer, RateLimiter.RateLimiter.layerMemory)) }
}

describe("Idempotency", () => {
  it.effect("a command whose first run met a result it then lost with its unit, and ran the second time, is not answered as replayed", () => {
    const { layer, state } = rerunOnce()
    return Effect.gen(function*() {
      const principal = yield* principalOf(yield* newClient)
      const create = (name: string) => Accounts.create(principal, { name, workspace: "custody", assetId: "BTC" })
      // Another command's kept result, as the first run meets it.
      const other = new Idempotency.CommandKey("scope", "other", "fingerprint-other")
      yield* Idempotency.withKey(create("Other"), other)
      const now = yield* Timestamp.now
      state.met = Option.getOrUndefined(yield* Storage.run("lookup", (unit) => unit.findIdempotencyRecord("scope", "other", now)))
      assert.isDefined(state.met)
      const key = new Idempotency.CommandKey("scope", "mine", "fingerprint-mine")
      state.rerunNext = true
      const created = yield* Idempotency.withKey(create("Mine"), key)
      assert.strictEqual(created.name, "Mine")
      assert.isFalse(key.replayed, "the run that committed ran the command")
    }).pipe(Effect.provide(layer))
  })
})
