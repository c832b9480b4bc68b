/**
 * The column types each engine gets, chosen once for every migration.
 *
 * - `key` (ids, timestamps, anything lists order or compare by): plain TEXT in SQLite, whose default collation is
 *   binary; `text COLLATE "C"` in PostgreSQL, so ORDER BY compares bytes whatever the database's locale, which is
 *   exactly JavaScript's string order for these ASCII values (`Storage.compareNewestFirst`).
 * - `money`: TEXT in SQLite (a NUMERIC column would turn "0.1" into a float), unconstrained NUMERIC in PostgreSQL
 *   (exact at any scale: a 10^30 balance and an 18-decimal amount keep every digit).
 * - `bigint`: Unix milliseconds; SQLite's INTEGER is already 64-bit.
 */
import { type Expression, sql } from "kysely"
import type { EngineName } from "../SqlEngine.js"

export interface ColumnTypes {
  readonly key: Expression<unknown>
  readonly text: Expression<unknown>
  readonly money: Expression<unknown>
  readonly integer: Expression<unknown>
  readonly bigint: Expression<unknown>
}

export const columnTypesFor = (engine: EngineName): ColumnTypes =>
  engine === "postgres"
    ? { key: sql`text collate "C"`, text: sql`text`, money: sql`numeric`, integer: sql`integer`, bigint: sql`bigint` }
    : { key: sql`text`, text: sql`text`, money: sql`text`, integer: sql`integer`, bigint: sql`integer` }
