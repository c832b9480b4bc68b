/**
 * Migration 6: run-time settings every node sees alike (`relay_settings`, one JSON value per name), and an API
 * user's own request budget (`api_users.rate_limit`, JSON, null for the deployment's).
 */
import type { Kysely } from "kysely"
import type { EngineName } from "../SqlEngine.js"
import { columnTypesFor } from "./ColumnTypes.js"
import { createTable } from "./createTable.js"

export const up = async (db: Kysely<unknown>, engine: EngineName): Promise<void> => {
  const t = columnTypesFor(engine)
  await createTable(db, engine, "relay_settings")
    .addColumn("name", t.key, (c) => c.primaryKey())
    .addColumn("value", t.text, (c) => c.notNull())
    .execute()
  await db.schema.alterTable("api_users").addColumn("rate_limit", t.text).execute()
}
