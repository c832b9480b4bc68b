/**
 * Migration 3: the rate limiter's counters, shared by every node on the database. One row per key and fixed
 * window; the count is raised by an atomic upsert, and windows that ended are purged now and then.
 */
import type { Kysely } from "kysely"
import type { EngineName } from "../SqlEngine.js"
import { columnTypesFor } from "./ColumnTypes.js"
import { createTable } from "./createTable.js"

export const up = async (db: Kysely<unknown>, engine: EngineName): Promise<void> => {
  const t = columnTypesFor(engine)
  await createTable(db, engine, "rate_limit_windows")
    .addColumn("key", t.key, (c) => c.notNull())
    .addColumn("window_start", t.bigint, (c) => c.notNull())
    .addColumn("window_end", t.bigint, (c) => c.notNull())
    .addColumn("count", t.integer, (c) => c.notNull())
    .addPrimaryKeyConstraint("rate_limit_windows_pkey", ["key", "window_start"])
    .execute()
  await db.schema.createIndex("rate_limit_windows_end").on("rate_limit_windows").column("window_end").execute()
}
