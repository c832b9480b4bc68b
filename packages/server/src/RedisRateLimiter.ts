/**
 * The RateLimiter port on Redis: one budget per API key shared by every node, without a write to the database on
 * each request. Each count is an atomic `INCRBY` of the key's window (windows aligned as `RateLimiter.windowOf`,
 * so every node agrees on the count and the reset), the key expiring with its window.
 *
 * The choices follow Kong's rate-limiting policies: `memory` (Kong's local: exact per node, a client spread over N
 * nodes gets up to N times its budget), `database` (cluster: exact across nodes, a write per request), `synced`
 * (cluster with a sync rate: counted locally, reconciled with the database on an interval; storage-sql's
 * SqlRateLimiter) and `redis` (exact across nodes, a Redis round trip per request, a turn's counts in one call). A
 * fixed window aligned to the epoch is counted with a short script rather than rate-limiter-flexible, whose windows
 * start at each key's first request and would give each node's clients a different reset than the one the relay's
 * headers promise.
 *
 * When Redis cannot be reached the request is let through (Kong's `fault_tolerant`): the budget protects capacity,
 * not funds, and a limiter outage must not stop custody. `failOpen: false` answers 503 instead. Either way the
 * request does not wait for a Redis that is down: a command is refused at once while the connection is down (no
 * offline queue), and while an outage is on only one request every `RETRY_EVERY_MILLIS` asks Redis again; the others
 * are let through (or refused) without asking. The outage is logged when it begins, once a minute while it lasts and
 * when it ends (OutageLog), not once a request. ioredis is loaded when the layer is built, so a deployment that counts
 * elsewhere never loads it.
 */
import { OutageLog, RateLimiter, Storage } from "@custody-relay/core"
import { type Cause, Clock, Effect, Layer } from "effect"

export interface RedisRateLimiterOptions {
  /** `redis://host:port/db` */
  readonly url: string
  /** Prefix of every key, so several deployments can share one Redis. `relay:rate:` by default. */
  readonly keyPrefix?: string
  /** Let requests through when Redis cannot be reached (true by default); false answers 503 instead. */
  readonly failOpen?: boolean
  /** How long a request waits for Redis's answer before the fault policy decides (DEFAULT_COMMAND_TIMEOUT_MILLIS). */
  readonly commandTimeoutMillis?: number
}

/** How long a count waits for Redis's answer by default. */
export const DEFAULT_COMMAND_TIMEOUT_MILLIS = 1_000

/** While Redis is unreachable, one request this often asks it again; the others are not counted, and do not wait. */
export const RETRY_EVERY_MILLIS = 1_000

/**
 * Adds each key's count (ARGV[2i-1]) to its window's counter, and returns every counter after its addition; a counter
 * that this addition created is set to expire when its window ends (ARGV[2i], epoch milliseconds). A turn's counts
 * come in one call (`RateLimiter.countedTogether`), every key of the turn in it: a single Redis serves that, a Redis
 * Cluster would refuse keys of different slots.
 */
const countInWindows = `local counts = {}
for i, key in ipairs(KEYS) do
  local added = tonumber(ARGV[2 * i - 1])
  local count = redis.call('INCRBY', key, added)
  if count == added then redis.call('PEXPIREAT', key, ARGV[2 * i]) end
  counts[i] = count
end
return counts`

export const layerRedis = (options: RedisRateLimiterOptions): Layer.Layer<RateLimiter.RateLimiter> =>
  Layer.effect(
    RateLimiter.RateLimiter,
    Effect.gen(function*() {
      const { Redis } = yield* Effect.promise(() => import("ioredis"))
      const client = yield* Effect.acquireRelease(
        Effect.sync(() =>
          new Redis(options.url, {
            // A request waits at most `commandTimeoutMillis` for Redis, for no retry, and not at all while the
            // connection is down (no offline queue, where a command would wait for the next reconnection to fail):
            // then the fault policy decides.
            maxRetriesPerRequest: 0,
            enableOfflineQueue: false,
            commandTimeout: options.commandTimeoutMillis ?? DEFAULT_COMMAND_TIMEOUT_MILLIS,
            connectTimeout: 2_000
          })
        ),
        (redis) => Effect.promise(() => redis.quit().catch(() => "closed"))
      )
      // An unreachable Redis is reported through the fault policy's outage log, not as an unhandled event.
      client.on("error", () => undefined)
      // Start counting once connected; a Redis that is down at start is no reason not to start (fault policy).
      yield* Effect.promise(() =>
        new Promise<void>((resolve) => {
          if (client.status === "ready") return resolve()
          client.once("ready", () => resolve())
          client.once("error", () => resolve())
        })
      )
      const prefix = options.keyPrefix ?? "relay:rate:"
      const failOpen = options.failOpen ?? true
      const count = RateLimiter.countedTogether(
        (windows) =>
          Effect.tryPromise(() =>
            client.eval(
              countInWindows,
              windows.length,
              ...windows.map((window) => `${prefix}${window.key}:${window.windowStart}`),
              ...windows.flatMap((window) => [String(window.added), String(window.windowEnd)])
            )
          ).pipe(Effect.map((totals) => (totals as ReadonlyArray<unknown>).map(Number))),
        { atTurnEnd: setImmediate }
      )
      const meanwhile = failOpen ? "requests are let through uncounted" : "requests are refused (503)"
      const outage = OutageLog.make({
        began: `rate limit: Redis is unreachable; ${meanwhile}`,
        continues: `rate limit: Redis is still unreachable; ${meanwhile}`,
        ended: "rate limit: counting in Redis again"
      })
      /** While an outage is on: whether a request is asking Redis again, and when the next may. */
      let asking = false
      let nextAskAtMillis = 0
      let lastCause: unknown
      const notCounted = () =>
        failOpen
          ? Effect.succeed(0)
          : Effect.die(new Storage.StorageError({ reason: new Storage.StorageUnavailable({ message: "the rate limiter's Redis is unreachable", cause: lastCause }) }))
      const unreachable = (error: Cause.UnknownError) =>
        Effect.flatMap(Clock.currentTimeMillis, (failedAtMillis) => {
          lastCause = error.cause
          nextAskAtMillis = failedAtMillis + RETRY_EVERY_MILLIS
          return Effect.andThen(outage.failed({ level: "Warn", detail: String(error.cause) }), notCounted())
        })
      return RateLimiter.RateLimiter.of({
        consume: Effect.fnUntraced(function*(key: string, policy: RateLimiter.RateLimitPolicy) {
          const nowMillis = yield* Clock.currentTimeMillis
          const { windowStart, resetAt } = RateLimiter.windowOf(nowMillis, policy.windowSeconds)
          if (!outage.isOn()) {
            return RateLimiter.decide(yield* Effect.catch(count(key, windowStart, resetAt * 1000), unreachable), policy, resetAt, nowMillis)
          }
          if (asking || nowMillis < nextAskAtMillis) return RateLimiter.decide(yield* notCounted(), policy, resetAt, nowMillis)
          asking = true
          const total = yield* count(key, windowStart, resetAt * 1000).pipe(
            Effect.tap(() => outage.succeeded),
            Effect.catch(unreachable),
            Effect.ensuring(Effect.sync(() => {
              asking = false
            }))
          )
          return RateLimiter.decide(total, policy, resetAt, nowMillis)
        })
      })
    })
  )
