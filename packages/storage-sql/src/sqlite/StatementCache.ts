/**
 * A SQLite database handle for kysely that keeps its prepared statements. kysely's SQLite driver prepares every
 * query anew, and preparing is a measurable share of a short unit of work (about 7% of an initiation); the store
 * issues the same few dozen statements again and again, so the last {@link STATEMENT_CACHE_SIZE} are kept, least
 * recently used first out. Reusing a statement is safe here: kysely runs one query at a time on the connection,
 * and SQLite re-prepares a kept statement by itself after a schema change.
 */
import type { SqliteDatabase, SqliteStatement } from "kysely"
import { setRecent } from "../RecentlyUsed.js"

export const STATEMENT_CACHE_SIZE = 256

export const withStatementCache = (database: SqliteDatabase, size: number = STATEMENT_CACHE_SIZE): SqliteDatabase => {
  const statements = new Map<string, SqliteStatement>()
  return {
    close: () => {
      statements.clear()
      database.close()
    },
    prepare: (sql) => {
      const statement = statements.get(sql) ?? database.prepare(sql)
      setRecent(statements, sql, statement, size)
      return statement
    }
  }
}
