import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Option, Redacted } from "effect"
import { Accounts, Administration, ApiUser, Authentication, Principal, Storage } from "@custody-relay/core"
import { failureOf, failureTag } from "./Failure.js"
import { layer, newClient, newPrincipal } from "./TestWorld.js"

describe("Authentication and administration", () => {
  it.effect("a call authenticates in a lookup of its own and runs its program outside any unit", () =>
    Effect.gen(function*() {
      const { issued } = yield* newPrincipal(yield* newClient)
      const unitMode = Effect.withFiber((fiber) => Effect.succeed(fiber.getRef(Storage.CurrentUnit)?.mode))
      const secret = Redacted.value(issued.secret)
      assert.strictEqual(yield* Authentication.authenticated(issued.keyId, secret, () => unitMode), undefined)
      assert.strictEqual(failureTag(yield* Effect.exit(Authentication.authenticated(issued.keyId, "crs_x", () => unitMode))), "Unauthenticated")
    }).pipe(Effect.provide(layer())))

  it.effect("a unit joins an open one that guarantees at least as much, and asking for more is a defect", () =>
    Effect.gen(function*() {
      const modeInside = (outer: Storage.UnitMode, inner: Storage.UnitMode) =>
        Effect.exit(Storage.run(outer, () => Storage.run(inner, () => Effect.withFiber((fiber) => Effect.succeed(fiber.getRef(Storage.CurrentUnit)?.mode)))))
      for (const [outer, inner] of [["write", "read"], ["write", "lookup"], ["read", "lookup"], ["read", "read"]] as const) {
        const exit = yield* modeInside(outer, inner)
        assert.deepStrictEqual(exit._tag === "Success" ? exit.value : exit._tag, outer)
      }
      for (const [outer, inner] of [["read", "write"], ["lookup", "read"], ["lookup", "write"]] as const) {
        const exit = yield* modeInside(outer, inner)
        assert.isTrue(exit._tag === "Failure", `${inner} inside ${outer}`)
      }
      const write = yield* Effect.exit(Storage.run("lookup", (unit) => unit.insertClient({ id: "x", name: "x", createdAt: "2026-01-01T00:00:00.000Z" } as never)))
      assert.isTrue(write._tag === "Failure", "a lookup refuses a write")
    }).pipe(Effect.provide(layer())))

  it.effect("AUTH-KEY-1 AUTH-SEC-1: key ids carry the prefix; only a hash of the secret is stored", () =>
    Effect.gen(function*() {
      const { issued, principal } = yield* newPrincipal(yield* newClient)
      assert.match(issued.keyId, /^crk_[0-9a-f]{32}$/)
      const secret = Redacted.value(issued.secret)
      assert.match(secret, /^crs_[A-Za-z0-9_-]{43}$/)
      assert.notInclude(String(issued.secret), secret)
      assert.notInclude(JSON.stringify(issued), secret)
      assert.strictEqual(principal.keyId, issued.keyId)
      assert.isTrue(ApiUser.secretMatches(secret, ApiUser.hashSecret(secret)))
      assert.isFalse(ApiUser.secretMatches(secret, ApiUser.hashSecret(secret + "x")))
      assert.isFalse(ApiUser.secretMatches(secret, "short"))
    }).pipe(Effect.provide(layer())))

  it.effect("AUTH-SEC-1: a secret is hashed with the runtime's SecretDigest when created, rotated and checked", () => {
    // Another function than the default, so a place that hashed with the default instead would be seen.
    const peppered = (secret: string) => ApiUser.hashSecret(`other:${secret}`)
    return Effect.gen(function*() {
      const { issued } = yield* newPrincipal(yield* newClient)
      const storedHash = Effect.map(
        Storage.run("lookup", (unit) => unit.findApiUserByKeyId(issued.keyId)),
        (found) => Option.getOrThrow(found).secretHash
      )
      assert.strictEqual(yield* storedHash, peppered(Redacted.value(issued.secret)))
      const underDefault = Effect.provideService(
        Authentication.authenticate(issued.keyId, Redacted.value(issued.secret)),
        ApiUser.SecretDigest,
        ApiUser.hashSecret
      )
      assert.strictEqual(failureOf(yield* Effect.exit(underDefault))?.reason, "wrong_secret")
      const rotated = yield* Administration.rotateSecret(issued.apiUserId)
      assert.strictEqual(yield* storedHash, peppered(Redacted.value(rotated.secret)))
      const principal = yield* Authentication.authenticate(issued.keyId, Redacted.value(rotated.secret))
      assert.strictEqual(principal.keyId, issued.keyId)
    }).pipe(Effect.provide(Layer.merge(layer(), Layer.succeed(ApiUser.SecretDigest, peppered))))
  })

  it.effect("AUTH-401-1: missing, malformed, unknown, wrong and revoked credentials are all Unauthenticated", () =>
    Effect.gen(function*() {
      const { issued } = yield* newPrincipal(yield* newClient)
      const secret = Redacted.value(issued.secret)
      const otherSecret = `crs_${"A".repeat(43)}`
      const unknownKey = `crk_${"0".repeat(32)}`
      const reasons: Array<string> = []
      for (const [key, s] of [
        [undefined, secret], [issued.keyId, undefined], ["", ""], ["key", secret], [issued.keyId, "nope"],
        [unknownKey, secret], [issued.keyId, otherSecret]
      ] as const) {
        const error = failureOf(yield* Effect.exit(Authentication.authenticate(key, s)))
        assert.strictEqual(error?._tag, "Unauthenticated")
        reasons.push(error?.reason ?? "")
        assert.strictEqual(error?.message, "Missing, invalid or revoked API credentials")
      }
      assert.deepStrictEqual(reasons, ["missing", "missing", "missing", "malformed", "malformed", "unknown_key", "wrong_secret"])
      yield* Administration.revokeApiUser(issued.apiUserId)
      yield* Administration.revokeApiUser(issued.apiUserId)
      const revoked = failureOf(yield* Effect.exit(Authentication.authenticate(issued.keyId, secret)))
      assert.strictEqual(revoked?.reason, "revoked")
    }).pipe(Effect.provide(layer())))

  it.effect("AUTH-PERM-1 AUTH-PERM-2: a permission change applies to the very next request", () =>
    Effect.gen(function*() {
      const { issued, principal } = yield* newPrincipal(yield* newClient, ["View custody account"])
      yield* Accounts.list(principal, {}, { page: 1, limit: 20 })
      const denied = failureOf(yield* Effect.exit(Accounts.create(principal, { name: "abc", workspace: "custody", assetId: "BTC" })))
      assert.strictEqual(denied?._tag, "PermissionDenied")
      assert.strictEqual(denied?.message, "Missing required API scope: Initiate new custody account")
      yield* Administration.setPermissions(issued.apiUserId, ["Initiate new custody account"])
      const fresh = yield* Authentication.authenticate(issued.keyId, Redacted.value(issued.secret))
      yield* Accounts.create(fresh, { name: "abc", workspace: "custody", assetId: "BTC" })
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.list(fresh, {}, { page: 1, limit: 20 }))), "PermissionDenied")
    }).pipe(Effect.provide(layer())))

  it.effect("AUTH-SCOPE-1: a credential that is not client-scoped is refused after its permission check", () =>
    Effect.gen(function*() {
      const { principal } = yield* newPrincipal(null, ["View custody account"])
      assert.strictEqual(principal.clientId, null)
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.list(principal, {}, { page: 1, limit: 20 }))), "CredentialNotClientScoped")
      assert.strictEqual(
        failureTag(yield* Effect.exit(Accounts.create(principal, { name: "abc", workspace: "custody", assetId: "BTC" }))),
        "PermissionDenied"
      )
    }).pipe(Effect.provide(layer())))

  it.effect("administration refuses unknown clients and API users", () =>
    Effect.gen(function*() {
      const missing = "00000000-0000-7000-8000-00000000beef"
      assert.strictEqual(failureTag(yield* Effect.exit(Administration.createApiUser({ clientId: missing, permissions: [] }))), "NotFound")
      assert.strictEqual(failureTag(yield* Effect.exit(Administration.createApiUser({ clientId: "bad", permissions: [] }))), "InvalidRequest")
      assert.strictEqual(failureTag(yield* Effect.exit(Administration.revokeApiUser(missing))), "NotFound")
      assert.strictEqual(failureTag(yield* Effect.exit(Administration.setPermissions(missing, []))), "NotFound")
      const named = yield* Administration.createClient("Acme")
      assert.strictEqual(named.name, "Acme")
    }).pipe(Effect.provide(layer())))
})

/**
 * AUTH-PERM-2 on a store that keeps API users between requests (Storage.KeptCredentials): a request runs on the kept
 * one, and its answer stands only once the store confirmed it, or the API user read afresh gives the same principal.
 * The memory store confirms nothing, so every request here that ends ends on that fresh read.
 */
describe("Authentication on a kept API user", () => {
  /** An API user with one permission, kept as it is now; `authenticated` on a store that keeps it. */
  const keptWorld = Effect.gen(function*() {
    const { issued } = yield* newPrincipal(yield* newClient, ["View custody account"])
    const secret = Redacted.value(issued.secret)
    const found = yield* Storage.run("lookup", (unit) => unit.findApiUserByKeyId(issued.keyId))
    const user = Option.getOrThrow(found)
    const kept: Storage.KeptApiUser = { user, stamp: "as kept" }
    let runs = 0
    const authenticated = <A, E, R>(program: (principal: Principal.Principal) => Effect.Effect<A, E, R>, key = secret) =>
      Effect.updateService(
        Authentication.authenticated(issued.keyId, key, (principal) => Effect.suspend(() => (runs++, program(principal)))),
        Storage.Storage,
        (storage) => ({ ...storage, keptCredentials: { get: (keyId: string) => keyId === issued.keyId ? kept : undefined } })
      )
    return { user, secret, authenticated, runs: () => runs }
  })

  it.effect("AUTH-PERM-2: an unchanged kept API user's answer stands, from one run", () =>
    Effect.gen(function*() {
      const { authenticated, runs } = yield* keptWorld
      const permissions = yield* authenticated((principal) => Effect.succeed(principal.permissions))
      assert.deepStrictEqual(permissions, ["View custody account"])
      assert.strictEqual(runs(), 1)
    }).pipe(Effect.provide(layer())))

  it.effect("AUTH-PERM-2: a permission granted since it was kept applies: the refusal on the kept one is run again on the new one", () =>
    Effect.gen(function*() {
      const { user, authenticated, runs } = yield* keptWorld
      yield* Administration.setPermissions(user.id, ["View custody account", "Initiate new custody account"])
      const caller = yield* authenticated((principal) => Principal.authorize(principal, "accounts.create"))
      assert.include(caller.permissions, "Initiate new custody account")
      assert.strictEqual(runs(), 2)
    }).pipe(Effect.provide(layer())))

  it.effect("AUTH-PERM-2 AUTH-401-1: a revocation since it was kept applies; a wrong secret is refused by the database's row", () =>
    Effect.gen(function*() {
      const { user, authenticated } = yield* keptWorld
      assert.strictEqual(failureTag(yield* Effect.exit(authenticated(() => Effect.void, `crs_${"A".repeat(43)}`))), "Unauthenticated")
      yield* Administration.revokeApiUser(user.id)
      assert.strictEqual(failureTag(yield* Effect.exit(authenticated(() => Effect.succeed("served")))), "Unauthenticated")
    }).pipe(Effect.provide(layer())))

  it.effect("AUTH-SEC-1: the kept API user's secret is checked with the runtime's SecretDigest too", () => {
    let digests = 0
    const counted = (secret: string) => (digests++, ApiUser.hashSecret(secret))
    return Effect.gen(function*() {
      const { authenticated, runs } = yield* keptWorld
      digests = 0
      assert.strictEqual(yield* authenticated(() => Effect.succeed("served")), "served")
      // One for the kept API user, one for the fresh read the memory store's unconfirmed answer is checked against.
      assert.strictEqual(digests, 2)
      assert.strictEqual(runs(), 1)
    }).pipe(Effect.provide(Layer.merge(layer(), Layer.succeed(ApiUser.SecretDigest, counted))))
  })

  it.effect("a unit that found the kept API user changed stopped the request: it is authenticated afresh and run again", () =>
    Effect.gen(function*() {
      const { authenticated, runs } = yield* keptWorld
      const changed = new Storage.StorageError({ reason: new Storage.CredentialChanged({ message: "changed" }) })
      const answer = yield* authenticated(() => runs() === 1 ? Effect.die(changed) : Effect.succeed("second run"))
      assert.strictEqual(answer, "second run")
      assert.strictEqual(runs(), 2)
    }).pipe(Effect.provide(layer())))

  it.effect("a request that ended because the database did not answer ends so, without a second read of the API user", () =>
    Effect.gen(function*() {
      const { authenticated, runs } = yield* keptWorld
      const lookups: Array<Storage.UnitMode> = []
      const unavailable = new Storage.StorageError({ reason: new Storage.StorageUnavailable({ message: "no answer", cause: null, timedOut: true }) })
      const exit = yield* Effect.exit(authenticated(() => Effect.die(unavailable)).pipe(
        Effect.updateService(Storage.Storage, (storage) => ({
          ...storage,
          transaction: (mode, work) => (lookups.push(mode), storage.transaction(mode, work))
        }))
      ))
      assert.isTrue(Exit.isFailure(exit) && Cause.squash(exit.cause) === unavailable, String(exit))
      assert.deepStrictEqual(lookups, [])
      assert.strictEqual(runs(), 1)
    }).pipe(Effect.provide(layer())))

  it.effect("once a unit confirmed the kept API user, the request stands on it as of then", () =>
    Effect.gen(function*() {
      const { user, authenticated, runs } = yield* keptWorld
      const confirmThenRevoke = Effect.withFiber((fiber) => {
        const pending = fiber.getRef(Storage.CurrentCredential)
        if (pending === undefined) return Effect.die(new Error("no pending credential"))
        pending.confirmed = true
        return Effect.as(Administration.revokeApiUser(user.id), "served")
      })
      assert.strictEqual(yield* authenticated(() => confirmThenRevoke), "served")
      assert.strictEqual(runs(), 1)
    }).pipe(Effect.provide(layer())))
})
