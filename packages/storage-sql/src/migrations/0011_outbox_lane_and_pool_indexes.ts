/**
 * Migration 11: the pending outbox entries indexed by lane, and the provider's pending entries by due time.
 *
 * - `outbox_entries_lane_pending (lane, next_attempt_at)`: a lane whose entry failed has its other due entries
 *   deferred to that entry's retry (`OutboxStore.deferLane`), found by lane rather than by walking every due entry.
 * - `outbox_entries_due_provider (next_attempt_at, id)`: the provider's pool leases its entries without walking the
 *   webhook deliveries due before them, however many a busy client's subscriptions have queued.
 *
 * Both partial, on pending entries only, as `outbox_entries_due` is: done entries cost them nothing.
 */
import { type Kysely, sql, type SqlBool } from "kysely"

export const up = async (db: Kysely<unknown>): Promise<void> => {
  await db.schema.createIndex("outbox_entries_lane_pending").on("outbox_entries").columns(["lane", "next_attempt_at"])
    .where(sql.raw<SqlBool>("state = 'pending'")).execute()
  await db.schema.createIndex("outbox_entries_due_provider").on("outbox_entries").columns(["next_attempt_at", "id"])
    .where(sql.raw<SqlBool>("state = 'pending' and kind <> 'deliverWebhook'")).execute()
}
