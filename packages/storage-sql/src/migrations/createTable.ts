/**
 * `CREATE TABLE` as every migration of this package starts it. SQLite tables are STRICT: a value of the wrong
 * type is refused instead of converted, so a money string can never silently become a float.
 */
import { type CreateTableBuilder, type Kysely, sql } from "kysely"
import type { EngineName } from "../SqlEngine.js"

export const createTable = (db: Kysely<unknown>, engine: EngineName, name: string): CreateTableBuilder<string, never> => {
  const builder = db.schema.createTable(name)
  return engine === "sqlite" ? builder.modifyEnd(sql`strict`) : builder
}
