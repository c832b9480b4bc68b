/** A SQLite store whose statements are recorded, and their query plans: what the storage tests read plans from. */
import { join } from "node:path"
import { Effect } from "effect"
import { CompiledQuery, Kysely } from "kysely"
import { migrateToLatest } from "../src/migrations/migrateToLatest.js"
import type { Database } from "../src/schema/Database.js"
import { ConnectionGate } from "../src/sqlite/ConnectionGate.js"
import { SqliteEngine } from "../src/sqlite/SqliteEngine.js"
import { WriteLockSqliteDialect } from "../src/sqlite/WriteLockDriver.js"
import * as SqlStorage from "../src/SqlStorage.js"
import { temporaryDirectory } from "./Dialects.js"

/** A SQLite store on an empty database, through kysely's driver so that every statement it issues matching `which` is recorded. */
export const recording = (which: RegExp) =>
  Effect.gen(function*() {
    const filename = join(yield* temporaryDirectory, "recorded.db")
    const issued: Array<CompiledQuery> = []
    const { default: BetterSqlite3 } = yield* Effect.promise(() => import("better-sqlite3"))
    const db = new Kysely<Database>({
      dialect: new WriteLockSqliteDialect({ database: new BetterSqlite3(filename) }, new ConnectionGate()),
      log: (event) => {
        if (event.level === "query" && which.test(event.query.sql)) issued.push(CompiledQuery.raw(event.query.sql, [...event.query.parameters]))
      }
    })
    yield* Effect.addFinalizer(() => Effect.promise(() => db.destroy()))
    yield* Effect.promise(() => migrateToLatest(db))
    // Only the store's own statements, not the migrator's.
    issued.length = 0
    return { db, issued, storage: SqlStorage.make(db, SqliteEngine) }
  })

/** SQLite's plan of an issued statement, a row a step. */
export const queryPlanOf = (db: Kysely<Database>, query: CompiledQuery) =>
  Effect.promise(() => db.executeQuery<{ readonly detail: string }>(CompiledQuery.raw(`explain query plan ${query.sql}`, [...query.parameters])))
