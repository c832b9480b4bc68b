/**
 * The one way a SQL store becomes a Layer: open the database (scoped, so it is destroyed on release), migrate it
 * to the latest schema, then provide the Storage and RateLimiter services over it. Each engine's layer supplies
 * only how to open its database.
 */
import { RateLimiter, Storage } from "@custody-relay/core"
import { Clock, Context, Effect, Layer, Result, Schedule, type Scope } from "effect"
import type { Kysely } from "kysely"
import { migrateToLatest } from "./migrations/migrateToLatest.js"
import type { Database } from "./schema/Database.js"
import type { SqlEngine } from "./SqlEngine.js"
import * as SqlRateLimiter from "./SqlRateLimiter.js"
import * as SqlStorage from "./SqlStorage.js"

/** How often a node prunes the engine's list-change log (see PageBoundaries), where it keeps one. */
export const PRUNE_EVERY_MILLIS = 5 * 60_000

/** How long a layer waits for an unreachable database at start-up before it fails; 60 s by default. */
export const DEFAULT_STARTUP_TIMEOUT_MILLIS = 60_000

/**
 * Runs `start` again while the database is unreachable (a node started before its database, a database
 * restarting), saying so in the log each time, for at most `timeoutMillis`; then its error goes through.
 */
const untilReachable = <A>(start: Effect.Effect<A, Storage.StorageError>, timeoutMillis: number) =>
  Effect.gen(function*() {
    const startedAt = yield* Clock.currentTimeMillis
    for (let delay = 250; ; delay = Math.min(delay * 2, 5000)) {
      const result = yield* Effect.result(start)
      if (Result.isSuccess(result)) return result.success
      const error = result.failure
      const elapsed = (yield* Clock.currentTimeMillis) - startedAt
      if (!error.isUnavailable || elapsed + delay > timeoutMillis) return yield* Effect.fail(error)
      yield* Effect.logWarning(
        `the database is unreachable at start-up (${error.reason.message}); retrying in ${delay} ms, for at most ${Math.round(timeoutMillis / 1000)} s`
      )
      yield* Effect.sleep(delay)
    }
  })

export const make = (
  open: Effect.Effect<Kysely<Database>, Storage.StorageError, Scope.Scope>,
  engine: SqlEngine,
  options: SqlStorage.SqlStorageOptions
): Layer.Layer<Storage.Storage | RateLimiter.RateLimiter, Storage.StorageError> =>
  Layer.effectContext(
    Effect.gen(function*() {
      const db = yield* open
      // Nodes starting together on SQLite queue for the write lock; one that waited past busy_timeout tries again.
      const migrate = Effect.tryPromise({ try: () => migrateToLatest(db), catch: engine.classify }).pipe(
        Effect.retry({ schedule: SqlStorage.backoff, times: SqlStorage.DEFAULT_MAX_RETRIES, while: SqlStorage.isRetryable })
      )
      yield* untilReachable(migrate, options.startupTimeoutMillis ?? DEFAULT_STARTUP_TIMEOUT_MILLIS)
      const prune = engine.listChanges.prune
      if (prune !== undefined) {
        // Every node prunes; a round that fails (the database unreachable) is tried again at the next.
        const round = Effect.catchCause(
          Effect.tryPromise({ try: () => db.executeQuery(prune), catch: engine.classify }),
          (cause) => Effect.logWarning("pruning the list-change log failed", cause)
        )
        yield* Effect.forkScoped(Effect.repeat(round, Schedule.spaced(PRUNE_EVERY_MILLIS)))
      }
      const limiter = options.rateLimitSyncMillis === undefined
        ? SqlRateLimiter.make(db, engine, options.rateLimitTimeoutMillis)
        : yield* SqlRateLimiter.makeSynced(db, engine, options.rateLimitSyncMillis, options.rateLimitTimeoutMillis)
      return Context.make(Storage.Storage, SqlStorage.make(db, engine, options)).pipe(
        Context.add(RateLimiter.RateLimiter, limiter)
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
