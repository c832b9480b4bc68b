import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { Accounts, Administration, ApiUser, Authentication, Storage } from "@custody-relay/core"
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
