/**
 * Brings a database to the latest schema: runs, in order, every migration it has not run yet. Safe to call on
 * every start: a database that is up to date is left alone, and one made by an older version of this package
 * migrates forward keeping its data. On PostgreSQL the Migrator holds an advisory lock, so nodes starting together
 * migrate once; on SQLite each migration's transaction takes the write lock up front.
 */
import type { Kysely } from "kysely"
import { Migrator, NO_MIGRATIONS } from "kysely/migration"
import { engineNameOf } from "../SqlEngine.js"
import { MIGRATION_LOCK_TABLE, MIGRATION_TABLE, providerFor } from "./Migrations.js"

const migratorFor = <DB>(db: Kysely<DB>): Migrator =>
  new Migrator({
    db,
    provider: providerFor(engineNameOf(db)),
    migrationTableName: MIGRATION_TABLE,
    migrationLockTableName: MIGRATION_LOCK_TABLE
  })

const run = async (migrate: Promise<{ readonly error?: unknown }>): Promise<void> => {
  const { error } = await migrate
  if (error !== undefined) throw error
}

/** Runs every pending migration; rejects with the failing migration's error (its transaction rolled back). */
export const migrateToLatest = <DB>(db: Kysely<DB>): Promise<void> => run(migratorFor(db).migrateToLatest())

/**
 * Runs the migrations up to and including `name` and no further: how tests build a database as an older version
 * of this package left it.
 */
export const migrateTo = <DB>(db: Kysely<DB>, name: string | typeof NO_MIGRATIONS): Promise<void> =>
  run(migratorFor(db).migrateTo(name))
