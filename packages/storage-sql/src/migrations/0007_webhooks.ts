/**
 * Migration 7: webhook subscriptions and their deliveries (core Webhook). A delivery keeps the event's JSON body,
 * so every attempt sends the same bytes, and its state and last attempt for the delivery log.
 */
import { type Kysely, sql, type SqlBool } from "kysely"
import type { EngineName } from "../SqlEngine.js"
import { columnTypesFor } from "./ColumnTypes.js"
import { createTable } from "./createTable.js"

export const up = async (db: Kysely<unknown>, engine: EngineName): Promise<void> => {
  const t = columnTypesFor(engine)
  await createTable(db, engine, "webhook_subscriptions")
    .addColumn("id", t.key, (c) => c.primaryKey())
    .addColumn("client_id", t.key, (c) => c.notNull())
    .addColumn("url", t.text, (c) => c.notNull())
    .addColumn("event_types", t.text, (c) => c.notNull())
    .addColumn("enabled", t.integer, (c) => c.notNull())
    .addColumn("disabled_reason", t.text)
    .addColumn("secret", t.text, (c) => c.notNull())
    .addColumn("previous_secret", t.text)
    .addColumn("previous_secret_until", t.key)
    .addColumn("created_at", t.key, (c) => c.notNull())
    .addColumn("updated_at", t.key, (c) => c.notNull())
    .execute()
  await db.schema.createIndex("webhook_subscriptions_client").on("webhook_subscriptions").columns(["client_id", "id"]).execute()
  await createTable(db, engine, "webhook_deliveries")
    .addColumn("id", t.key, (c) => c.primaryKey())
    .addColumn("subscription_id", t.key, (c) => c.notNull())
    .addColumn("client_id", t.key, (c) => c.notNull())
    .addColumn("event_id", t.key, (c) => c.notNull())
    .addColumn("entity_id", t.key, (c) => c.notNull())
    .addColumn("event_at", t.key, (c) => c.notNull())
    .addColumn("payload", t.text, (c) => c.notNull())
    .addColumn("state", t.key, (c) => c.notNull())
    .addColumn("attempts", t.integer, (c) => c.notNull())
    .addColumn("last_status", t.integer)
    .addColumn("last_error", t.text)
    .addColumn("last_latency_millis", t.integer)
    .addColumn("created_at", t.key, (c) => c.notNull())
    .addColumn("updated_at", t.key, (c) => c.notNull())
    .execute()
  await db.schema.createIndex("webhook_deliveries_log").on("webhook_deliveries").columns(["subscription_id", "id"]).execute()
  // The order check looks for a pending delivery of the same record, only among pending ones.
  await db.schema.createIndex("webhook_deliveries_pending").on("webhook_deliveries")
    .columns(["subscription_id", "entity_id", "event_at"]).where(sql.raw<SqlBool>("state = 'pending'")).execute()
}
