/**
 * Migration 4: exact totals for transaction lists without counting rows. A list page's `total` was a COUNT(*)
 * over the client's index range, linear in the client's transactions (about 70 to 150 ms at a million rows, see
 * docs/benchmarks.md). This table keeps, per client, source account, asset and status group, how many
 * transactions there are; every list filter (account, asset, group, any combination) is a sum over a handful of
 * these rows. The store updates it in the same unit of work as the transaction itself, so it is exactly as
 * durable and as isolated; on PostgreSQL a counter row belongs to one source account, whose row lock every
 * change of its transactions' group already holds, so the counters add no new contention. Backfilled here.
 */
import { type Kysely, sql } from "kysely"
import type { EngineName } from "../SqlEngine.js"
import { columnTypesFor } from "./ColumnTypes.js"
import { createTable } from "./createTable.js"

export const up = async (db: Kysely<unknown>, engine: EngineName): Promise<void> => {
  const t = columnTypesFor(engine)
  await createTable(db, engine, "transaction_counts")
    .addColumn("client_id", t.key, (c) => c.notNull())
    .addColumn("source_account_id", t.key, (c) => c.notNull())
    .addColumn("asset_type", t.text, (c) => c.notNull())
    .addColumn("status_group", t.text, (c) => c.notNull())
    .addColumn("count", t.integer, (c) => c.notNull())
    .addPrimaryKeyConstraint("transaction_counts_pkey", ["client_id", "source_account_id", "asset_type", "status_group"])
    .execute()
  await sql`
    insert into transaction_counts (client_id, source_account_id, asset_type, status_group, count)
    select client_id, source_account_id, asset_type, status_group, count(*)
    from transactions
    group by client_id, source_account_id, asset_type, status_group
  `.execute(db)
}
