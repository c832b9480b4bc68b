/**
 * The RateLimiter port: a fixed-window request budget per API key (LIM-RATE-1, LIM-RATE-3). Windows are aligned
 * to multiples of their length since the Unix epoch, so every node computes the same window and reset time.
 * `layerMemory` counts in-process; a store shared by several nodes (the SQL adapter's) counts in the database.
 */
import { Clock, Context, Effect, Layer } from "effect"

export interface RateLimitPolicy {
  readonly limit: number
  readonly windowSeconds: number
}

export interface RateLimitDecision {
  readonly allowed: boolean
  readonly limit: number
  readonly remaining: number
  /** Unix time, in seconds, when the current window ends. */
  readonly resetAt: number
  /** Whole seconds until the window ends (at least 1). */
  readonly retryAfterSeconds: number
}

export class RateLimiter extends Context.Service<RateLimiter, {
  /** Counts one request against `key`'s budget and says whether it is allowed. */
  readonly consume: (key: string, policy: RateLimitPolicy) => Effect.Effect<RateLimitDecision>
}>()("@custody-relay/core/RateLimiter") {
  static readonly layerMemory: Layer.Layer<RateLimiter> = Layer.effect(
    RateLimiter,
    Effect.sync(() => {
      const windows = new Map<string, { readonly windowStart: number; count: number }>()
      return RateLimiter.of({
        consume: (key, policy) =>
          Effect.map(Clock.currentTimeMillis, (nowMillis) => {
            const { resetAt, windowStart } = windowOf(nowMillis, policy.windowSeconds)
            let window = windows.get(key)
            if (window === undefined || window.windowStart !== windowStart) {
              window = { windowStart, count: 0 }
              windows.set(key, window)
            }
            window.count++
            return decide(window.count, policy, resetAt, nowMillis)
          })
      })
    })
  )
}

export const windowOf = (nowMillis: number, windowSeconds: number) => {
  const windowMillis = windowSeconds * 1000
  const windowStart = Math.floor(nowMillis / windowMillis) * windowMillis
  return { windowStart, resetAt: (windowStart + windowMillis) / 1000 }
}

/** The decision for the `count`-th request of a window: shared by every limiter store. */
export const decide = (count: number, policy: RateLimitPolicy, resetAt: number, nowMillis: number): RateLimitDecision => ({
  allowed: count <= policy.limit,
  limit: policy.limit,
  remaining: Math.max(0, policy.limit - count),
  resetAt,
  retryAfterSeconds: Math.max(1, Math.ceil(resetAt - nowMillis / 1000))
})
