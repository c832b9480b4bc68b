/**
 * Brings a database to the latest schema: runs, in order, every migration it has not run yet. Safe to call on
 * every start: a database that is up to date is left alone, and one made by an older version of this package
 * migrates forward keeping its data. On PostgreSQL the Migrator holds an advisory lock and runs each migration in a
 * transaction, so nodes starting together migrate once. kysely's Migrator takes no lock and no transaction on SQLite
 * (its SQLite adapter assumes one connection), so here the whole run is one `BEGIN IMMEDIATE` transaction: a second
 * process waits for the first one's commit, then finds nothing left to do, and a failed run leaves nothing behind.
 */
import { type Kysely, sql } from "kysely"
import { Migrator, NO_MIGRATIONS } from "kysely/migration"
import { engineNameOf } from "../SqlEngine.js"
import { MIGRATION_LOCK_TABLE, MIGRATION_TABLE, names, providerFor } from "./Migrations.js"

/**
 * The database was migrated by a later release than this one: migrations only move forward, so this release cannot
 * serve it. kysely's own words for it ("corrupted migrations") would send an operator looking for damage.
 */
export class SchemaNewerThanRelease extends Error {
  constructor(readonly unknownMigrations: ReadonlyArray<string>) {
    super(
      `the database was migrated by a later release of @custody-relay/storage-sql than this one (migration ` +
        `${unknownMigrations.join(", ")} is unknown here): run that release or a later one; migrations only move forward ` +
        `(docs/storage.md, "Upgrading")`
    )
    this.name = "SchemaNewerThanRelease"
  }
}

/**
 * Refuses a database with a migration this release does not have (SchemaNewerThanRelease). A database with no
 * migration table yet has none.
 */
const refuseNewer = async <DB>(db: Kysely<DB>): Promise<void> => {
  const ran = await sql<{ readonly name: string }>`select name from ${sql.table(MIGRATION_TABLE)}`.execute(db).then(
    (result) => result.rows.map((row) => row.name),
    () => []
  )
  const known = new Set(names)
  const unknown = ran.filter((name) => !known.has(name)).sort()
  if (unknown.length > 0) throw new SchemaNewerThanRelease(unknown)
}

const migratorFor = <DB>(db: Kysely<DB>): Migrator =>
  new Migrator({
    db,
    provider: providerFor(engineNameOf(db)),
    migrationTableName: MIGRATION_TABLE,
    migrationLockTableName: MIGRATION_LOCK_TABLE
  })

const run = async <DB>(db: Kysely<DB>, migrate: (migrator: Migrator) => Promise<{ readonly error?: unknown }>): Promise<void> => {
  const check = async (target: Kysely<DB>) => {
    await refuseNewer(target)
    const { error } = await migrate(migratorFor(target))
    if (error !== undefined) throw error
  }
  if (engineNameOf(db) === "postgres") return check(db)
  await db.connection().execute(async (connection) => {
    await sql`begin immediate`.execute(connection)
    try {
      await check(connection)
    } catch (error) {
      await sql`rollback`.execute(connection)
      throw error
    }
    await sql`commit`.execute(connection)
  })
}

/** Runs every pending migration; rejects with the failing migration's error (its transaction rolled back). */
export const migrateToLatest = <DB>(db: Kysely<DB>): Promise<void> => run(db, (migrator) => migrator.migrateToLatest())

/**
 * Runs the migrations up to and including `name` and no further: how tests build a database as an older version
 * of this package left it.
 */
export const migrateTo = <DB>(db: Kysely<DB>, name: string | typeof NO_MIGRATIONS): Promise<void> =>
  run(db, (migrator) => migrator.migrateTo(name))
