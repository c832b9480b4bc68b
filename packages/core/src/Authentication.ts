/**
 * Authentication of a request's key id and secret (AUTH-HDR-1, AUTH-401-1). Every failure is the same
 * `Unauthenticated` to the caller; the reason is kept for logs. The API user is read on every request, or kept by
 * a store that confirms it in the request's own round trip (Storage.KeptCredentials), so an admin's change applies
 * to the next request (AUTH-PERM-2).
 */
import { Context, Effect, Exit, Option } from "effect"
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
  const digest = yield* ApiUser.SecretDigest
  if (Option.isNone(found)) {
    ApiUser.secretMatches(secret, DUMMY_HASH, digest)
    return yield* new Unauthenticated({ reason: "unknown_key" })
  }
  const user = found.value
  if (!ApiUser.secretMatches(secret, user.secretHash, digest)) return yield* new Unauthenticated({ reason: "wrong_secret" })
  if (user.revokedAt !== null) return yield* new Unauthenticated({ reason: "revoked" })
  return principalOf(user)
})

const principalOf = (user: ApiUser.ApiUser): Principal => ({
  apiUserId: user.id,
  clientId: user.clientId,
  name: user.name,
  keyId: user.keyId,
  permissions: user.permissions,
  ...(user.rateLimit === undefined ? {} : { rateLimit: user.rateLimit })
})

/** Both built by `principalOf`, so the same API user gives the same text. */
const samePrincipal = (a: Principal, b: Principal): boolean => JSON.stringify(a) === JSON.stringify(b)

/**
 * Runs `program` as the caller these credentials authenticate: the entry point of an adapter's request. The
 * credential is a lookup of its own (see Storage.UnitMode: no transaction, one statement), outside the program's
 * units, so an invalid credential never waits for a write lock and a read's own unit stays as small as its
 * operation makes it (a record by id: one more lookup). On a store that kept the API user (see `onKept`), the
 * program runs on it at once and the store confirms it with the program's first statement instead.
 */
export const authenticated = <A, E, R>(
  keyId: string | undefined | null,
  secret: string | undefined | null,
  program: (principal: Principal) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | Unauthenticated, R | Storage.Storage> => {
  const afresh = Effect.flatMap(authenticate(keyId, secret), program)
  if (!keyId || !secret) return afresh
  return Effect.withFiber((fiber) => {
    const kept = Context.getUnsafe(fiber.context, Storage.Storage).keptCredentials?.get(keyId)
    // Only a kept API user that would authenticate is run on; any other answer is the database's to give.
    if (kept === undefined || kept.user.revokedAt !== null) return afresh
    if (!ApiUser.secretMatches(secret, kept.user.secretHash, fiber.getRef(ApiUser.SecretDigest))) return afresh
    return onKept(keyId, secret, kept, program, afresh)
  })
}

/**
 * Runs `program` on a kept API user while the store confirms it (see Storage.KeptCredentials). A unit that finds the
 * row changed stops before committing: nothing of the request happened, so it is authenticated afresh and run again.
 * A program that ended before any unit confirmed it (a refusal before storage, say) ran no statement, so its answer
 * stands only if the API user read now gives the same principal; otherwise the program runs again on that one.
 * Either way it is one request: the limiter is no unit of work, so an adapter that counts it against its key's rate
 * limit keeps its count for the second run (the HTTP handler does: RateLimitPolicies.countAgain). A program
 * that ended because the database did not answer (its unit, or its rate-limit count) ends so: its answer says nothing
 * of the caller's permissions, and a read of the API user would wait for the same database again (against one that
 * stopped answering, another whole bound before the 503).
 */
const onKept = <A, E, R>(
  keyId: string,
  secret: string,
  kept: Storage.KeptApiUser,
  program: (principal: Principal) => Effect.Effect<A, E, R>,
  afresh: Effect.Effect<A, E | Unauthenticated, R | Storage.Storage>
): Effect.Effect<A, E | Unauthenticated, R | Storage.Storage> => {
  const principal = principalOf(kept.user)
  const pending: Storage.PendingCredential = { keyId, stamp: kept.stamp, confirmed: false }
  return Effect.flatMap(Effect.exit(Effect.provideService(program(principal), Storage.CurrentCredential, pending)), (exit) => {
    if (pending.confirmed) return exit
    const storageError = Exit.isFailure(exit) ? Storage.errorIn(exit.cause) : undefined
    if (storageError?.reason._tag === "CredentialChanged") return afresh
    if (storageError?.isUnavailable === true) return exit
    return Effect.flatMap(authenticate(keyId, secret), (current) => samePrincipal(current, principal) ? exit : program(current))
  })
}
