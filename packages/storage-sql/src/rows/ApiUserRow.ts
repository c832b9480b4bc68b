/** An API user as an `api_users` row and back; its permissions travel as a JSON array, decoded on the way in. */
import { type ApiUser, Permission, RateLimiter } from "@custody-relay/core"
import { Schema } from "effect"
import type { ApiUsersTable } from "../schema/Database.js"

const decodeStrictly = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Array(Schema.String)))
const known: ReadonlySet<unknown> = new Set(Permission.permissionNames)
const isKnown = (name: unknown): name is Permission.Permission => known.has(name)

/**
 * The stored permission list. Read on every authenticated request, so the common case is a plain JSON.parse and a
 * set lookup; anything that is not a list of names goes through the Schema decoder, which says what is wrong. A name
 * this release does not know grants nothing and is left out: a later release's permission, written by a newer node on
 * the same database during a rolling upgrade, must not make every request of its holder a failure on an older node.
 */
const decodePermissions = (text: string): ReadonlyArray<Permission.Permission> => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return decodeStrictly(text).filter(isKnown)
  }
  if (Array.isArray(parsed) && parsed.every(isKnown)) return parsed
  return decodeStrictly(text).filter(isKnown)
}

const decodeRateLimit = Schema.decodeUnknownSync(
  Schema.fromJsonString(RateLimiter.RateLimitPolicy)
)

export const encode = (user: ApiUser.ApiUser): ApiUsersTable => ({
  id: user.id,
  client_id: user.clientId,
  name: user.name,
  key_id: user.keyId,
  secret_hash: user.secretHash,
  permissions: JSON.stringify(user.permissions),
  revoked_at: user.revokedAt,
  rate_limit: user.rateLimit === undefined ? null : JSON.stringify(user.rateLimit),
  created_at: user.createdAt,
  updated_at: user.updatedAt
})

export const decode = (row: ApiUsersTable): ApiUser.ApiUser => ({
  id: row.id,
  clientId: row.client_id,
  name: row.name,
  keyId: row.key_id,
  secretHash: row.secret_hash,
  permissions: decodePermissions(row.permissions),
  revokedAt: row.revoked_at,
  ...(row.rate_limit === null ? {} : { rateLimit: decodeRateLimit(row.rate_limit) }),
  createdAt: row.created_at,
  updatedAt: row.updated_at
})
