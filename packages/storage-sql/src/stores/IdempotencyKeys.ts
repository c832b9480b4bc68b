/**
 * The idempotency store (core `Idempotency`) on SQL. The row's `result` is set once the command is done, in the
 * command's own unit, so a committed row always has one; how a claim holds the key meanwhile is the engine's:
 * - PostgreSQL: a claim inserts the key's row with no result. A second claim of a key whose claiming unit still runs
 *   meets that unit's uncommitted row and waits on its unique index, then sees its committed result or, after a
 *   rollback, inserts its own.
 * - SQLite: a write unit holds the database's write lock from its first statement, so no other unit can claim the
 *   key while it runs, and a claim only reads. The row is written once, with the result (an upsert, which also
 *   claims an expired key anew). A refusal then writes nothing, so a unit refused in a commit group leaves the group
 *   alone (CommitGroup) instead of rolling back every unit with it.
 */
import type { Idempotency, Storage } from "@custody-relay/core"
import { Effect, Option } from "effect"
import { sql, type SqlBool } from "kysely"
import type { IdempotencyKeysTable } from "../schema/Database.js"
import { expectOneRow, optional, refuseWrite, type StoreArguments } from "../SqlUnit.js"
import * as StorageFailure from "../StorageFailure.js"

const decode = (row: IdempotencyKeysTable): Idempotency.IdempotencyRecord => ({
  scope: row.scope,
  key: row.key,
  fingerprint: row.fingerprint,
  result: row.result ?? "",
  createdAt: row.created_at,
  expiresAt: row.expires_at
})

/** The key's row as `claim` writes it, with `result` (none while the claiming unit runs, on PostgreSQL). */
const rowOf = (claim: Idempotency.IdempotencyClaim, result: string | null): IdempotencyKeysTable => ({
  scope: claim.scope,
  key: claim.key,
  fingerprint: claim.fingerprint,
  result,
  created_at: claim.createdAt,
  expires_at: claim.expiresAt
})

/** An update or upsert of one key's row: it must change exactly that row. */
const oneKeyRow = (scope: string, key: string) => expectOneRow("idempotency_keys", `${scope}/${key}`)

/** A committed result that still holds the key at the claim's time. */
const holds = (row: IdempotencyKeysTable | undefined, claim: Idempotency.IdempotencyClaim): row is IdempotencyKeysTable =>
  row !== undefined && row.expires_at > claim.createdAt && row.result !== null

/** Where a unit keeps a claim it has not written (SQLite): by scope and key. */
const claimKeyOf = (scope: string, key: string): string => `${scope}\u0000${key}`

/** Claims a key by its row: inserted, or found (a committed result to replay), or found expired and claimed anew in place. */
const claimByRow = Effect.fnUntraced(function*(
  { compiled: { lookups, writes }, locking, statements: { first, write } }: StoreArguments,
  claim: Idempotency.IdempotencyClaim
) {
  const { key, scope } = claim
  const inserted = yield* write(writes.claimIdempotencyKey(rowOf(claim, null)))
  if (inserted === 1) return Option.none()
  const found = yield* first(lookups.idempotencyKey[locking]({ scope, key }))
  if (found === undefined) {
    // Deleted as expired between the two statements: lost a race, so the unit runs again.
    return yield* Effect.fail(StorageFailure.conflict(new Error(`idempotency key ${scope}/${key} vanished`)))
  }
  if (holds(found, claim)) return Option.some(decode(found))
  // Expired: claimed anew, in place.
  yield* Effect.flatMap(write(writes.updateIdempotencyKey(rowOf(claim, null))), oneKeyRow(scope, key))
  return Option.none()
})

/** Claims a key under the database's write lock: a committed result found, or the claim kept in the unit, unwritten. */
const claimUnderLock = (
  { compiled: { lookups }, mode, read, statements: { first } }: StoreArguments,
  claim: Idempotency.IdempotencyClaim
): Effect.Effect<Option.Option<Idempotency.IdempotencyRecord>, Storage.StorageError> =>
  mode !== "write" ? refuseWrite(mode) : Effect.map(first(lookups.idempotencyKey[0]({ scope: claim.scope, key: claim.key })), (found) => {
    if (holds(found, claim)) return Option.some(decode(found))
    read.idempotency_claims.set(claimKeyOf(claim.scope, claim.key), claim)
    return Option.none()
  })

export const store = (parts: StoreArguments): Idempotency.IdempotencyStore => {
  const { compiled: { lookups, writes }, db, engine, read, statements: { first, write } } = parts
  // Where the unit holds the whole database's write lock (SQLite), it holds every key too.
  const underLock = !engine.locksRowsForWrite
  return {
    claimIdempotencyKey(request) {
      return underLock ? claimUnderLock(parts, request) : claimByRow(parts, request)
    },
    findIdempotencyRecord(scope, key, now) {
      return Effect.map(first(lookups.idempotencyRecord({ scope, key, now })), optional(decode))
    },
    completeIdempotencyKey: (scope, key, result) =>
      Effect.suspend(() => {
        if (!underLock) return Effect.flatMap(write(writes.updateIdempotencyKey({ scope, key, result })), oneKeyRow(scope, key))
        const claim = read.idempotency_claims.get(claimKeyOf(scope, key))
        if (claim === undefined) return Effect.die(new Error(`idempotency key ${scope}/${key} completed without a claim in this unit`))
        return Effect.flatMap(write(writes.keepIdempotencyKey(rowOf(claim, result))), oneKeyRow(scope, key))
      }),
    deleteExpiredIdempotencyRecords(now, limit) {
      // A batch by the expiry index, the longest expired first (Retention), skipping keys a running unit holds
      // where the engine locks rows.
      const oldest = db.selectFrom("idempotency_keys").select(["scope", "key"])
        .where(sql<SqlBool>`${sql.ref("expires_at")} < ${now}`)
        .orderBy("expires_at")
        .limit(limit)
        .$if(!underLock, (qb) => qb.forUpdate().skipLocked())
      return write(db.deleteFrom("idempotency_keys").where(sql<SqlBool>`(${sql.ref("scope")}, ${sql.ref("key")}) in (${oldest})`))
    }
  }
}
