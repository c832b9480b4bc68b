/**
 * Which rate-limit policy applies to which API key (LIM-RATE-1, LIM-RATE-2): fixed overrides per key id from the
 * deployment's configuration, else the credential's own budget (kept with it in storage, so every node applies the
 * same: `ApiUser.rateLimit`, given at creation, by `Administration.setRateLimitForNewApiUsers` to API users created
 * after it, or later by `Administration.setRateLimit`), else
 * the deployment default. Counting itself is the core's RateLimiter port, so several nodes share budgets when they
 * share a store.
 */
import { EmbedderOptions, type Principal, RateLimiter } from "@custody-relay/core"

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

/** The X-RateLimit-* headers of an authenticated answer. */
export const headers = (decision: RateLimiter.RateLimitDecision): Record<string, string> => ({
  "x-ratelimit-limit": String(decision.limit),
  "x-ratelimit-remaining": String(decision.remaining),
  "x-ratelimit-reset": String(decision.resetAt)
})
