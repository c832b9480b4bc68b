/**
 * The operator's administration of credentials: listing clients and API users (never a secret or its hash),
 * finding one by id or key id, and rotating a secret (AUTH-SEC-1: shown once; the old one refused from the next
 * request on, AUTH-401-1).
 */
import { assert, describe, it } from "@effect/vitest"
import { Administration, Authentication, type Ids, Storage } from "@custody-relay/core"
import { Effect, Exit, Redacted } from "effect"
import { layer, newClient } from "./TestWorld.js"

const refusal = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.exit(effect), (exit) => (Exit.isFailure(exit) ? String(JSON.stringify(exit.cause)) : "succeeded"))

describe("Administration", () => {
  it.effect("AUTH-SEC-1 AUTH-401-1: a rotated secret works at once and the old one is refused; the key id stays", () =>
    Effect.gen(function*() {
      const clientId = yield* newClient
      const issued = yield* Administration.createApiUser({ clientId, permissions: ["View custody account"] })
      const rotated = yield* Administration.rotateSecret(issued.apiUserId)
      assert.strictEqual(rotated.keyId, issued.keyId)
      assert.notStrictEqual(Redacted.value(rotated.secret), Redacted.value(issued.secret))
      const principal = yield* Authentication.authenticate(rotated.keyId, Redacted.value(rotated.secret))
      assert.strictEqual(principal.apiUserId, issued.apiUserId)
      assert.include(yield* refusal(Authentication.authenticate(issued.keyId, Redacted.value(issued.secret))), "Unauthenticated")
      const events = yield* Storage.run("read", (unit) => unit.listEvents({ entityId: issued.apiUserId }, 0, 10))
      assert.deepStrictEqual(events.map((event) => event.type), ["api_user.created", "api_user.secret_rotated"])
      assert.notInclude(JSON.stringify(events), Redacted.value(rotated.secret))
    }).pipe(Effect.provide(layer())))

  it.effect("a revoked API user gets no new secret, and nothing is written", () =>
    Effect.gen(function*() {
      const clientId = yield* newClient
      const issued = yield* Administration.createApiUser({ clientId, permissions: ["View custody account"] })
      yield* Administration.revokeApiUser(issued.apiUserId)
      assert.include(yield* refusal(Administration.rotateSecret(issued.apiUserId)), "revoked")
      const events = yield* Storage.run("read", (unit) => unit.listEvents({ entityId: issued.apiUserId }, 0, 10))
      assert.deepStrictEqual(events.map((event) => event.type), ["api_user.created", "api_user.revoked"])
    }).pipe(Effect.provide(layer())))

  it.effect("lists clients and API users (by client), and finds one by id or key id, never with its secret's hash", () =>
    Effect.gen(function*() {
      const clientId = yield* newClient
      const other = yield* newClient
      const a = yield* Administration.createApiUser({ clientId, permissions: ["View custody account"], name: "a" })
      const b = yield* Administration.createApiUser({ clientId: other, permissions: [], name: "b" })
      const clients = yield* Administration.listClients()
      assert.deepStrictEqual(clients.map((client) => client.id), [clientId, other])
      const mine = yield* Administration.listApiUsers(clientId)
      assert.deepStrictEqual(mine.map((user) => user.keyId), [a.keyId])
      assert.deepStrictEqual((yield* Administration.listApiUsers()).map((user) => user.name), ["a", "b"])
      assert.notProperty(mine[0], "secretHash")
      assert.strictEqual((yield* Administration.findApiUser(b.keyId)).id, b.apiUserId)
      assert.strictEqual((yield* Administration.findApiUser(b.apiUserId)).keyId, b.keyId)
      assert.include(yield* refusal(Administration.findApiUser("crk_00000000000000000000000000000000")), "NotFound")
      assert.include(yield* refusal(Administration.findApiUser("not-an-id")), "InvalidRequest")
      assert.include(yield* refusal(Administration.listApiUsers("not-an-id")), "InvalidRequest")
    }).pipe(Effect.provide(layer())))
  it.effect("AUTH-PERM-1: a permission that does not exist, a name a client should not be shown, or no description of the user at all is refused and nothing is written", () =>
    Effect.gen(function*() {
      const clientId = yield* newClient
      const issued = yield* Administration.createApiUser({ clientId, permissions: ["View custody account"] })
      const before = yield* Storage.run("read", (unit) => unit.listEvents({}, 0, 1000))
      // What an untyped caller (the Promise facade, a script) may pass; the types forbid each one.
      const misspelt = ["View custody account", "Approve custody account"] as never
      const attempts: ReadonlyArray<Effect.Effect<unknown, unknown, Storage.Storage | Ids.Ids>> = [
        Administration.createApiUser({ clientId, permissions: misspelt }),
        Administration.createApiUser({ clientId, permissions: "View custody account" as never }),
        Administration.setPermissions(issued.apiUserId, misspelt)
      ]
      for (const attempt of attempts) {
        const why = yield* refusal(attempt)
        assert.include(why, "InvalidRequest")
        assert.include(why, "permissions")
      }
      for (const name of ["x".repeat(101), "", "trusted\u202eknab", "bell\u0007", 5 as never]) {
        assert.include(yield* refusal(Administration.createApiUser({ clientId, permissions: [], name })), "InvalidRequest", JSON.stringify(name))
        assert.include(yield* refusal(Administration.createClient(name)), "InvalidRequest", JSON.stringify(name))
      }
      assert.include(yield* refusal(Administration.findApiUser(5 as never)), "InvalidRequest")
      // No description of the new user at all: a 400 naming what is missing, not a TypeError from reading its fields.
      for (const input of [undefined, null, "ops", []] as ReadonlyArray<unknown> as ReadonlyArray<never>) {
        const why = yield* refusal(Administration.createApiUser(input))
        assert.include(why, "InvalidRequest", JSON.stringify(input))
        assert.include(why, "clientId and permissions", JSON.stringify(input))
      }
      // Nothing was written: no user, no client, no event, and the user keeps what it was granted.
      assert.deepStrictEqual(yield* Storage.run("read", (unit) => unit.listEvents({}, 0, 1000)), before)
      assert.deepStrictEqual((yield* Administration.findApiUser(issued.apiUserId)).permissions, ["View custody account"])
      // Names within the rules, emoji and all, are kept as given.
      assert.strictEqual((yield* Administration.createClient("Acme 🪙 Treasury")).name, "Acme 🪙 Treasury")
    }).pipe(Effect.provide(layer())))
  it.effect("LIM-RATE-2: a request budget outside whole numbers from 1 (at most a day's window) is refused and nothing is written", () =>
    Effect.gen(function*() {
      const clientId = yield* newClient
      const before = yield* Storage.run("read", (unit) => unit.listEvents({}, 0, 1000))
      // What an untyped caller may pass. Kept, each would count differently in each store: memory keeps Infinity (no
      // budget at all), JSON turns it into null (every request refused), a zero window divides by zero.
      const budgets = [
        { limit: 0, windowSeconds: 60 },
        { limit: 1.5, windowSeconds: 60 },
        { limit: Infinity, windowSeconds: 60 },
        { limit: Number.NaN, windowSeconds: 60 },
        { limit: 1_000_000_001, windowSeconds: 60 },
        { limit: "100", windowSeconds: 60 },
        { limit: 100, windowSeconds: 0 },
        { limit: 100, windowSeconds: 86_401 },
        { limit: 100 },
        "100/minute",
        null
      ] as ReadonlyArray<unknown> as ReadonlyArray<never>
      for (const rateLimit of budgets) {
        const created = yield* refusal(Administration.createApiUser({ clientId, permissions: [], rateLimit }))
        assert.include(created, "InvalidRequest", JSON.stringify(rateLimit))
        assert.include(created, "rateLimit", JSON.stringify(rateLimit))
        assert.include(yield* refusal(Administration.setRateLimitForNewApiUsers(rateLimit)), "InvalidRequest", JSON.stringify(rateLimit))
      }
      assert.deepStrictEqual(yield* Storage.run("read", (unit) => unit.listEvents({}, 0, 1000)), before)
      assert.deepStrictEqual(yield* Administration.listApiUsers(clientId), [])
      // A budget within the rules is kept as its two numbers, whatever else the object carries.
      const given = { limit: 1_000_000_000, windowSeconds: 86_400, burst: 5 } as never
      const issued = yield* Administration.createApiUser({ clientId, permissions: [], rateLimit: given })
      assert.deepStrictEqual((yield* Administration.findApiUser(issued.apiUserId)).rateLimit, { limit: 1_000_000_000, windowSeconds: 86_400 })
      assert.deepStrictEqual(yield* Administration.setRateLimitForNewApiUsers({ limit: 1, windowSeconds: 1, burst: 5 } as never), { limit: 1, windowSeconds: 1 })
      const next = yield* Administration.createApiUser({ clientId, permissions: [] })
      assert.deepStrictEqual((yield* Administration.findApiUser(next.apiUserId)).rateLimit, { limit: 1, windowSeconds: 1 })
    }).pipe(Effect.provide(layer())))

  it.effect("LIM-RATE-2 AUTH-PERM-2: an API user's own budget is set, changed and taken away, each change one event and applied to its next request; the same budget again, or one out of bounds, writes nothing", () =>
    Effect.gen(function*() {
      const clientId = yield* newClient
      const issued = yield* Administration.createApiUser({ clientId, permissions: ["View custody account"] })
      const secret = Redacted.value(issued.secret)
      const budgetOnNextRequest = Effect.map(Authentication.authenticate(issued.keyId, secret), (principal) => principal.rateLimit)
      assert.isUndefined(yield* budgetOnNextRequest)

      yield* Administration.setRateLimit(issued.apiUserId, { limit: 5000, windowSeconds: 60 })
      assert.deepStrictEqual(yield* budgetOnNextRequest, { limit: 5000, windowSeconds: 60 })
      yield* Administration.setRateLimit(issued.apiUserId, { limit: 2, windowSeconds: 3600, burst: 9 } as never)
      assert.deepStrictEqual((yield* Administration.findApiUser(issued.keyId)).rateLimit, { limit: 2, windowSeconds: 3600 })
      assert.deepStrictEqual(yield* budgetOnNextRequest, { limit: 2, windowSeconds: 3600 })

      const written = yield* Storage.run("read", (unit) => unit.listEvents({}, 0, 1000))
      yield* Administration.setRateLimit(issued.apiUserId, { limit: 2, windowSeconds: 3600 })
      for (const rateLimit of [{ limit: 0, windowSeconds: 60 }, { limit: 10, windowSeconds: 86_401 }, { limit: Infinity, windowSeconds: 60 }, "2/hour", undefined]) {
        const why = yield* refusal(Administration.setRateLimit(issued.apiUserId, rateLimit as never))
        assert.include(why, "InvalidRequest", JSON.stringify(rateLimit))
        assert.include(why, "rateLimit", JSON.stringify(rateLimit))
      }
      assert.include(yield* refusal(Administration.setRateLimit("not-an-id", null)), "InvalidRequest")
      assert.include(yield* refusal(Administration.setRateLimit("01a2343b-bf11-7602-aeec-1bbee3d93a95", null)), "NotFound")
      assert.deepStrictEqual(yield* Storage.run("read", (unit) => unit.listEvents({}, 0, 1000)), written)
      assert.deepStrictEqual(yield* budgetOnNextRequest, { limit: 2, windowSeconds: 3600 })

      yield* Administration.setRateLimit(issued.apiUserId, null)
      assert.isUndefined((yield* Administration.findApiUser(issued.apiUserId)).rateLimit)
      assert.isUndefined(yield* budgetOnNextRequest)
      const events = yield* Storage.run("read", (unit) => unit.listEvents({ entityId: issued.apiUserId }, 0, 10))
      assert.deepStrictEqual(events.map((event) => [event.type, event.data, event.actor]), [
        ["api_user.created", { keyId: issued.keyId, name: `api-user-${issued.apiUserId.slice(-12)}`, permissions: ["View custody account"] }, { kind: "operator" }],
        ["api_user.rate_limit_changed", { before: null, after: { limit: 5000, windowSeconds: 60 } }, { kind: "operator" }],
        ["api_user.rate_limit_changed", { before: { limit: 5000, windowSeconds: 60 }, after: { limit: 2, windowSeconds: 3600 } }, { kind: "operator" }],
        ["api_user.rate_limit_changed", { before: { limit: 2, windowSeconds: 3600 }, after: null }, { kind: "operator" }]
      ])
    }).pipe(Effect.provide(layer())))
})
