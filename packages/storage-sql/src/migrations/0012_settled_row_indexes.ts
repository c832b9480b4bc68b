/**
 * Migration 12: outbox entries and webhook deliveries that are settled (not pending), indexed by when they were last
 * updated, so the core's Retention deletes the oldest in batches (SettledRows) reading only the rows it deletes.
 * Partial, the mirror of the pending ones' indexes (migrations 5, 7 and 11): a row moves from those to these when it
 * settles, and the due queries never see these. The outbox's index holds only the kinds deleted once settled (core
 * `Outbox.deletedOnceSettled`, as of this migration): the kinds kept for good would otherwise pile up at its oldest
 * end, read past by every batch.
 */
import { type Kysely, sql, type SqlBool } from "kysely"
import type { EngineName } from "../SqlEngine.js"

export const up = async (db: Kysely<unknown>, _engine: EngineName): Promise<void> => {
  await db.schema.createIndex("outbox_entries_settled").on("outbox_entries").column("updated_at")
    .where(sql.raw<SqlBool>("state <> 'pending' and kind in ('followTransfer', 'followWhitelistedAddress', 'deliverWebhook')")).execute()
  await db.schema.createIndex("webhook_deliveries_settled").on("webhook_deliveries").column("updated_at")
    .where(sql.raw<SqlBool>("state <> 'pending'")).execute()
}
