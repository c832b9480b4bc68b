/**
 * Authentication of a request's key id and secret (AUTH-HDR-1, AUTH-401-1). Every failure is the same
 * `Unauthenticated` to the caller; the reason is kept for logs. Permissions are read fresh on every call, so an
 * admin's change applies to the next request (AUTH-PERM-2).
 */
import { Effect, Option } from "effect"
import * as ApiUser from "./ApiUser.js"
import type { Principal } from "./Principal.js"
import { Unauthenticated } from "./RelayError.js"
import * as Storage from "./Storage.js"

// Hashing a dummy secret when the key is unknown keeps that path as slow as a wrong secret.
const DUMMY_HASH = ApiUser.hashSecret("crs_unknown-key-timing-equaliser")

export const authenticate = Effect.fnUntraced(function*(
  keyId: string | undefined | null,
  secret: string | undefined | null
): Effect.fn.Return<Principal, Unauthenticated, Storage.Storage> {
  if (!keyId || !secret) return yield* new Unauthenticated({ reason: "missing" })
  if (!ApiUser.isWellFormedKeyId(keyId) || !ApiUser.isWellFormedSecret(secret)) {
    return yield* new Unauthenticated({ reason: "malformed" })
  }
  const found = yield* Storage.run("lookup", (unit) => unit.findApiUserByKeyId(keyId))
  if (Option.isNone(found)) {
    ApiUser.secretMatches(secret, DUMMY_HASH)
    return yield* new Unauthenticated({ reason: "unknown_key" })
  }
  const user = found.value
  if (!ApiUser.secretMatches(secret, user.secretHash)) return yield* new Unauthenticated({ reason: "wrong_secret" })
  if (user.revokedAt !== null) return yield* new Unauthenticated({ reason: "revoked" })
  return {
    apiUserId: user.id,
    clientId: user.clientId,
    name: user.name,
    keyId: user.keyId,
    permissions: user.permissions,
    ...(user.rateLimit === undefined ? {} : { rateLimit: user.rateLimit })
  }
})

/**
 * Runs `program` as the caller these credentials authenticate: the entry point of an adapter's request. The
 * credential is a lookup of its own (see Storage.UnitMode: no transaction, one statement), outside the program's
 * units, so an invalid credential never waits for a write lock and a read's own unit stays as small as its
 * operation makes it (a record by id: one more lookup).
 */
export const authenticated = <A, E, R>(
  keyId: string | undefined | null,
  secret: string | undefined | null,
  program: (principal: Principal) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | Unauthenticated, R | Storage.Storage> => Effect.flatMap(authenticate(keyId, secret), program)
