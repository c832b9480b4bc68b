/**
 * The RateLimiter port in the database, so every node that shares it counts against one budget per key
 * (LIM-RATE-1). Each request is one atomic upsert of its (key, window) row that returns the new count: concurrent
 * requests, on any node, each get a distinct count. Rows of windows that ended are purged at most once a minute
 * per node. The window arithmetic and the decision are the port's own (`windowOf`, `decide`).
 */
import { RateLimiter } from "@custody-relay/core"
import { Clock, Effect, Schedule } from "effect"
import type { Kysely } from "kysely"
import type { Database } from "./schema/Database.js"
import type { SqlEngine } from "./SqlEngine.js"
import { isRetryable } from "./SqlStorage.js"

const PURGE_INTERVAL_MILLIS = 60_000

/** A busy SQLite file is the one race an upsert can lose; a few quick re-runs absorb it. */
const retry = { schedule: Schedule.exponential("2 millis").pipe(Schedule.jittered), times: 5, while: isRetryable }

export const make = (db: Kysely<Database>, engine: SqlEngine): RateLimiter.RateLimiter["Service"] => {
  let nextPurgeAt = 0

  const increment = (key: string, windowStart: number, windowEnd: number) =>
    Effect.tryPromise({
      try: () =>
        db.insertInto("rate_limit_windows")
          .values({ key, window_start: windowStart, window_end: windowEnd, count: 1 })
          .onConflict((oc) =>
            oc.columns(["key", "window_start"]).doUpdateSet((eb) => ({ count: eb("rate_limit_windows.count", "+", 1) }))
          )
          .returning("count")
          .executeTakeFirstOrThrow(),
      catch: engine.classify
    }).pipe(Effect.retry(retry))

  const purge = (nowMillis: number) =>
    Effect.tryPromise({
      try: () => db.deleteFrom("rate_limit_windows").where("window_end", "<=", nowMillis).execute(),
      catch: engine.classify
    }).pipe(Effect.retry(retry))

  return RateLimiter.RateLimiter.of({
    // The port promises a decision, not an error: a database that cannot count is an infrastructure fault.
    consume: (key, policy) =>
      Effect.gen(function*() {
        const nowMillis = yield* Clock.currentTimeMillis
        const { resetAt, windowStart } = RateLimiter.windowOf(nowMillis, policy.windowSeconds)
        const { count } = yield* increment(key, windowStart, resetAt * 1000)
        if (nowMillis >= nextPurgeAt) {
          nextPurgeAt = nowMillis + PURGE_INTERVAL_MILLIS
          yield* purge(nowMillis)
        }
        return RateLimiter.decide(count, policy, resetAt, nowMillis)
      }).pipe(Effect.orDie)
  })
}
