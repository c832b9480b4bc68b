/**
 * Storage and RateLimiter on PostgreSQL through a pg pool: for several relay nodes sharing one database. Nodes
 * need nothing but the same connection string: migrations take an advisory lock, write units lock the rows they
 * read (see PostgresEngine), and the rate limiter counts in the database. pg is loaded when the layer is built, so
 * a SQLite-only application need not install it.
 */
import type { RateLimiter, Storage } from "@custody-relay/core"
import type { Layer } from "effect"
import { Kysely, type PostgresCursor, PostgresDialect, type PostgresPool, type PostgresPoolClient, type PostgresQueryResult } from "kysely"
import type pg from "pg"
import type { Database } from "../schema/Database.js"
import * as SqlLayer from "../SqlLayer.js"
import type { SqlStorageOptions } from "../SqlStorage.js"
import { PostgresEngine } from "./PostgresEngine.js"
import { type PgParts, replyDeadline, type UnansweredReply } from "./Pipeline.js"
import { type PostgresPoolOptions, poolSettings, wholeNumber } from "./PoolSettings.js"
import { pipelineOn } from "./PostgresSession.js"

/** pg's own mapping of parameter values (what its `query` binds with), for pipelines; pg publishes lib/ but no types for it. */
const PG_UTILS = "pg/lib/utils.js"

export interface PostgresOptions extends SqlStorageOptions {
  /** e.g. postgres://user:password@host:5432/database?sslmode=require */
  readonly connectionString: string
  readonly pool?: PostgresPoolOptions
}

/**
 * What pipelines are made with (Pipeline's PgParts): pg's own Result, type parsers and parameter mapping, and the
 * settings that bound a round trip; tests use it to run a pipeline on a connection of their own.
 */
export const pgParts = async (settings: Pick<PgParts, "preparedStatements" | "replyTimeoutMillis">): Promise<PgParts> => {
  const [{ default: pg }, { default: utils }] = await Promise.all([
    import("pg"),
    import(PG_UTILS) as Promise<{ readonly default: { readonly prepareValue: PgParts["prepareValue"] } }>
  ])
  return {
    // pg's types declare Result's constructor but not the methods its own Query calls, which a pipeline calls too.
    newResult: () => new pg.Result("", pg.types) as unknown as ReturnType<PgParts["newResult"]>,
    typeParser: (dataTypeID) => pg.types.getTypeParser(dataTypeID, "text"),
    prepareValue: utils.prepareValue,
    preparedStatements: settings.preparedStatements,
    replyTimeoutMillis: settings.replyTimeoutMillis
  }
}

/**
 * pg's pool as kysely's own statements reach it (migrations, the rate limiter's, a tool's on the kysely instance):
 * each bounded by `replyTimeoutMillis` as a unit's round trips are (Pipeline's `replyDeadline`). A connection the
 * bound closed goes back to the pool as broken, so the pool drops it rather than lend it again. Without the bound a
 * statement whose answer never comes holds its connection for as long as TCP waits, after its caller has stopped
 * waiting: the rate limiter's own bound (`rateLimitTimeoutMillis`) answers the request, and would leave a connection
 * behind at each count the database does not answer.
 */
const boundedForKysely = (pool: pg.Pool, replyTimeoutMillis: number, end: () => Promise<void>): PostgresPool => ({
  options: pool.options,
  connect: async (): Promise<PostgresPoolClient> => {
    const client = await pool.connect()
    let unanswered: UnansweredReply | undefined
    const query = (sql: string | PostgresCursor<unknown>, parameters?: ReadonlyArray<unknown>) => {
      // A cursor reads its rows in several round trips at its caller's pace; the relay opens none.
      if (typeof sql !== "string") return client.query(sql as never)
      return new Promise<PostgresQueryResult<unknown>>((resolve, reject) => {
        const disarm = replyDeadline(replyTimeoutMillis, (client as unknown as pg.Client).connection.stream, (error) => {
          unanswered = error
          reject(error)
        })
        client.query(sql, [...(parameters ?? [])]).then(
          (result) => (disarm(), resolve(result as unknown as PostgresQueryResult<unknown>)),
          (error: unknown) => (disarm(), reject(error))
        )
      })
    }
    return {
      query: query as PostgresPoolClient["query"],
      release: (destroy) => client.release(unanswered ?? destroy)
    }
  },
  end
})

/**
 * `connectionString` if it can name a PostgreSQL server; a RangeError saying what is wrong otherwise. Without the
 * check a string pasted with its quotes, or a URL of another database, was taken for a host name and retried as an
 * unreachable database for the whole start-up bound ("getaddrinfo ENOTFOUND"). A string with no scheme is left to pg
 * (libpq's `host=... dbname=...` form).
 */
export const checkedConnectionString = (connectionString: string): string => {
  const given = connectionString.trim()
  if (given === "") throw new RangeError("connectionString is empty")
  if (/^["'`]/.test(given)) throw new RangeError("connectionString is wrapped in quotes: give the URL without them")
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(given)?.[1]?.toLowerCase()
  if (scheme === undefined) return connectionString
  if (scheme !== "postgres" && scheme !== "postgresql" && scheme !== "socket") {
    throw new RangeError(`connectionString must be a postgres:// or postgresql:// URL, got a ${scheme}:// one`)
  }
  if (scheme !== "socket" && !URL.canParse(given)) throw new RangeError("connectionString is not a URL that can be read (a character to percent-encode in the password?)")
  return connectionString
}

/** Opens the pool; exported for tools and tests that need the kysely instance itself. */
export const openPostgres = async (options: PostgresOptions): Promise<Kysely<Database>> => {
  const connectionString = checkedConnectionString(options.connectionString)
  const settings = poolSettings(options.pool)
  const [{ default: pg }, parts] = await Promise.all([import("pg"), pgParts(settings)])
  const pool = new pg.Pool({
    connectionString,
    max: settings.max,
    idleTimeoutMillis: settings.idleTimeoutMillis,
    connectionTimeoutMillis: settings.connectionTimeoutMillis,
    lock_timeout: settings.lockTimeoutMillis,
    statement_timeout: settings.statementTimeoutMillis,
    idle_in_transaction_session_timeout: settings.idleInTransactionTimeoutMillis
  })
  // A connection the server closed (a restart, a failover, pg_terminate_backend, an idle timeout) emits "error":
  // without a listener that ends the process. The pool listens on idle connections; every connection gets its own
  // listener too, so one lost while a unit uses it only fails that unit's statement (StorageUnavailable, and the
  // unit is re-run on a fresh connection) and the pool drops it. A connection closed because the server did not
  // answer in time (Pipeline's `replyTimeoutMillis`) is dropped the same way.
  pool.on("error", () => undefined)
  pool.on("connect", (client) => {
    client.on("error", () => undefined)
  })
  // Ended once, by whichever asks first: kysely's driver ends the pool on destroy only if it ever ran a statement of its
  // own (it initialises on the first), so an instance used through pipelined units alone would keep its idle
  // connections open, and a process waiting on them alive, until the pool's idle timeout.
  let ended: Promise<void> | undefined
  const end = () => (ended ??= pool.end())
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: boundedForKysely(pool, settings.replyTimeoutMillis, end) }) })
  const destroy = db.destroy.bind(db)
  db.destroy = () => destroy().then(end)
  pipelineOn(db, { pool, parts })
  return db
}

/**
 * Throws a RangeError at once for a `pool` setting out of range (see PoolSettings), or a bound on units at once that is
 * not a whole number of at least 1 (a semaphore of 0 would let no unit through).
 */
export const layerPostgres = (
  options: PostgresOptions
): Layer.Layer<Storage.Storage | RateLimiter.RateLimiter, Storage.StorageError> => {
  const { writeUnits } = poolSettings(options.pool)
  for (const name of ["maxConcurrentWriteUnits", "maxConcurrentTrailCounts"] as const) {
    const value = options[name]
    if (value !== undefined) wholeNumber(name, value, 1)
  }
  return SqlLayer.make(SqlLayer.scoped(() => openPostgres(options), PostgresEngine), PostgresEngine, {
    ...options,
    maxConcurrentWriteUnits: options.maxConcurrentWriteUnits ?? writeUnits
  })
}
