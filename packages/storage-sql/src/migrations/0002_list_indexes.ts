/**
 * Migration 2: what the lists need to cost the same at a million rows as at a thousand.
 *
 * - Folded copies of the account search fields (`*_folded`) and the transaction status group (`status_group`),
 *   backfilled here for rows written under migration 1. The backfill folds in JavaScript, with the same
 *   `toLowerCase` as the writes, because SQL's `lower` folds differently outside ASCII.
 * - One index per list filter, each ending in (created_at, id): the pagination order, so a filtered page is an
 *   index range read backwards and its total is a count over the same range.
 */
import { type Kysely, sql, type SqlBool } from "kysely"
import type { EngineName } from "../SqlEngine.js"
import { columnTypesFor } from "./ColumnTypes.js"

/**
 * `Transaction.groupOf` as it stood when this migration was written. A migration is history: a later change to
 * the groups comes with its own migration, and this one must still mean what it meant.
 */
const STATUS_GROUPS: ReadonlyArray<readonly [string, string]> = [
  ["AWAITING_SIGNATURE", "pending"],
  ["PENDING_PROVIDER_APPROVAL", "pending"],
  ["BROADCASTING", "pending"],
  ["CONFIRMING", "pending"],
  ["COMPLETED", "completed"],
  ["REJECTED", "failed"],
  ["CANCELLED", "failed"],
  ["FAILED", "failed"]
]

const BACKFILL_BATCH = 500

interface SearchFields {
  readonly id: string
  readonly name: string
  readonly asset_id: string
  readonly address: string | null
}

const backfillFoldedSearch = async (db: Kysely<unknown>): Promise<void> => {
  // Walk the table in id order, a batch at a time, so a large table never sits in memory at once.
  let after = ""
  for (;;) {
    const { rows } = await sql<SearchFields>`
      select id, name, asset_id, address from accounts where id > ${after} order by id limit ${BACKFILL_BATCH}
    `.execute(db)
    for (const row of rows) {
      await sql`
        update accounts
        set name_folded = ${row.name.toLowerCase()},
            asset_id_folded = ${row.asset_id.toLowerCase()},
            address_folded = ${row.address === null ? null : row.address.toLowerCase()}
        where id = ${row.id}
      `.execute(db)
    }
    const last = rows[rows.length - 1]
    if (last === undefined || rows.length < BACKFILL_BATCH) return
    after = last.id
  }
}

const index = (db: Kysely<unknown>, name: string, table: string, columns: ReadonlyArray<string>) =>
  db.schema.createIndex(name).on(table).columns([...columns]).execute()

export const up = async (db: Kysely<unknown>, engine: EngineName): Promise<void> => {
  const t = columnTypesFor(engine)

  await db.schema.alterTable("accounts").addColumn("name_folded", t.text, (c) => c.notNull().defaultTo("")).execute()
  await db.schema.alterTable("accounts").addColumn("asset_id_folded", t.text, (c) => c.notNull().defaultTo("")).execute()
  await db.schema.alterTable("accounts").addColumn("address_folded", t.text).execute()
  await backfillFoldedSearch(db)

  await db.schema.alterTable("transactions").addColumn("status_group", t.text, (c) => c.notNull().defaultTo("")).execute()
  const cases = sql.join(STATUS_GROUPS.map(([status, group]) => sql`when ${sql.lit(status)} then ${sql.lit(group)}`), sql` `)
  await sql`update transactions set status_group = case status ${cases} end`.execute(db)

  const order = ["created_at", "id"]
  await index(db, "accounts_client_order", "accounts", ["client_id", ...order])
  await index(db, "accounts_client_asset", "accounts", ["client_id", "asset_id", ...order])
  await index(db, "accounts_client_workspace", "accounts", ["client_id", "workspace", ...order])
  await index(db, "accounts_client_role", "accounts", ["client_id", "role", ...order])
  await index(db, "accounts_client_status", "accounts", ["client_id", "status", ...order])

  await index(db, "whitelisted_addresses_client_order", "whitelisted_addresses", ["client_id", ...order])
  await index(db, "whitelisted_addresses_client_asset", "whitelisted_addresses", ["client_id", "asset_type", ...order])
  await index(db, "whitelisted_addresses_client_status", "whitelisted_addresses", ["client_id", "status", ...order])

  await index(db, "transactions_client_order", "transactions", ["client_id", ...order])
  await index(db, "transactions_client_source", "transactions", ["client_id", "source_account_id", ...order])
  await index(db, "transactions_client_group", "transactions", ["client_id", "status_group", ...order])
  await index(db, "transactions_client_asset", "transactions", ["client_id", "asset_type", ...order])
  // The open reservations of one account (reconciliation, listOpenTransactionsFrom): small, since it holds only
  // pending transactions.
  await db.schema
    .createIndex("transactions_open_by_source")
    .on("transactions")
    .columns(["source_account_id", ...order])
    .where(sql.raw<SqlBool>("status_group = 'pending'"))
    .execute()

  await index(db, "ledger_entries_account", "ledger_entries", ["account_id", ...order])
  await index(db, "idempotency_records_expiry", "idempotency_records", ["expires_at"])
  await index(db, "api_users_client", "api_users", ["client_id"])
}
