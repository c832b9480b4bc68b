/**
 * The one way a SQL store becomes a Layer: open the database (scoped, so it is destroyed on release), migrate it
 * to the latest schema, then provide the Storage and RateLimiter services over it. Each engine's layer supplies
 * only how to open its database.
 */
import { RateLimiter, Storage } from "@custody-relay/core"
import { Context, Effect, Layer, type Scope } from "effect"
import type { Kysely } from "kysely"
import { migrateToLatest } from "./migrations/migrateToLatest.js"
import type { Database } from "./schema/Database.js"
import type { SqlEngine } from "./SqlEngine.js"
import * as SqlRateLimiter from "./SqlRateLimiter.js"
import * as SqlStorage from "./SqlStorage.js"

export const make = (
  open: Effect.Effect<Kysely<Database>, Storage.StorageError, Scope.Scope>,
  engine: SqlEngine,
  options: SqlStorage.SqlStorageOptions
): Layer.Layer<Storage.Storage | RateLimiter.RateLimiter, Storage.StorageError> =>
  Layer.effectContext(
    Effect.gen(function*() {
      const db = yield* open
      // Nodes starting together on SQLite queue for the write lock; one that waited past busy_timeout tries again.
      yield* Effect.tryPromise({ try: () => migrateToLatest(db), catch: engine.classify }).pipe(
        Effect.retry({ schedule: SqlStorage.backoff, times: SqlStorage.DEFAULT_MAX_RETRIES, while: SqlStorage.isRetryable })
      )
      return Context.make(Storage.Storage, SqlStorage.make(db, engine, options)).pipe(
        Context.add(RateLimiter.RateLimiter, SqlRateLimiter.make(db, engine))
      )
    })
  )

/** Acquires a kysely instance for the layer's lifetime and destroys it (closing the file or pool) on release. */
export const scoped = (
  open: () => Promise<Kysely<Database>>,
  engine: SqlEngine
): Effect.Effect<Kysely<Database>, Storage.StorageError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({ try: open, catch: engine.classify }),
    (db) => Effect.promise(() => db.destroy())
  )
