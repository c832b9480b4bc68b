/**
 * API users and their credentials (AUTH-KEY-1, AUTH-SEC-1). A credential is a key id, which identifies and is safe
 * to log, and a secret, which authenticates and is returned once at creation. Only the SHA-256 of the secret is
 * stored (the secret has 256 bits of entropy, so a slow password hash would buy nothing) and it is compared in
 * constant time. Permissions are read on every request, so a change applies to the next one (AUTH-PERM-2).
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, randomBytes, utf8ToBytes } from "@noble/hashes/utils.js"
import { base64urlnopad } from "@scure/base"
import { Context, Effect, Redacted, Schema } from "effect"
import { ApiUserId, ClientId } from "./Ids.js"
import { Permission } from "./Permission.js"
import { RateLimitPolicy } from "./RateLimiter.js"
import { Timestamp } from "./Timestamp.js"

/** Every key id begins with this prefix, so a leaked key id is recognisable in logs and by secret scanners. */
export const KEY_ID_PREFIX = "crk_"
export const SECRET_PREFIX = "crs_"

const KEY_ID_PATTERN = /^crk_[0-9a-f]{32}$/
const SECRET_PATTERN = /^crs_[A-Za-z0-9_-]{43}$/

export const ApiUser = Schema.Struct({
  id: ApiUserId,
  /** Null for a credential that is not client-scoped: it is refused on every client operation (AUTH-SCOPE-1). */
  clientId: Schema.NullOr(ClientId),
  name: Schema.String,
  keyId: Schema.String,
  secretHash: Schema.String,
  permissions: Schema.Array(Permission),
  revokedAt: Schema.NullOr(Timestamp),
  /**
   * This credential's own request budget, when it has one: kept with the credential, so every node that
   * authenticates it applies the same budget (LIM-RATE-1). Absent: the deployment's policy.
   */
  rateLimit: Schema.optionalKey(RateLimitPolicy),
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type ApiUser = typeof ApiUser.Type

/** What creating an API user returns: the only time the secret is ever seen. */
export interface IssuedCredential {
  readonly apiUserId: ApiUserId
  readonly keyId: string
  readonly secret: Redacted.Redacted<string>
}

export const isWellFormedKeyId = (keyId: string): boolean => KEY_ID_PATTERN.test(keyId)
export const isWellFormedSecret = (secret: string): boolean => SECRET_PATTERN.test(secret)

/** The SHA-256 of a secret's UTF-8 bytes as lowercase hex, with @noble/hashes: what any runtime can run. */
export const hashSecret = (secret: string): string => bytesToHex(sha256(utf8ToBytes(secret)))

/**
 * How the relay hashes a secret, to store it and to check it: {@link hashSecret} unless an adapter supplies another
 * implementation of the same function. On node, `crypto.hash("sha256", secret)` takes a fifth of the time, a few
 * percent of an authenticated request's throughput (docs/benchmarks.md, sixth round); the core may not import it, so
 * the server provides it (`Relay.layer`'s `secretDigest`). A replacement must give exactly the same text: every node
 * and tool reads the hashes the others stored.
 */
export const SecretDigest = Context.Reference<(secret: string) => string>("@custody-relay/core/ApiUser/SecretDigest", {
  defaultValue: () => hashSecret
})

/** Compares the hash of `secret` with `storedHash` in time independent of where they differ. */
export const secretMatches = (secret: string, storedHash: string, digest: (secret: string) => string = hashSecret): boolean => {
  const candidate = digest(secret)
  if (candidate.length !== storedHash.length) return false
  let difference = 0
  for (let i = 0; i < candidate.length; i++) difference |= candidate.charCodeAt(i) ^ storedHash.charCodeAt(i)
  return difference === 0
}

export const generateCredential: Effect.Effect<{ readonly keyId: string; readonly secret: Redacted.Redacted<string> }> =
  Effect.sync(() => ({
    keyId: KEY_ID_PREFIX + bytesToHex(randomBytes(16)),
    secret: Redacted.make(SECRET_PREFIX + base64urlnopad.encode(randomBytes(32)))
  }))
