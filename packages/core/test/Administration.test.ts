/**
 * The operator's administration of credentials: listing clients and API users (never a secret or its hash),
 * finding one by id or key id, and rotating a secret (AUTH-SEC-1: shown once; the old one refused from the next
 * request on, AUTH-401-1).
 */
import { assert, describe, it } from "@effect/vitest"
import { Administration, Authentication, Storage } from "@custody-relay/core"
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
})
