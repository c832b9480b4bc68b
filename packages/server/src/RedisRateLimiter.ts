/**
 * The RateLimiter port on Redis: one budget per API key shared by every node, without a write to the database on
 * each request. Each request is one atomic `INCR` of the key's window (windows aligned as `RateLimiter.windowOf`,
 * so every node agrees on the count and the reset), the key expiring with its window.
 *
 * The choices follow Kong's rate-limiting policies: `memory` (Kong's local: exact per node, a client spread over N
 * nodes gets up to N times its budget), `database` (cluster: exact across nodes, a write per request), `synced`
 * (cluster with a sync rate: counted locally, reconciled with the database on an interval; storage-sql's
 * SqlRateLimiter) and `redis` (exact across nodes, one Redis round trip per request). A fixed window aligned to the epoch is counted
 * with a three-line script rather than rate-limiter-flexible, whose windows start at each key's first request and
 * would give each node's clients a different reset than the one the relay's headers promise.
 *
 * When Redis cannot be reached the request is let through and a warning logged (Kong's `fault_tolerant`): the
 * budget protects capacity, not funds, and a limiter outage must not stop custody. `failOpen: false` answers 503
 * instead. ioredis is loaded when the layer is built, so a deployment that counts elsewhere never loads it.
 */
import { RateLimiter, Storage } from "@custody-relay/core"
import { Clock, Effect, Layer } from "effect"

export interface RedisRateLimiterOptions {
  /** `redis://host:port/db` */
  readonly url: string
  /** Prefix of every key, so several deployments can share one Redis. `relay:rate:` by default. */
  readonly keyPrefix?: string
  /** Let requests through when Redis cannot be reached (true by default); false answers 503 instead. */
  readonly failOpen?: boolean
}

/** INCR the window's counter; the first request of a window sets it to expire when the window ends. */
const countInWindow = "local count = redis.call('INCR', KEYS[1]) if count == 1 then redis.call('PEXPIREAT', KEYS[1], ARGV[1]) end return count"

export const layerRedis = (options: RedisRateLimiterOptions): Layer.Layer<RateLimiter.RateLimiter> =>
  Layer.effect(
    RateLimiter.RateLimiter,
    Effect.gen(function*() {
      const { Redis } = yield* Effect.promise(() => import("ioredis"))
      const client = yield* Effect.acquireRelease(
        Effect.sync(() =>
          new Redis(options.url, {
            // A request waits at most a second for Redis (and for no retry): then the fault policy decides.
            maxRetriesPerRequest: 0,
            commandTimeout: 1_000,
            connectTimeout: 2_000
          })
        ),
        (redis) => Effect.promise(() => redis.quit().catch(() => "closed"))
      )
      // An unreachable Redis is reported on each request by the fault policy, not as an unhandled event.
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
      return RateLimiter.RateLimiter.of({
        consume: Effect.fnUntraced(function*(key: string, policy: RateLimiter.RateLimitPolicy) {
          const nowMillis = yield* Clock.currentTimeMillis
          const { windowStart, resetAt } = RateLimiter.windowOf(nowMillis, policy.windowSeconds)
          const counted = yield* Effect.tryPromise(() => client.eval(countInWindow, 1, `${prefix}${key}:${windowStart}`, String(resetAt * 1000))).pipe(
            Effect.map(Number),
            Effect.catch((error) =>
              failOpen
                ? Effect.as(Effect.logWarning("rate limit not counted: Redis is unreachable; the request is let through", String(error.cause)), 0)
                : Effect.die(new Storage.StorageError({ reason: new Storage.StorageUnavailable({ message: "the rate limiter's Redis is unreachable", cause: error.cause }) }))
            )
          )
          return RateLimiter.decide(counted, policy, resetAt, nowMillis)
        })
      })
    })
  )
