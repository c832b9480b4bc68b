/**
 * The idempotency store (core `Idempotency`) on SQL. A claim inserts the key's row in the command's own unit;
 * a second claim of a key whose claiming unit still runs meets that unit's uncommitted row and waits for it
 * (PostgreSQL's unique index, SQLite's write lock), then sees its committed result or, after a rollback,
 * inserts its own. The row's `result` is null only inside the claiming unit.
 */
import type { Idempotency } from "@custody-relay/core"
import { Effect, Option } from "effect"
import { sql, type SqlBool } from "kysely"
import type { IdempotencyKeysTable } from "../schema/Database.js"
import { expectOneRow, type StoreArguments } from "../SqlUnit.js"
import * as StorageFailure from "../StorageFailure.js"

const decode = (row: IdempotencyKeysTable): Idempotency.IdempotencyRecord => ({
  scope: row.scope,
  key: row.key,
  fingerprint: row.fingerprint,
  result: row.result ?? "",
  createdAt: row.created_at,
  expiresAt: row.expires_at
})

const keyed = (db: StoreArguments["db"], scope: string, key: string) =>
  db.selectFrom("idempotency_keys").selectAll().where("scope", "=", scope).where("key", "=", key)

/** Claims a key: inserted, or found (a committed result to replay), or found expired and claimed anew in place. */
const claimKey = Effect.fnUntraced(function*(
  { db, engine, mode, statements: { first, write } }: StoreArguments,
  claim: Idempotency.IdempotencyClaim
) {
  const inserted = yield* write(
    db.insertInto("idempotency_keys")
      .values({
        scope: claim.scope,
        key: claim.key,
        fingerprint: claim.fingerprint,
        result: null,
        created_at: claim.createdAt,
        expires_at: claim.expiresAt
      })
      .onConflict((oc) => oc.columns(["scope", "key"]).doNothing())
  )
  if (inserted === 1) return Option.none()
  const found = yield* first(keyed(db, claim.scope, claim.key).$if(mode === "write" && engine.locksRowsForWrite, (qb) => qb.forUpdate()))
  if (found === undefined) {
    // Deleted as expired between the two statements: lost a race, so the unit runs again.
    return yield* Effect.fail(StorageFailure.conflict(new Error(`idempotency key ${claim.scope}/${claim.key} vanished`)))
  }
  if (found.expires_at > claim.createdAt && found.result !== null) return Option.some(decode(found))
  // Expired: claimed anew, in place.
  yield* Effect.flatMap(
    write(
      db.updateTable("idempotency_keys")
        .set({ fingerprint: claim.fingerprint, result: null, created_at: claim.createdAt, expires_at: claim.expiresAt })
        .where("scope", "=", claim.scope).where("key", "=", claim.key)
    ),
    expectOneRow("idempotency_keys", `${claim.scope}/${claim.key}`)
  )
  return Option.none()
})

export const store = (parts: StoreArguments): Idempotency.IdempotencyStore => {
  const { db, statements: { first, write } } = parts
  return {
    claimIdempotencyKey(request) {
      return claimKey(parts, request)
    },
    findIdempotencyRecord(scope, key, now) {
      return Effect.map(
        first(keyed(db, scope, key).where("result", "is not", null).where(sql<SqlBool>`${sql.ref("expires_at")} > ${now}`)),
        (row) => (row === undefined ? Option.none() : Option.some(decode(row)))
      )
    },
    completeIdempotencyKey(scope, key, result) {
      return Effect.flatMap(
        write(db.updateTable("idempotency_keys").set({ result }).where("scope", "=", scope).where("key", "=", key)),
        expectOneRow("idempotency_keys", `${scope}/${key}`)
      )
    },
    deleteExpiredIdempotencyRecords(now) {
      return write(db.deleteFrom("idempotency_keys").where(sql<SqlBool>`${sql.ref("expires_at")} < ${now}`))
    }
  }
}
