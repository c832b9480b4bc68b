import { assert, describe, it } from "vitest"
import { Permission, RelayError } from "@custody-relay/core"
import { type CreateAccountInput, createRelay, RelayError as PromiseRelayError } from "@custody-relay/core/promise"

describe("Promise facade", () => {
  it("runs a whole flow with plain promises and rejects with tagged errors", async () => {
    const relay = createRelay()
    try {
      const client = await relay.administration.createClient("Acme")
      const admin = await relay.administration.createApiUser({ clientId: client.id, permissions: Permission.permissionNames, name: "admin" })
      const approverKey = await relay.administration.createApiUser({ clientId: client.id, permissions: ["Approve transaction"], name: "approver" })
      assert.match(admin.secret, /^crs_/)
      const me = await relay.authenticate(admin.keyId, admin.secret)
      const approver = await relay.authenticate(approverKey.keyId, approverKey.secret)

      const source = await relay.accounts.create(me, { name: "Treasury", workspace: "custody", assetId: "ETH" })
      const destination = await relay.accounts.create(me, { name: "Hot", workspace: "transactional", assetId: "ETH" })
      for (const { id } of [source, destination]) {
        await relay.accounts.approve(me, { accountId: id })
        await relay.accounts.activate(id)
      }
      await relay.accounts.deposit(source.id, "5")
      const fee = await relay.transactions.calculateFee(me, {
        sourceAccountId: source.id, destinationId: destination.id, destinationType: "internal", amount: "1", assetType: "ETH"
      })
      assert.strictEqual(typeof fee.estimatedFee, "number")
      const quote = await relay.transactions.quoteFee(me, {
        sourceAccountId: source.id, destinationId: destination.id, destinationType: "internal", amount: "1", assetType: "ETH"
      })
      assert.strictEqual(quote.fee, String(fee.estimatedFee))
      const tx = await relay.transactions.initiate(me, {
        sourceAccountId: source.id, destinationId: destination.id, destinationType: "internal", amount: "1", assetType: "ETH"
      })
      assert.strictEqual(tx.status, "awaiting_signature")
      assert.strictEqual((await relay.transactions.approve(approver, tx.id)).status, "PENDING_PROVIDER_APPROVAL")
      await relay.transactions.advanceTo(tx.id, "completed")
      assert.strictEqual((await relay.accounts.get(me, destination.id)).availableBalance, "1")
      assert.strictEqual((await relay.transactions.list(me)).total, 1)
      assert.strictEqual((await relay.accounts.list(me, { assetId: "ETH" }, { page: 1, limit: 1 })).totalPages, 2)

      const wl = await relay.whitelistedAddresses.create(me, {
        name: "EIP-55", address: "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", assetType: "ETH"
      })
      await relay.whitelistedAddresses.approve(wl.id)
      assert.strictEqual((await relay.whitelistedAddresses.list(me)).items[0]?.status, "APPROVED")

      // The inputs are typed (a misspelt field does not compile), and still decoded at run time for JavaScript callers.
      // @ts-expect-error: "attic" is not a workspace
      const invalid = await relay.accounts.create(me, { name: "x", workspace: "attic", assetId: "ETH" }).catch((e: unknown) => e)
      // @ts-expect-error: `assetID` is not a field of the input (the compile error is the point of this line)
      const misspelt = () => relay.accounts.create(me, { name: "Treasury", workspace: "custody", assetID: "ETH" })
      void misspelt
      // @ts-expect-error: a transfer needs all five fields
      const incomplete = () => relay.transactions.initiate(me, { sourceAccountId: "a", destinationId: "b", amount: "1", assetType: "BTC" })
      void incomplete
      assert.instanceOf(invalid, RelayError.InvalidRequest)
      const issues = (invalid as RelayError.InvalidRequest).issues.map((i) => i.path.join("."))
      assert.deepStrictEqual(issues.sort(), ["name", "workspace"])
      const missing = await relay.accounts.get(me, "00000000-0000-7000-8000-000000000000").catch((e: unknown) => e)
      assert.instanceOf(missing, RelayError.NotFound)

      await relay.administration.setPermissions(admin.apiUserId, [])
      const denied = await relay.accounts.list(me).catch((e: unknown) => e)
      // The principal object was authenticated before the change: permissions are read at authentication.
      assert.notInstanceOf(denied, Error)
      const fresh = await relay.authenticate(admin.keyId, admin.secret)
      const refused = await relay.accounts.list(fresh).catch((e: unknown) => e)
      assert.instanceOf(refused, RelayError.PermissionDenied)
      await relay.administration.revokeApiUser(admin.apiUserId)
      assert.instanceOf(await relay.authenticate(admin.keyId, admin.secret).catch((e: unknown) => e), RelayError.Unauthenticated)
    } finally {
      await relay.dispose()
    }
  })

  it("commands take an idempotency key: a retry replays the first result, the same key with other input is refused", async () => {
    const relay = createRelay()
    try {
      const client = await relay.administration.createClient("Acme")
      const admin = await relay.administration.createApiUser({ clientId: client.id, permissions: Permission.permissionNames })
      const me = await relay.authenticate(admin.keyId, admin.secret)
      const input = { name: "Treasury", workspace: "custody", assetId: "ETH" } as const
      const first = await relay.accounts.create(me, input, { idempotencyKey: "create-1" })
      const retry = await relay.accounts.create(me, input, { idempotencyKey: "create-1" })
      assert.deepStrictEqual(retry, first)
      assert.strictEqual((await relay.accounts.list(me)).total, 1)
      const reused = await relay.accounts.create(me, { ...input, name: "Other" }, { idempotencyKey: "create-1" }).then(
        () => undefined,
        (error: unknown) => error
      )
      assert.instanceOf(reused, RelayError.IdempotencyKeyReused)
      // The facade's own entry exports the error classes too, for code that imports nothing else.
      assert.instanceOf(reused, PromiseRelayError.IdempotencyKeyReused)
      assert.strictEqual((await relay.outbox.runDue()), 0)
      // The audit trail: the client's own through the caller, every client's for the operator.
      const mine = await relay.auditTrail(me, { types: ["account.created"] })
      assert.deepStrictEqual(mine.items.map((e) => e.entityId), [first.id])
      assert.isAtLeast((await relay.administration.auditTrail({ entityId: first.id })).total, 1)
    } finally {
      await relay.dispose()
    }
  })

  it("GEN-JSON-1 LIM-SIZE-1: decoding reports every field issue; bodies that are not objects are refused", async () => {
    const relay = createRelay()
    const client = await relay.administration.createClient()
    const key = await relay.administration.createApiUser({ clientId: client.id, permissions: Permission.permissionNames })
    const me = await relay.authenticate(key.keyId, key.secret)
    // What an untyped (JavaScript) caller may pass: the types forbid it, run-time decoding refuses it.
    for (const body of [null, [], "x", 5] as ReadonlyArray<unknown> as ReadonlyArray<CreateAccountInput>) {
      assert.instanceOf(await relay.accounts.create(me, body).catch((e: unknown) => e), RelayError.InvalidRequest)
    }
    const tooLong = await relay.accounts.create(me, { name: "n".repeat(51), workspace: "custody", assetId: "BTC", description: "d".repeat(256) })
      .catch((e: unknown) => e) as RelayError.InvalidRequest
    assert.deepStrictEqual(tooLong.issues.map((i) => i.path.join(".")).sort(), ["description", "name"])
    // Lengths count code points: 50 emoji are 50 characters.
    await relay.accounts.create(me, { name: "🪙".repeat(50), workspace: "custody", assetId: "BTC" })
    for (const name of ["ab", "   ", "bad\u0000name", "lone\ud800"]) {
      assert.instanceOf(await relay.accounts.create(me, { name, workspace: "custody", assetId: "BTC" }).catch((e: unknown) => e), RelayError.InvalidRequest)
    }
    assert.instanceOf(await relay.accounts.list(me, {}, { page: 0, limit: 20 }).catch((e: unknown) => e), RelayError.InvalidRequest)
    await relay.dispose()
  })
})
