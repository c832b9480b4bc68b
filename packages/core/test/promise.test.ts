import { Effect, Layer } from "effect"
import { Webhook as StandardWebhook } from "standardwebhooks"
import { assert, describe, it } from "vitest"
import { Permission, Relay, RelayError, Webhooks } from "@custody-relay/core"
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
      // LIM-RATE-2: a budget of its own, read at authentication like the permissions, and taken away with null.
      await relay.administration.setRateLimit(admin.apiUserId, { limit: 50, windowSeconds: 10 })
      assert.deepStrictEqual((await relay.authenticate(admin.keyId, admin.secret)).rateLimit, { limit: 50, windowSeconds: 10 })
      assert.instanceOf(await relay.administration.setRateLimit(admin.apiUserId, { limit: 0, windowSeconds: 10 }).catch((e: unknown) => e), RelayError.InvalidRequest)
      await relay.administration.setRateLimit(admin.apiUserId, null)
      assert.isUndefined((await relay.authenticate(admin.keyId, admin.secret)).rateLimit)
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
      // A filter is checked as HTTP checks its query: a time that names no instant is refused, not an empty trail.
      assert.instanceOf(await relay.auditTrail(me, { from: "yesterday" }).catch((e: unknown) => e), PromiseRelayError.InvalidRequest)
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

  it("GEN-5XX-1 ACC-LIST-1 TXN-LIST-1 WL-LIST-1: a list's filter is decoded as HTTP decodes its query: a value that names nothing is refused, not an empty page", async () => {
    const relay = createRelay()
    try {
      const client = await relay.administration.createClient()
      const key = await relay.administration.createApiUser({ clientId: client.id, permissions: Permission.permissionNames })
      const me = await relay.authenticate(key.keyId, key.secret)
      await relay.accounts.create(me, { name: "Treasury", workspace: "custody", assetId: "BTC" })
      // What an untyped caller may pass; each names its field.
      const refusals: ReadonlyArray<readonly [string, Promise<unknown>]> = [
        ["workspace", relay.accounts.list(me, { workspace: "vault" } as never)],
        ["roles.0", relay.accounts.list(me, { roles: ["admin"] } as never)],
        ["status", relay.accounts.list(me, { status: "ACTIVE" } as never)],
        ["search", relay.accounts.list(me, { search: 5 } as never)],
        ["search", relay.accounts.list(me, { search: "x".repeat(256) })],
        ["assetId", relay.accounts.list(me, { assetId: "lone\ud800" })],
        ["group", relay.transactions.list(me, { group: "done" } as never)],
        ["assetType", relay.transactions.list(me, { assetType: "B".repeat(65) })],
        ["statuses.0", relay.whitelistedAddresses.list(me, { statuses: ["pending"] } as never)],
        ["assetTypes", relay.whitelistedAddresses.list(me, { assetTypes: Array.from({ length: 51 }, () => "BTC") })],
        ["assetTypes", relay.whitelistedAddresses.list(me, { assetTypes: "BTC" } as never)]
      ]
      for (const [field, call] of refusals) {
        const refused = await call.catch((e: unknown) => e)
        assert.instanceOf(refused, RelayError.InvalidRequest, field)
        assert.deepStrictEqual((refused as RelayError.InvalidRequest).issues.map((i) => i.path.join(".")), [field])
      }
      // A filter that is not an object, and an idempotency key HTTP's header would refuse; neither command runs.
      assert.instanceOf(await relay.auditTrail(me, null as never).catch((e: unknown) => e), RelayError.InvalidRequest)
      for (const idempotencyKey of ["k".repeat(256), "", "with space", 5 as never]) {
        const refused = await relay.accounts.create(me, { name: "Keyed", workspace: "custody", assetId: "BTC" }, { idempotencyKey })
          .catch((e: unknown) => e)
        assert.instanceOf(refused, RelayError.InvalidRequest, JSON.stringify(idempotencyKey))
        assert.deepStrictEqual((refused as RelayError.InvalidRequest).issues.map((i) => i.path.join(".")), ["idempotencyKey"])
      }
      assert.strictEqual((await relay.accounts.list(me, { search: "Keyed" })).total, 0)
      // The same filters with values that name something answer as before.
      assert.strictEqual((await relay.accounts.list(me, { workspace: "custody", roles: ["custody"], status: "pending_approval", search: "treas" })).total, 1)
      assert.strictEqual((await relay.transactions.list(me, { group: "pending", assetType: "BTC" })).total, 0)
      assert.strictEqual((await relay.whitelistedAddresses.list(me, { statuses: ["PENDING"], assetTypes: Array.from({ length: 50 }, () => "BTC") })).total, 0)
    } finally {
      await relay.dispose()
    }
  })

  it("manages webhook subscriptions: deliveries signed and logged, redelivered, disabled, and the operator's view without secrets", async () => {
    const posted: Array<{ readonly url: string; readonly headers: Readonly<Record<string, string>>; readonly body: string }> = []
    const transport = Layer.succeed(Webhooks.WebhookTransport, Webhooks.WebhookTransport.of({
      post: (url, headers, body) => Effect.sync(() => {
        posted.push({ url, headers, body })
        return { status: 204 }
      })
    }))
    const relay = createRelay(Relay.layerMemory({ webhookTransport: transport }))
    try {
      const client = await relay.administration.createClient("Acme")
      const admin = await relay.administration.createApiUser({ clientId: client.id, permissions: Permission.permissionNames })
      const viewer = await relay.administration.createApiUser({ clientId: client.id, permissions: ["View custody account"] })
      const me = await relay.authenticate(admin.keyId, admin.secret)
      const onlyViews = await relay.authenticate(viewer.keyId, viewer.secret)

      const subscribed = await relay.webhooks.subscribe(me, { url: "https://hooks.example.com/relay", eventTypes: ["account.created"] }, { idempotencyKey: "hook-1" })
      assert.match(subscribed.secret, /^whsec_/)
      // A retry under the same key is the same subscription, with the secret its client was shown.
      assert.deepStrictEqual(await relay.webhooks.subscribe(me, { url: "https://hooks.example.com/relay", eventTypes: ["account.created"] }, { idempotencyKey: "hook-1" }), subscribed)
      assert.strictEqual((await relay.webhooks.list(me)).length, 1)
      assert.notProperty(await relay.webhooks.get(me, subscribed.id), "secret")

      const account = await relay.accounts.create(me, { name: "Treasury", workspace: "custody", assetId: "BTC" })
      assert.isAtLeast(await relay.outbox.runDue(), 1)
      assert.strictEqual(posted.length, 1)
      const delivered = posted[0]!
      assert.strictEqual(delivered.url, "https://hooks.example.com/relay")
      const payload = new StandardWebhook(subscribed.secret).verify(delivered.body, delivered.headers) as { type: string; data: { entityId: string } }
      assert.strictEqual(payload.type, "account.created")
      const log = await relay.webhooks.deliveries(me, subscribed.id)
      assert.deepStrictEqual(log.map((d) => [d.state, d.lastStatus]), [["delivered", 204]])
      assert.notProperty(log[0]!, "payload")

      const event = (await relay.auditTrail(me, { types: ["account.created"], entityId: account.id })).items[0]!
      assert.deepStrictEqual(await relay.webhooks.redeliver(me, subscribed.id, { eventId: event.id }), { redelivered: 1 })
      // Options over the defaults, as `start` takes them; a number that would break the worker rejects, naming it.
      const refused = await relay.outbox.runDue({ concurrency: 0 }).catch((e: unknown) => e)
      assert.instanceOf(refused, RangeError)
      assert.match(String(refused), /outbox\.concurrency must be a whole number at least 1, got 0/)
      assert.strictEqual(posted.length, 1)
      assert.strictEqual(await relay.outbox.runDue({ batch: 1 }), 1)
      assert.strictEqual(posted.length, 2)
      assert.strictEqual(posted[1]!.headers["webhook-id"], delivered.headers["webhook-id"])

      const rotated = await relay.webhooks.rotateSecret(me, subscribed.id)
      assert.notStrictEqual(rotated.secret, subscribed.secret)
      // @ts-expect-error: "false" is not a boolean (a JavaScript caller's, truthy) and is refused rather than kept
      assert.instanceOf(await relay.webhooks.setEnabled(me, subscribed.id, "false").catch((e: unknown) => e), RelayError.InvalidRequest)
      assert.isTrue((await relay.webhooks.get(me, subscribed.id)).enabled)
      assert.isFalse((await relay.webhooks.setEnabled(me, subscribed.id, false)).enabled)
      assert.instanceOf(await relay.webhooks.redeliver(me, subscribed.id, { eventId: event.id }).catch((e: unknown) => e), RelayError.TransitionNotAllowed)
      // The operator's view of the client: never a secret; and it turns the subscription back on.
      const operatorView = await relay.administration.listWebhooks(client.id)
      assert.deepStrictEqual(operatorView.map((s) => s.id), [subscribed.id])
      assert.notProperty(operatorView[0]!, "secret")
      assert.isTrue((await relay.administration.setWebhookEnabled(subscribed.id, true)).enabled)

      // Refusals: the permission, bad input decoded as the HTTP adapter decodes it, another limit than 1 to 100.
      assert.instanceOf(await relay.webhooks.list(onlyViews).catch((e: unknown) => e), RelayError.PermissionDenied)
      for (const input of [{ url: "http://127.0.0.1:9/hook" }, { url: "not a url" }, { url: "https://hooks.example.com/", eventTypes: ["no.such_type"] }, null]) {
        assert.instanceOf(await relay.webhooks.subscribe(me, input as { url: string }).catch((e: unknown) => e), RelayError.InvalidRequest)
      }
      assert.instanceOf(await relay.webhooks.redeliver(me, subscribed.id, { since: "yesterday" }).catch((e: unknown) => e), RelayError.InvalidRequest)
      assert.instanceOf(await relay.webhooks.deliveries(me, subscribed.id, 0).catch((e: unknown) => e), RelayError.InvalidRequest)
      assert.instanceOf(await relay.webhooks.get(me, "0b8e1f5e-0000-7000-8000-000000000000").catch((e: unknown) => e), RelayError.NotFound)
      assert.strictEqual((await relay.webhooks.list(me)).length, 1)
    } finally {
      await relay.dispose()
    }
  })
})
