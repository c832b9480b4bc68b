/**
 * Migration 5: exactly-once commands, the domain event log and the outbox.
 * - `idempotency_keys` replaces `idempotency_records`: a key's row is written in the unit of work of the command
 *   it guards, with the command's own result, so the records of the old, HTTP-level design (a status and a body,
 *   kept in separate transactions) are dropped rather than carried over. Replays of keys used before the
 *   upgrade are lost; a retry of one runs as a first request.
 * - `domain_events`: one row per state change, in log order (`position`, the engine's own sequence).
 * - `outbox_entries`: effects outside the database, carried out after commit by the outbox worker.
 */
import { type Kysely, sql, type SqlBool } from "kysely"
import type { EngineName } from "../SqlEngine.js"
import { columnTypesFor } from "./ColumnTypes.js"
import { createTable } from "./createTable.js"

export const up = async (db: Kysely<unknown>, engine: EngineName): Promise<void> => {
  const t = columnTypesFor(engine)
  await db.schema.dropTable("idempotency_records").ifExists().execute()
  await createTable(db, engine, "idempotency_keys")
    .addColumn("scope", t.key, (c) => c.notNull())
    .addColumn("key", t.key, (c) => c.notNull())
    .addColumn("fingerprint", t.text, (c) => c.notNull())
    // Null while the claiming unit runs; the unit commits it with the result, or rolls the row back.
    .addColumn("result", t.text)
    .addColumn("created_at", t.key, (c) => c.notNull())
    .addColumn("expires_at", t.key, (c) => c.notNull())
    .addPrimaryKeyConstraint("idempotency_keys_pkey", ["scope", "key"])
    .execute()
  await db.schema.createIndex("idempotency_keys_expires_at").on("idempotency_keys").column("expires_at").execute()

  await createTable(db, engine, "domain_events")
    .addColumn(
      "position",
      engine === "postgres" ? sql`bigint` : sql`integer`,
      (c) => (engine === "postgres" ? c.primaryKey().generatedAlwaysAsIdentity() : c.primaryKey().autoIncrement())
    )
    .addColumn("id", t.key, (c) => c.notNull().unique())
    .addColumn("type", t.key, (c) => c.notNull())
    .addColumn("client_id", t.key)
    .addColumn("entity_type", t.key, (c) => c.notNull())
    .addColumn("entity_id", t.key, (c) => c.notNull())
    .addColumn("status_before", t.text)
    .addColumn("status_after", t.text)
    .addColumn("actor", t.text, (c) => c.notNull())
    .addColumn("at", t.key, (c) => c.notNull())
    .addColumn("data", t.text, (c) => c.notNull())
    .execute()
  await db.schema.createIndex("domain_events_entity").on("domain_events").columns(["entity_id", "position"]).execute()
  await db.schema.createIndex("domain_events_client").on("domain_events").columns(["client_id", "position"]).execute()

  await createTable(db, engine, "outbox_entries")
    .addColumn("id", t.key, (c) => c.primaryKey())
    .addColumn("kind", t.key, (c) => c.notNull())
    .addColumn("client_id", t.key, (c) => c.notNull())
    .addColumn("subject_id", t.key, (c) => c.notNull())
    .addColumn("state", t.key, (c) => c.notNull())
    .addColumn("attempts", t.integer, (c) => c.notNull())
    .addColumn("next_attempt_at", t.key, (c) => c.notNull())
    .addColumn("leased_until", t.key)
    .addColumn("last_error", t.text)
    .addColumn("created_at", t.key, (c) => c.notNull())
    .addColumn("updated_at", t.key, (c) => c.notNull())
    .execute()
  // Only pending entries are ever looked for by due time.
  await db.schema.createIndex("outbox_entries_due").on("outbox_entries").columns(["next_attempt_at", "id"])
    .where(sql.raw<SqlBool>("state = 'pending'")).execute()
  await db.schema.createIndex("outbox_entries_subject").on("outbox_entries").columns(["subject_id", "id"]).execute()
}
