/**
 * Migration 12: outbox entries and webhook deliveries that are settled (not pending), indexed by when they were last
 * updated, so the core's Retention deletes the oldest in batches (SettledRows) reading only the rows it deletes.
 * Partial, the mirror of the pending ones' indexes (migrations 5, 7 and 11): a row moves from those to these when it
 * settles, and the due queries never see these.
 */
import { type Kysely, sql, type SqlBool } from "kysely"
import type { EngineName } from "../SqlEngine.js"

export const up = async (db: Kysely<unknown>, _engine: EngineName): Promise<void> => {
  for (const table of ["outbox_entries", "webhook_deliveries"]) {
    await db.schema.createIndex(`${table}_settled`).on(table).column("updated_at")
      .where(sql.raw<SqlBool>("state <> 'pending'")).execute()
  }
}
