/**
 * Which rate-limit policy applies to which API key (LIM-RATE-1, LIM-RATE-2): fixed overrides per key id from the
 * deployment's configuration, else the credential's own budget (kept with it in storage, so every node applies the
 * same: `ApiUser.rateLimit`, given at creation, by `Administration.setRateLimitForNewApiUsers` to API users created
 * after it, or later by `Administration.setRateLimit`), else
 * the deployment default. Counting itself is the core's RateLimiter port, so several nodes share budgets when they
 * share a store.
 */
import { EmbedderOptions, type Principal, RateLimiter } from "@custody-relay/core"
import { Clock, Effect } from "effect"

export interface RateLimitOptions extends RateLimiter.RateLimitPolicy {
  /** Policies for particular key ids, e.g. a partner with a higher budget. */
  readonly perKey?: Readonly<Record<string, RateLimiter.RateLimitPolicy>>
}

export const DEFAULT_POLICY: RateLimiter.RateLimitPolicy = { limit: 600, windowSeconds: 60 }

export interface RateLimitPolicies {
  readonly deploymentDefault: RateLimiter.RateLimitPolicy
  readonly policyFor: (principal: Principal.Principal) => RateLimiter.RateLimitPolicy
}

/** `policy` with each number checked: a RangeError naming the setting otherwise (core EmbedderOptions). */
const checked = (setting: string, policy: RateLimiter.RateLimitPolicy): RateLimiter.RateLimitPolicy => ({
  limit: EmbedderOptions.wholeNumber(`${setting}.limit`, policy.limit, 1, RateLimiter.MAX_LIMIT),
  windowSeconds: EmbedderOptions.wholeNumber(`${setting}.windowSeconds`, policy.windowSeconds, 1, RateLimiter.MAX_WINDOW_SECONDS)
})

/** The policies of `options` (an entry given as `undefined` keeps its default), each checked. */
export const make = (options: RateLimitOptions | undefined): RateLimitPolicies => {
  const deploymentDefault = checked("rateLimit", EmbedderOptions.overDefaults(DEFAULT_POLICY, options))
  const configured = new Map(Object.entries(options?.perKey ?? {}).map(([keyId, policy]) => [keyId, checked(`rateLimit.perKey[${keyId}]`, policy)]))
  return {
    deploymentDefault,
    policyFor: (principal) => configured.get(principal.keyId) ?? principal.rateLimit ?? deploymentDefault
  }
}

/**
 * A request's count against its key's budget: the decision and the policy it was made under, kept for a second run of
 * the same request. The core runs a request again when the API user it ran on changed meanwhile
 * (Authentication.onKept), and that run is the same request, not another one to count against the budget.
 */
export interface Counted {
  readonly policy: RateLimiter.RateLimitPolicy
  readonly decision: RateLimiter.RateLimitDecision
}

/**
 * The requests a decision counted in its window: its count, or for a store that does not say, what its headers tell
 * exactly (a request let through; one refused is over the limit by an amount they do not give).
 */
const countOf = (decision: RateLimiter.RateLimitDecision): number | undefined =>
  decision.count ?? (decision.allowed ? decision.limit - decision.remaining : undefined)

/**
 * The decision for a second run of the request `earlier` counted: on that count, under the policy the run has now (a
 * lowered limit applies at once), while the run falls in the same window; counted anew in a window of another length
 * or a later one, or when the count is not known.
 */
export const countAgain = (
  limiter: RateLimiter.RateLimiter["Service"],
  keyId: string,
  policy: RateLimiter.RateLimitPolicy,
  earlier: Counted
): Effect.Effect<RateLimiter.RateLimitDecision> =>
  Effect.flatMap(Clock.currentTimeMillis, (nowMillis) => {
    const { resetAt } = RateLimiter.windowOf(nowMillis, policy.windowSeconds)
    const count = countOf(earlier.decision)
    return count !== undefined && earlier.policy.windowSeconds === policy.windowSeconds && earlier.decision.resetAt === resetAt
      ? Effect.succeed(RateLimiter.decide(count, policy, resetAt, nowMillis))
      : limiter.consume(keyId, policy)
  })

/** The X-RateLimit-* headers of an authenticated answer. */
export const headers = (decision: RateLimiter.RateLimitDecision): Record<string, string> => ({
  "x-ratelimit-limit": String(decision.limit),
  "x-ratelimit-remaining": String(decision.remaining),
  "x-ratelimit-reset": String(decision.resetAt)
})
