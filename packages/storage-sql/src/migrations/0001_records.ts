/**
 * Migration 1: the domain's records. One table per record, primary keys, the references between them, and the
 * unique indexes that back the core's duplicate rules (`UniqueConstraint.uniqueIndexes`). The lists' indexes come
 * in migration 2.
 */
import { type Kysely, sql, type SqlBool } from "kysely"
import { uniqueIndexes } from "../schema/UniqueConstraint.js"
import type { EngineName } from "../SqlEngine.js"
import { columnTypesFor } from "./ColumnTypes.js"
import { createTable } from "./createTable.js"

export const up = async (db: Kysely<unknown>, engine: EngineName): Promise<void> => {
  const t = columnTypesFor(engine)

  await createTable(db, engine, "clients")
    .addColumn("id", t.key, (c) => c.primaryKey())
    .addColumn("name", t.text, (c) => c.notNull())
    .addColumn("created_at", t.key, (c) => c.notNull())
    .execute()

  await createTable(db, engine, "api_users")
    .addColumn("id", t.key, (c) => c.primaryKey())
    .addColumn("client_id", t.key, (c) => c.references("clients.id"))
    .addColumn("name", t.text, (c) => c.notNull())
    .addColumn("key_id", t.text, (c) => c.notNull())
    .addColumn("secret_hash", t.text, (c) => c.notNull())
    .addColumn("permissions", t.text, (c) => c.notNull())
    .addColumn("revoked_at", t.key)
    .addColumn("created_at", t.key, (c) => c.notNull())
    .addColumn("updated_at", t.key, (c) => c.notNull())
    .execute()

  await createTable(db, engine, "accounts")
    .addColumn("id", t.key, (c) => c.primaryKey())
    .addColumn("client_id", t.key, (c) => c.notNull().references("clients.id"))
    .addColumn("name", t.text, (c) => c.notNull())
    .addColumn("description", t.text, (c) => c.notNull())
    .addColumn("workspace", t.text, (c) => c.notNull())
    .addColumn("role", t.text, (c) => c.notNull())
    .addColumn("asset_id", t.text, (c) => c.notNull())
    .addColumn("chain_type", t.text, (c) => c.notNull())
    .addColumn("address", t.text)
    .addColumn("status", t.text, (c) => c.notNull())
    .addColumn("available_balance", t.money, (c) => c.notNull())
    .addColumn("required_approvals", t.integer, (c) => c.notNull())
    .addColumn("created_at", t.key, (c) => c.notNull())
    .addColumn("updated_at", t.key, (c) => c.notNull())
    .execute()

  await createTable(db, engine, "whitelisted_addresses")
    .addColumn("id", t.key, (c) => c.primaryKey())
    .addColumn("client_id", t.key, (c) => c.notNull().references("clients.id"))
    .addColumn("provider_id", t.text, (c) => c.notNull())
    .addColumn("name", t.text, (c) => c.notNull())
    .addColumn("address", t.text, (c) => c.notNull())
    .addColumn("description", t.text, (c) => c.notNull())
    .addColumn("status", t.text, (c) => c.notNull())
    .addColumn("asset_type", t.text, (c) => c.notNull())
    .addColumn("created_at", t.key, (c) => c.notNull())
    .addColumn("updated_at", t.key, (c) => c.notNull())
    .execute()

  await createTable(db, engine, "transactions")
    .addColumn("id", t.key, (c) => c.primaryKey())
    .addColumn("client_id", t.key, (c) => c.notNull().references("clients.id"))
    .addColumn("source_account_id", t.key, (c) => c.notNull().references("accounts.id"))
    .addColumn("destination_id", t.key, (c) => c.notNull())
    .addColumn("destination_type", t.text, (c) => c.notNull())
    .addColumn("destination_address", t.text, (c) => c.notNull())
    .addColumn("amount", t.money, (c) => c.notNull())
    .addColumn("asset_type", t.text, (c) => c.notNull())
    .addColumn("network_fee", t.money, (c) => c.notNull())
    .addColumn("fee_asset_id", t.text, (c) => c.notNull())
    .addColumn("reserved", t.money, (c) => c.notNull())
    .addColumn("status", t.text, (c) => c.notNull())
    .addColumn("sub_status", t.text)
    .addColumn("required_approvals", t.integer, (c) => c.notNull())
    .addColumn("created_by_api_user_id", t.key, (c) => c.notNull())
    .addColumn("created_by_name", t.text, (c) => c.notNull())
    .addColumn("decisions", t.text, (c) => c.notNull())
    .addColumn("provider_transaction_id", t.text)
    .addColumn("approved_at", t.key)
    .addColumn("provider_approved_at", t.key)
    .addColumn("created_at", t.key, (c) => c.notNull())
    .addColumn("updated_at", t.key, (c) => c.notNull())
    .execute()

  // No reference from transaction_id: a ledger entry outlives nothing, and settlement rows are written in the
  // same unit as the transaction's own update, in whichever order the core chooses.
  await createTable(db, engine, "ledger_entries")
    .addColumn("id", t.key, (c) => c.primaryKey())
    .addColumn("client_id", t.key, (c) => c.notNull().references("clients.id"))
    .addColumn("account_id", t.key, (c) => c.notNull().references("accounts.id"))
    .addColumn("kind", t.text, (c) => c.notNull())
    .addColumn("direction", t.text, (c) => c.notNull())
    .addColumn("amount", t.money, (c) => c.notNull())
    .addColumn("transaction_id", t.key)
    .addColumn("created_at", t.key, (c) => c.notNull())
    .execute()

  await createTable(db, engine, "idempotency_records")
    .addColumn("scope", t.key, (c) => c.notNull())
    .addColumn("key", t.key, (c) => c.notNull())
    .addColumn("request_hash", t.text, (c) => c.notNull())
    .addColumn("state", t.text, (c) => c.notNull())
    .addColumn("response_status", t.integer)
    .addColumn("response_body", t.text)
    .addColumn("created_at", t.key, (c) => c.notNull())
    .addColumn("expires_at", t.key, (c) => c.notNull())
    .addPrimaryKeyConstraint("idempotency_records_pkey", ["scope", "key"])
    .execute()

  for (const unique of uniqueIndexes) {
    const index = db.schema.createIndex(unique.name).unique().on(unique.table).columns([...unique.columns])
    await (unique.where === undefined ? index : index.where(sql.raw<SqlBool>(unique.where))).execute()
  }
}
