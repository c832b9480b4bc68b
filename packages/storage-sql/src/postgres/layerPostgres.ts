/**
 * Storage and RateLimiter on PostgreSQL through a pg pool: for several relay nodes sharing one database. Nodes
 * need nothing but the same connection string: migrations take an advisory lock, write units lock the rows they
 * read (see PostgresEngine), and the rate limiter counts in the database. pg is loaded when the layer is built, so
 * a SQLite-only application need not install it.
 */
import type { RateLimiter, Storage } from "@custody-relay/core"
import type { Layer } from "effect"
import { Kysely, PostgresDialect } from "kysely"
import type { Database } from "../schema/Database.js"
import * as SqlLayer from "../SqlLayer.js"
import type { SqlStorageOptions } from "../SqlStorage.js"
import { PostgresEngine } from "./PostgresEngine.js"

export interface PostgresPoolOptions {
  /** Connections per node; default 10. Each open unit of work holds one. */
  readonly max?: number
  /** How long an idle connection stays open, in milliseconds; default 10000. */
  readonly idleTimeoutMillis?: number
  /** How long a unit waits for a free connection before it fails as StorageUnavailable; default 0 (no limit). */
  readonly connectionTimeoutMillis?: number
}

export interface PostgresOptions extends SqlStorageOptions {
  /** e.g. postgres://user:password@host:5432/database?sslmode=require */
  readonly connectionString: string
  readonly pool?: PostgresPoolOptions
}

/** Opens the pool; exported for tools and tests that need the kysely instance itself. */
export const openPostgres = async (options: PostgresOptions): Promise<Kysely<Database>> => {
  const { default: pg } = await import("pg")
  const pool = new pg.Pool({ connectionString: options.connectionString, ...options.pool })
  // An idle connection the server closed is dropped by the pool; without a listener its error would end the
  // process. The next unit that needs a connection gets a fresh one, or StorageUnavailable.
  pool.on("error", () => undefined)
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
}

export const layerPostgres = (
  options: PostgresOptions
): Layer.Layer<Storage.Storage | RateLimiter.RateLimiter, Storage.StorageError> =>
  SqlLayer.make(SqlLayer.scoped(() => openPostgres(options), PostgresEngine), PostgresEngine, options)
