import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Accounts, Ids, Transaction, Transactions, WhitelistedAddresses } from "@custody-relay/core"
import { failureTag } from "./Failure.js"
import { activeAccount, approvedWhitelistEntry, layer, newClient, principalOf } from "./TestWorld.js"

/** An id as another system may write it: RFC 9562 makes a UUID's hex digits case-insensitive on input. */
const shouted = (id: string) => {
  const upper = id.toUpperCase()
  // UUIDv7s carry hex letters; an id without any could not tell the two cases apart.
  assert.notStrictEqual(upper, id)
  return upper
}

describe("Ids", () => {
  it.effect("the default ids are distinct UUIDv7s, in the order they were minted", () =>
    Effect.gen(function*() {
      const ids = yield* Ids.Ids.use((mint) => Effect.forEach(Array.from({ length: 20_000 }), () => mint.next))
      assert.strictEqual(new Set(ids).size, ids.length)
      for (const id of ids) assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      assert.deepStrictEqual([...ids].sort(), ids)
      // The time in the first 48 bits is now, to the millisecond.
      const millis = Number.parseInt(ids.at(-1)?.replaceAll("-", "").slice(0, 12) ?? "", 16)
      assert.isAtMost(Math.abs(millis - Date.now()), 5_000)
    }).pipe(Effect.provide(Ids.Ids.layer)))

  it("isUuid accepts the textual form in either case and nothing else; canonicalUuid lowers it", () => {
    assert.isTrue(Ids.isUuid("0190b6e4-ab12-7c00-8def-00000000000f"))
    assert.isTrue(Ids.isUuid("0190B6E4-AB12-7C00-8DEF-00000000000F"))
    for (const bad of ["", "0190b6e4ab127c008def00000000000f", "0190b6e4-ab12-7c00-8def-00000000000g", " 0190b6e4-ab12-7c00-8def-00000000000f"]) {
      assert.isFalse(Ids.isUuid(bad), bad)
    }
    assert.strictEqual(Ids.canonicalUuid("0190B6E4-AB12-7C00-8DEF-00000000000F"), "0190b6e4-ab12-7c00-8def-00000000000f")
  })

  it("a transfer's ids decode to lower case (UuidInput)", () => {
    const decoded = Schema.decodeUnknownSync(Transaction.TransferInput)({
      sourceAccountId: "0190B6E4-AB12-7C00-8DEF-00000000000F",
      destinationId: "0190B6E4-AB12-7C00-8DEF-0000000000AA",
      destinationType: "external",
      amount: "1",
      assetType: "BTC"
    })
    assert.strictEqual(decoded.sourceAccountId, "0190b6e4-ab12-7c00-8def-00000000000f")
    assert.strictEqual(decoded.destinationId, "0190b6e4-ab12-7c00-8def-0000000000aa")
  })

  it.effect("an id given in upper case names the same record in every operation that reads one", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const source = yield* activeAccount(p, "BTC", "1")
      const whitelisted = yield* approvedWhitelistEntry(p, "BTC")

      assert.strictEqual((yield* Accounts.get(p, shouted(source))).id, source)
      assert.strictEqual((yield* WhitelistedAddresses.get(p, shouted(whitelisted))).id, whitelisted)

      // Through the Effect API, undecoded: the core lowers the ids itself.
      const initiated = yield* Transactions.initiate(p, {
        sourceAccountId: shouted(source),
        destinationId: shouted(whitelisted),
        destinationType: "external",
        amount: "0.1",
        assetType: "BTC"
      })
      assert.strictEqual(initiated.sourceAccountId, source)
      assert.strictEqual(initiated.destinationId, whitelisted)
      assert.strictEqual((yield* Transactions.get(p, shouted(initiated.id))).id, initiated.id)
      assert.strictEqual((yield* Transactions.status(p, shouted(initiated.id))).id, initiated.id)
      const listed = yield* Transactions.list(p, { accountId: shouted(source) }, { page: 1, limit: 20 })
      assert.deepStrictEqual(listed.items.map((t) => t.id), [initiated.id])

      const pending = yield* Accounts.create(p, { name: "Pending", workspace: "custody", assetId: "ETH" })
      assert.deepStrictEqual(yield* Accounts.approve(p, { accountId: shouted(pending.id) }), { accountId: pending.id, status: "approved" })

      // A malformed id is still a 400, whatever its case.
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.get(p, "NOT-A-UUID"))), "InvalidRequest")
    }).pipe(Effect.provide(layer({}, Ids.Ids.layer))))
})
