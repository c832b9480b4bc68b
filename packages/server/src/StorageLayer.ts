/**
 * Which storage a `database` setting names: a `postgres://` (or `postgresql://`) URL is PostgreSQL, anything else
 * a SQLite file path, with ":memory:" a private in-memory SQLite database. Each layer migrates its database when
 * it is built and closes it when released.
 *
 * Where rate-limit windows are counted: in the database, shared by every node on it, or in this process. The
 * default follows the engine: PostgreSQL is how several nodes run, so they share budgets through it; a SQLite
 * file is one node's, and counting in memory saves a write transaction on every request.
 */
import { RateLimiter, type Storage } from "@custody-relay/core"
import { DEFAULT_RATE_LIMIT_SYNC_MILLIS, layerPostgres, layerSqlite, type PostgresPoolOptions } from "@custody-relay/storage-sql"
import { Layer } from "effect"
import { layerRedis, type RedisRateLimiterOptions } from "./RedisRateLimiter.js"

export type Engine = "sqlite" | "postgres"
/**
 * Where windows are counted (Kong's policies: memory = local, database = cluster, synced = cluster with a sync
 * rate, redis = redis); see docs/server.md, "Several nodes".
 */
export type RateLimitStore = "database" | "memory" | "redis" | "synced"

export const engineOf = (database: string): Engine => (/^postgres(?:ql)?:\/\//i.test(database) ? "postgres" : "sqlite")

export const defaultRateLimitStore = (engine: Engine): RateLimitStore => (engine === "postgres" ? "database" : "memory")

/** How the database is reached beyond its name: PostgreSQL's pool and lock waits, and the start-up wait. */
export interface DatabaseSettings {
  readonly pool?: PostgresPoolOptions
  readonly startupTimeoutMillis?: number
  /** The Redis that counts rate-limit windows when the store is "redis". */
  readonly redisUrl?: string
  /** The "redis" store's wait for an answer and its fault policy (RedisRateLimiterOptions; its defaults when absent). */
  readonly redis?: Pick<RedisRateLimiterOptions, "commandTimeoutMillis" | "failOpen">
  /** How often the "synced" store reconciles with the database (DEFAULT_RATE_LIMIT_SYNC_MILLIS by default). */
  readonly rateLimitSyncMillis?: number
  /**
   * How long a request waits for the database to count it, with the "database" and "synced" stores
   * (DEFAULT_RATE_LIMIT_TIMEOUT_MILLIS by default; SqlStorageOptions.rateLimitTimeoutMillis).
   */
  readonly rateLimitTimeoutMillis?: number
  /**
   * PostgreSQL: how many read units at once count a long stretch of the audit trail
   * (SqlStorageOptions.maxConcurrentTrailCounts; 1 by default).
   */
  readonly maxConcurrentTrailCounts?: number
}

export const fromDatabase = (
  database: string,
  rateLimitStore: RateLimitStore = defaultRateLimitStore(engineOf(database)),
  settings: DatabaseSettings = {}
): Layer.Layer<Storage.Storage | RateLimiter.RateLimiter, Storage.StorageError> => {
  const startup = settings.startupTimeoutMillis === undefined ? {} : { startupTimeoutMillis: settings.startupTimeoutMillis }
  const rateLimiting = {
    ...(rateLimitStore === "synced" ? { rateLimitSyncMillis: settings.rateLimitSyncMillis ?? DEFAULT_RATE_LIMIT_SYNC_MILLIS } : {}),
    ...(settings.rateLimitTimeoutMillis === undefined ? {} : { rateLimitTimeoutMillis: settings.rateLimitTimeoutMillis })
  }
  const sql = engineOf(database) === "postgres"
    ? layerPostgres({
      connectionString: database,
      ...startup,
      ...rateLimiting,
      ...(settings.pool === undefined ? {} : { pool: settings.pool }),
      ...(settings.maxConcurrentTrailCounts === undefined ? {} : { maxConcurrentTrailCounts: settings.maxConcurrentTrailCounts })
    })
    : layerSqlite({ filename: database, ...startup, ...rateLimiting })
  // The later layer's RateLimiter replaces the SQL one.
  if (rateLimitStore === "database" || rateLimitStore === "synced") return sql
  if (rateLimitStore === "memory") return Layer.merge(sql, RateLimiter.RateLimiter.layerMemory)
  if (settings.redisUrl === undefined) throw new Error('the "redis" rate-limit store needs a Redis URL (RELAY_REDIS_URL)')
  return Layer.merge(sql, layerRedis({ ...settings.redis, url: settings.redisUrl }))
}
