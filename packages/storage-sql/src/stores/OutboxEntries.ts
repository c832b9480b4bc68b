/**
 * The outbox (core `Outbox`) on SQL. Leasing reads due entries with FOR UPDATE SKIP LOCKED on PostgreSQL, so two
 * nodes leasing at once take different entries instead of waiting for each other; on SQLite the write lock
 * already makes leasing one unit at a time.
 */
import { Outbox } from "@custody-relay/core"
import { Effect, Option } from "effect"
import { type Kysely, sql, type SqlBool } from "kysely"
import type { Database, OutboxEntriesTable } from "../schema/Database.js"
import { deletingSettled } from "../SettledRows.js"
import { keepingRead, type StoreArguments, updating } from "../SqlUnit.js"

const encode = (entry: Outbox.OutboxEntry): OutboxEntriesTable => ({
  id: entry.id,
  kind: entry.kind,
  client_id: entry.clientId,
  subject_id: entry.subjectId,
  lane: entry.lane,
  state: entry.state,
  attempts: entry.attempts,
  next_attempt_at: entry.nextAttemptAt,
  leased_until: entry.leasedUntil,
  last_error: entry.lastError,
  created_at: entry.createdAt,
  updated_at: entry.updatedAt
})

const decode = (row: OutboxEntriesTable): Outbox.OutboxEntry => ({
  id: row.id,
  kind: row.kind as Outbox.EffectKind,
  clientId: row.client_id as Outbox.OutboxEntry["clientId"],
  subjectId: row.subject_id,
  lane: row.lane,
  state: row.state as Outbox.EntryState,
  attempts: Number(row.attempts),
  nextAttemptAt: row.next_attempt_at as Outbox.OutboxEntry["nextAttemptAt"],
  leasedUntil: row.leased_until as Outbox.OutboxEntry["leasedUntil"],
  lastError: row.last_error,
  createdAt: row.created_at as Outbox.OutboxEntry["createdAt"],
  updatedAt: row.updated_at as Outbox.OutboxEntry["updatedAt"]
})

/**
 * An update of pending entries to be due at `at` (held, resumed): the literal 'pending' the partial indexes of
 * migrations 5 and 11 are written with, so the engine finds the rows by them.
 */
export const retimingPending = (db: Kysely<Database>, at: string, now: string) =>
  db.updateTable("outbox_entries").set({ next_attempt_at: at, updated_at: now }).where("state", "=", sql.lit("pending"))

export const store = (
  { db, engine, mode, statements: { first, rows, write, writeLater }, compiled: { writes }, read, locking }: StoreArguments
): Outbox.OutboxStore => {
  const locks = locking === 1
  const entryRead = keepingRead(mode, read.outbox_entries, decode)
  // An entry this unit read (by id or leasing) is locked where the engine locks rows, so its update is sure to match
  // and goes with the COMMIT (SqlSession.queue), not a round trip before it.
  const update = updating(writeLater, locking)
  return {
    insertOutboxEntry(entry) {
      return writeLater(writes.insertOutboxEntry(encode(entry)), 1, `outbox_entries ${entry.id}`, true)
    },
    getOutboxEntry(id) {
      return Effect.map(first(db.selectFrom("outbox_entries").selectAll().where("id", "=", id).$if(locks, (qb) => qb.forUpdate())), entryRead)
    },
    updateOutboxEntry(entry) {
      return update(read.outbox_entries, encode(entry), writes.updateOutboxEntry, "outbox_entries")
    },
    dueOutboxEntries(now, limit, busyLanes = [], { pool, skipClients = [] } = {}) {
      return Effect.map(
        rows(
          db.selectFrom("outbox_entries").selectAll()
            // A literal, so SQLite sees the partial index's predicate.
            .where("state", "=", sql.lit("pending"))
            .where(sql<SqlBool>`${sql.ref("next_attempt_at")} <= ${now}`)
            .where((eb) => eb.or([eb("leased_until", "is", null), eb(sql.ref("leased_until"), "<=", now)]))
            .$if(busyLanes.length > 0, (qb) => qb.where((eb) => eb.or([eb("lane", "is", null), eb("lane", "not in", [...busyLanes])])))
            // The kinds this release carries out, of the pool (Outbox.kindsOf), as literals: a newer release's kind waits
            // for a node that knows it.
            .where("kind", "in", Outbox.kindsOf(pool).map((kind) => sql.lit(kind)))
            // The provider's pool says what its partial index (migration 11) covers, so the engine leases from it and
            // walks no webhook delivery due before its entries.
            .$if(pool === "provider", (qb) => qb.where("kind", "<>", sql.lit("deliverWebhook")))
            .$if(skipClients.length > 0, (qb) => qb.where("client_id", "not in", [...skipClients]))
            .orderBy("next_attempt_at").orderBy("id")
            .limit(engine.opaque.integer(limit))
            .$if(locks, (qb) => qb.forUpdate().skipLocked())
        ),
        (found) => found.flatMap((row) => Option.toArray(entryRead(row)))
      )
    },
    // Both find their rows by the lane's partial index (migration 11: literal 'pending', the lane, then the due time),
    // whatever else is due.
    holdLane(lane, except, now) {
      return write(
        retimingPending(db, Outbox.HELD, now)
          .where("lane", "=", engine.opaque.text(lane))
          .where(sql<SqlBool>`${sql.ref("next_attempt_at")} < ${Outbox.HELD}`)
          .where("id", "<>", engine.opaque.text(except))
          .where((eb) => eb.or([eb("leased_until", "is", null), eb(sql.ref("leased_until"), "<=", now)]))
      )
    },
    resumeLane(lane, now) {
      return write(
        retimingPending(db, now, now)
          .where("lane", "=", engine.opaque.text(lane))
          .where(sql<SqlBool>`${sql.ref("next_attempt_at")} = ${Outbox.HELD}`)
      )
    },
    deleteSettledOutboxEntries(settledBefore, limit) {
      return write(deletingSettled(db, "outbox_entries", settledBefore, limit, locks))
    },
    listOutboxEntries(subjectId) {
      return Effect.map(
        rows(db.selectFrom("outbox_entries").selectAll().where("subject_id", "=", engine.opaque.text(subjectId)).orderBy("id")),
        (found) => found.map(decode)
      )
    }
  }
}
