/**
 * The RateLimiter port: a fixed-window request budget per API key (LIM-RATE-1, LIM-RATE-3). Windows are aligned
 * to multiples of their length since the Unix epoch, so every node computes the same window and reset time.
 * `layerMemory` counts in-process; a store shared by several nodes (the SQL adapter's database, Redis) counts there,
 * a turn's counts together (`countedTogether`).
 */
import { Clock, Context, Effect, Exit, Layer, Schema } from "effect"

export interface RateLimitPolicy {
  readonly limit: number
  readonly windowSeconds: number
}

/** A policy as it is kept (an API user's own budget, and the events that change it): its two whole numbers. */
export const RateLimitPolicy = Schema.Struct({ limit: Schema.Int, windowSeconds: Schema.Int })

/** The largest budget a policy grants in one window. */
export const MAX_LIMIT = 1_000_000_000
/** The longest window a policy counts in: a day. */
export const MAX_WINDOW_SECONDS = 86_400

/**
 * A policy as an operator or an embedder gives it: whole numbers, at least 1, at most MAX_LIMIT requests in a window
 * of at most MAX_WINDOW_SECONDS. Every store counts such a policy alike (a fractional, zero or non-finite number
 * would make one store refuse every request and another refuse none).
 */
export const RateLimitPolicyInput = Schema.Struct({
  limit: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_LIMIT })),
  windowSeconds: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_WINDOW_SECONDS }))
})

export interface RateLimitDecision {
  readonly allowed: boolean
  readonly limit: number
  readonly remaining: number
  /** Unix time, in seconds, when the current window ends. */
  readonly resetAt: number
  /** Whole seconds until the window ends (at least 1). */
  readonly retryAfterSeconds: number
  /**
   * The requests the window has counted, this one included, where the store says (every store here does, through
   * `decide`): what a second run of the same request is decided on (the HTTP handler's RateLimitPolicies.countAgain).
   */
  readonly count?: number
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
  retryAfterSeconds: Math.max(1, Math.ceil(resetAt - nowMillis / 1000)),
  count
})

/** The counts one turn took in one window of one key, for a shared store to add in one go. */
export interface WindowCounts {
  readonly key: string
  readonly windowStart: number
  /** When the window ends, in epoch milliseconds: when a store may forget its counter. */
  readonly windowEnd: number
  readonly added: number
}

/**
 * Counts taken in one turn of the event loop, added to a shared store together when the turn ends (`atTurnEnd`,
 * node's `setImmediate`): a performance measure, measured in docs/benchmarks.md (section "a turn's rate-limit counts
 * in one call"). A count in a store other nodes share is a call to it (a Redis command: about 16 to 20 µs of the
 * relay's CPU in ioredis; a database statement and its commit), and a turn that handles several requests pays for
 * one instead of one each. Counts stay exact, as one call per count would give them: `add` raises every window's
 * counter by its `added` atomically and returns each new total, in the order given, and a window's counts take the
 * places below its new total in the order they were asked for. A failed `add` fails every count of its call.
 *
 * `oneCallAtATime` keeps at most one call out: counts taken while it is out wait for it and go together in the next
 * call, sent as soon as it returns. That pays where a call is dear and slow (a database's upsert and its commit: a
 * quarter more reads a second, measured), not where it is cheap and quick (Redis, where the wait cost more than it
 * saved). A store that uses it bounds its `add` in time: a call whose answer never comes would otherwise hold every
 * later count.
 */
export const countedTogether = <E>(
  add: (windows: ReadonlyArray<WindowCounts>) => Effect.Effect<ReadonlyArray<number>, E>,
  options: { readonly atTurnEnd: (send: () => void) => void; readonly oneCallAtATime?: boolean }
): ((key: string, windowStart: number, windowEnd: number) => Effect.Effect<number, E>) => {
  type Taken = (count: Effect.Effect<number, E>) => void
  let waiting = new Map<string, { readonly key: string; readonly windowStart: number; readonly windowEnd: number; readonly taken: Array<Taken> }>()
  let callsOut = 0
  const send = (): void => {
    if (waiting.size === 0 || (options.oneCallAtATime === true && callsOut > 0)) return
    const call = [...waiting.values()]
    waiting = new Map()
    callsOut++
    const windows = call.map(({ key, windowStart, windowEnd, taken }) => ({ key, windowStart, windowEnd, added: taken.length }))
    Effect.runCallback(add(windows), {
      onExit: (exit) => {
        callsOut--
        call.forEach(({ taken }, i) => {
          if (Exit.isFailure(exit)) return taken.forEach((resume) => resume(Effect.failCause(exit.cause)))
          const total = exit.value[i]
          if (total === undefined) return taken.forEach((resume) => resume(Effect.die(new Error(`the store returned ${exit.value.length} totals for ${call.length} windows`))))
          taken.forEach((resume, place) => resume(Effect.succeed(total - taken.length + 1 + place)))
        })
        // What gathered while this call was out.
        send()
      }
    })
  }
  return (key, windowStart, windowEnd) =>
    Effect.callback<number, E>((resume) => {
      if (waiting.size === 0) options.atTurnEnd(send)
      const id = `${windowStart} ${key}`
      const window = waiting.get(id)
      if (window === undefined) waiting.set(id, { key, windowStart, windowEnd, taken: [resume] })
      else window.taken.push(resume)
    })
}
