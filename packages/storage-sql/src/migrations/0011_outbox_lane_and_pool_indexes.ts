/**
 * Migration 11: a webhook subscription's deliveries held behind a failed one, the pending outbox entries indexed by
 * lane, and the provider's pending entries by due time.
 *
 * - `webhook_subscriptions.deliveries_held` (0 or 1): a delivery failed and waits for its retry; the subscription's
 *   other deliveries, new ones included, are held until one is delivered (core `Webhooks.holdDeliveries`).
 * - `outbox_entries_lane_pending (lane, next_attempt_at)`: a lane's entries held and resumed (`OutboxStore.holdLane`,
 *   `resumeLane`) found by lane rather than by walking every due entry.
 * - `outbox_entries_due_provider (next_attempt_at, id)`: the provider's pool leases its entries without walking the
 *   webhook deliveries due before them, however many a busy client's subscriptions have queued.
 *
 * Both partial, on pending entries only, as `outbox_entries_due` is: done entries cost them nothing.
 */
import { type Kysely, sql, type SqlBool } from "kysely"
import type { EngineName } from "../SqlEngine.js"
import { columnTypesFor } from "./ColumnTypes.js"

export const up = async (db: Kysely<unknown>, engine: EngineName): Promise<void> => {
  await db.schema.alterTable("webhook_subscriptions")
    .addColumn("deliveries_held", columnTypesFor(engine).integer, (c) => c.notNull().defaultTo(0)).execute()
  await db.schema.createIndex("outbox_entries_lane_pending").on("outbox_entries").columns(["lane", "next_attempt_at"])
    .where(sql.raw<SqlBool>("state = 'pending'")).execute()
  await db.schema.createIndex("outbox_entries_due_provider").on("outbox_entries").columns(["next_attempt_at", "id"])
    .where(sql.raw<SqlBool>("state = 'pending' and kind <> 'deliverWebhook'")).execute()
}
