/**
 * The storage implementations the tests run against, and which of them this run wants. `RELAY_TEST_DIALECTS`
 * (comma-separated: memory, sqlite-memory, sqlite-file, postgres; `sqlite` means both SQLite ones) narrows the
 * set; unset means all. PostgreSQL
 * also needs `RELAY_TEST_PG_URL`: each use creates its own database with a random name and drops it after.
 */
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { RateLimiter, Storage } from "@custody-relay/core"
import { Effect, Layer } from "effect"
import pg from "pg"
import { layerPostgres, layerSqlite } from "../src/index.js"
import { migrateToLatest } from "../src/migrations/migrateToLatest.js"
import { openSqlite, type SqliteOptions } from "../src/sqlite/layerSqlite.js"

export const dialectNames = ["memory", "sqlite-memory", "sqlite-file", "postgres"] as const
export type DialectName = (typeof dialectNames)[number]

const wanted = process.env["RELAY_TEST_DIALECTS"]?.split(",").map((name) => name.trim())

export const isWanted = (name: DialectName): boolean =>
  wanted === undefined || wanted.includes(name) || (name.startsWith("sqlite") && wanted.includes("sqlite"))

export const postgresUrl: string | undefined = process.env["RELAY_TEST_PG_URL"]

/** Why PostgreSQL tests do not run, or undefined when they do. */
export const postgresSkipReason: string | undefined = postgresUrl === undefined
  ? "RELAY_TEST_PG_URL is not set: the PostgreSQL storage tests are skipped (set it, e.g. to postgres://postgres@127.0.0.1:5432/postgres, to run them)"
  : undefined

if (postgresSkipReason !== undefined && isWanted("postgres")) console.warn(postgresSkipReason)

const withDatabase = (url: string, database: string): string => {
  const parsed = new URL(url)
  parsed.pathname = `/${database}`
  return parsed.toString()
}

/** `run` on a connection of its own to `url`, closed after. */
export const admin = async <A>(url: string, run: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await run(client)
  } finally {
    await client.end()
  }
}

/** A fresh PostgreSQL database for the scope's lifetime: its connection string. */
export const temporaryPostgresDatabase = Effect.acquireRelease(
  Effect.promise(async () => {
    const url = postgresUrl
    if (url === undefined) throw new Error(postgresSkipReason)
    const name = `relay_test_${randomUUID().replaceAll("-", "").slice(0, 16)}`
    await admin(url, (client) => client.query(`create database ${name}`))
    return { url: withDatabase(url, name), name }
  }),
  ({ name }) => Effect.promise(() => admin(postgresUrl ?? "", (client) => client.query(`drop database if exists ${name} with (force)`)))
)

/**
 * Another client's transaction on the server of `url`, holding a transaction id until released, as a report or a
 * backup does: every snapshot taken meanwhile counts it as running. Resolves to its release.
 */
export const holdTransaction = async (url: string): Promise<() => Promise<void>> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  await client.query("begin")
  await client.query("select pg_current_xact_id()")
  return async () => {
    await client.query("commit")
    await client.end()
  }
}

/** `holdTransaction` for the scope. */
export const heldTransaction = (url: string) =>
  Effect.acquireRelease(Effect.promise(() => holdTransaction(url)), (release) => Effect.promise(release))

/** A fresh directory for SQLite files, removed with the scope. */
export const temporaryDirectory = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "relay-sqlite-"))),
  (directory) => Effect.sync(() => rmSync(directory, { recursive: true, force: true }))
)

/** A migrated SQLite file in a fresh directory, closed and removed with the scope, and its path (for another connection). */
export const migratedSqliteFile = (name: string, options: Omit<SqliteOptions, "filename"> = {}) =>
  Effect.gen(function*() {
    const filename = join(yield* temporaryDirectory, name)
    const db = yield* Effect.acquireRelease(Effect.promise(() => openSqlite({ ...options, filename })), (db) => Effect.promise(() => db.destroy()))
    yield* Effect.promise(() => migrateToLatest(db))
    return { db, filename }
  })

export type StoreLayer = Layer.Layer<Storage.Storage | RateLimiter.RateLimiter, unknown>

export const layers: Record<DialectName, () => StoreLayer> = {
  memory: () => Layer.merge(Storage.Storage.layerMemory, RateLimiter.RateLimiter.layerMemory),
  "sqlite-memory": () => layerSqlite({ filename: ":memory:" }),
  "sqlite-file": () =>
    Layer.unwrap(Effect.map(temporaryDirectory, (directory) => layerSqlite({ filename: join(directory, "relay.db") }))),
  postgres: () =>
    Layer.unwrap(Effect.map(temporaryPostgresDatabase, ({ url }) => layerPostgres({ connectionString: url })))
}
