/**
 * The statement the core's Retention deletes settled rows with (outbox entries, webhook deliveries): at most
 * `limit` rows whose `state` is not 'pending' and that were last updated before `settledBefore`, the oldest first.
 *
 * - The rows are chosen by a subquery on the table's partial index of settled rows (migration 12: the literal
 *   'pending' it is written with, the outbox's kinds deleted once settled, then `updated_at`), since neither engine's
 *   DELETE takes a LIMIT as kysely builds it. So a batch reads only the rows it deletes, however many pending ones, or
 *   entries kept for good, the table holds.
 * - Where the engine locks rows (PostgreSQL), the subquery skips rows another unit holds: two nodes keeping house at
 *   once each delete a batch of their own, and neither waits for the other or for a unit that read a row locked.
 */
import { Outbox } from "@custody-relay/core"
import { type Kysely, sql, type SqlBool } from "kysely"
import type { Database } from "./schema/Database.js"

export const deletingSettled = (
  db: Kysely<Database>,
  table: "outbox_entries" | "webhook_deliveries",
  settledBefore: string,
  limit: number,
  locks: boolean
) => {
  // One table at a time; the two share the columns named here, which kysely cannot see through a union of names.
  const rows = db as unknown as Kysely<Pick<Database, "outbox_entries">>
  const from = table as "outbox_entries"
  return rows.deleteFrom(from).where("id", "in", (eb) =>
    eb.selectFrom(from).select("id")
      .where("state", "<>", sql.lit("pending"))
      // As literals, the index's own predicate (migration 12), so SQLite sees that the index covers the query.
      .$if(table === "outbox_entries", (qb) => qb.where("kind", "in", Outbox.deletedOnceSettled.map((kind) => sql.lit(kind))))
      .where(sql<SqlBool>`${sql.ref("updated_at")} < ${settledBefore}`)
      .orderBy("updated_at")
      .limit(limit)
      .$if(locks, (qb) => qb.forUpdate().skipLocked()))
}
