import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { WhitelistedAddress, WhitelistedAddresses } from "@custody-relay/core"
import { failureTag } from "./Failure.js"
import { layer, newClient, principalOf, validAddress } from "./TestWorld.js"

describe("WhitelistedAddresses", () => {
  it.effect("WL-CREATE-1 WL-CREATE-2 WL-SHAPE-1: create answers PENDING without providerId; get shows it", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const address = validAddress("ETH")
      const created = yield* WhitelistedAddresses.create(p, { name: "Kraken", address, assetType: "ETH", description: "hot wallet" })
      assert.deepStrictEqual(Object.keys(created).sort(), ["address", "assetType", "description", "id", "name", "status"])
      assert.strictEqual(created.status, "PENDING")
      const view = yield* WhitelistedAddresses.get(p, created.id)
      assert.deepStrictEqual(Object.keys(view).sort(), ["address", "assetType", "description", "id", "name", "providerId", "status"])
      assert.match(view.providerId, /^[0-9a-f-]{36}$/)
    }).pipe(Effect.provide(layer())))

  it.effect("WL-CREATE-1: the address must be valid for the asset; the asset must be supported", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const btc = validAddress("BTC")
      assert.strictEqual(failureTag(yield* Effect.exit(WhitelistedAddresses.create(p, { name: "x", address: btc, assetType: "ETH" }))), "InvalidAddress")
      assert.strictEqual(failureTag(yield* Effect.exit(WhitelistedAddresses.create(p, { name: "x", address: btc, assetType: "XRP" }))), "UnsupportedAsset")
      const corrupted = btc.slice(0, -1) + (btc.endsWith("q") ? "p" : "q")
      assert.strictEqual(failureTag(yield* Effect.exit(WhitelistedAddresses.create(p, { name: "x", address: corrupted, assetType: "BTC" }))), "InvalidAddress")
    }).pipe(Effect.provide(layer())))

  it.effect("the same address twice for one asset is a conflict until archived", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const address = validAddress("SOL")
      const first = yield* WhitelistedAddresses.create(p, { name: "one", address, assetType: "SOL" })
      assert.strictEqual(failureTag(yield* Effect.exit(WhitelistedAddresses.create(p, { name: "two", address, assetType: "SOL" }))), "DuplicateWhitelistedAddress")
      yield* WhitelistedAddresses.archive(first.id)
      yield* WhitelistedAddresses.create(p, { name: "three", address, assetType: "SOL" })
    }).pipe(Effect.provide(layer())))

  it.effect("the same address in another spelling is the same address: a conflict; each entry keeps its spelling", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const checksummed = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
      const first = yield* WhitelistedAddresses.create(p, { name: "lower", address: checksummed.toLowerCase(), assetType: "ETH" })
      assert.strictEqual(first.address, checksummed.toLowerCase())
      for (const spelling of [checksummed, `0x${checksummed.slice(2).toUpperCase()}`]) {
        const again = yield* Effect.exit(WhitelistedAddresses.create(p, { name: "again", address: spelling, assetType: "ETH" }))
        assert.strictEqual(failureTag(again), "DuplicateWhitelistedAddress")
      }
      const segwit = "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"
      yield* WhitelistedAddresses.create(p, { name: "upper", address: segwit.toUpperCase(), assetType: "BTC" })
      const lower = yield* Effect.exit(WhitelistedAddresses.create(p, { name: "lower", address: segwit, assetType: "BTC" }))
      assert.strictEqual(failureTag(lower), "DuplicateWhitelistedAddress")
    }).pipe(Effect.provide(layer())))

  it.effect("WL-STATE-1 WL-FLOW-1: transitions follow the table; anything else is refused and changes nothing", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const { id } = yield* WhitelistedAddresses.create(p, { name: "desk", address: validAddress("BTC"), assetType: "BTC" })
      assert.strictEqual((yield* WhitelistedAddresses.approve(id)).status, "APPROVED")
      assert.strictEqual(failureTag(yield* Effect.exit(WhitelistedAddresses.reject(id))), "TransitionNotAllowed")
      assert.strictEqual((yield* WhitelistedAddresses.get(p, id)).status, "APPROVED")
      assert.strictEqual((yield* WhitelistedAddresses.archive(id)).status, "ARCHIVED")
      assert.strictEqual(failureTag(yield* Effect.exit(WhitelistedAddresses.approve(id))), "TransitionNotAllowed")
      assert.strictEqual(failureTag(yield* Effect.exit(WhitelistedAddresses.approve("00000000-0000-7000-8000-00000000dead"))), "NotFound")
      assert.deepStrictEqual(WhitelistedAddress.statuses, ["PENDING", "APPROVED", "REJECTED", "ARCHIVED"])
    }).pipe(Effect.provide(layer())))

  it.effect("WL-LIST-1 SCOPE-1 SCOPE-2 WL-GET-1: multi-value filters, client scope, malformed ids", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const stranger = yield* principalOf(yield* newClient)
      const btc = yield* WhitelistedAddresses.create(p, { name: "b", address: validAddress("BTC"), assetType: "BTC" })
      yield* WhitelistedAddresses.create(p, { name: "e", address: validAddress("ETH"), assetType: "ETH" })
      const sol = yield* WhitelistedAddresses.create(p, { name: "s", address: validAddress("SOL"), assetType: "SOL" })
      yield* WhitelistedAddresses.approve(btc.id)
      yield* WhitelistedAddresses.reject(sol.id)
      const page = { page: 1, limit: 20 }
      assert.strictEqual((yield* WhitelistedAddresses.list(p, { assetTypes: ["BTC", "SOL"] }, page)).total, 2)
      assert.strictEqual((yield* WhitelistedAddresses.list(p, { statuses: ["APPROVED", "REJECTED"] }, page)).total, 2)
      assert.strictEqual((yield* WhitelistedAddresses.list(p, { statuses: ["PENDING"], assetTypes: ["ETH"] }, page)).total, 1)
      assert.strictEqual((yield* WhitelistedAddresses.list(stranger, {}, page)).total, 0)
      assert.strictEqual(failureTag(yield* Effect.exit(WhitelistedAddresses.get(stranger, btc.id))), "NotFound")
      assert.strictEqual(failureTag(yield* Effect.exit(WhitelistedAddresses.get(p, "zzz"))), "InvalidRequest")
    }).pipe(Effect.provide(layer())))
})
