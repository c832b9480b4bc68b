/**
 * Which rate-limit policy applies to which API key (LIM-RATE-1, LIM-RATE-2): a deployment default, fixed
 * overrides per key id, and keys the test control protocol created while it had set another policy ("applies to
 * API users created afterwards"). Counting itself is the core's RateLimiter port, so several nodes share budgets
 * when they share a store.
 */
import type { RateLimiter } from "@custody-relay/core"

export interface RateLimitOptions extends RateLimiter.RateLimitPolicy {
  /** Policies for particular key ids, e.g. a partner with a higher budget. */
  readonly perKey?: Readonly<Record<string, RateLimiter.RateLimitPolicy>>
}

export const DEFAULT_POLICY: RateLimiter.RateLimitPolicy = { limit: 600, windowSeconds: 60 }

export interface RateLimitPolicies {
  readonly deploymentDefault: RateLimiter.RateLimitPolicy
  readonly policyFor: (keyId: string) => RateLimiter.RateLimitPolicy
  /** The policy keys created from now on get (the control protocol's PUT /rate-limit). */
  readonly setPolicyForNewKeys: (policy: RateLimiter.RateLimitPolicy) => void
  /** Pins the current policy for new keys to `keyId` (called when the control protocol creates a key). */
  readonly assignToNewKey: (keyId: string) => void
}

export const make = (options: RateLimitOptions | undefined): RateLimitPolicies => {
  const deploymentDefault: RateLimiter.RateLimitPolicy = options === undefined
    ? DEFAULT_POLICY
    : { limit: options.limit, windowSeconds: options.windowSeconds }
  const configured = new Map(Object.entries(options?.perKey ?? {}))
  const assigned = new Map<string, RateLimiter.RateLimitPolicy>()
  let forNewKeys = deploymentDefault
  return {
    deploymentDefault,
    policyFor: (keyId) => configured.get(keyId) ?? assigned.get(keyId) ?? deploymentDefault,
    setPolicyForNewKeys: (policy) => {
      forNewKeys = policy
    },
    assignToNewKey: (keyId) => {
      if (forNewKeys !== deploymentDefault) assigned.set(keyId, forNewKeys)
    }
  }
}

/** The X-RateLimit-* headers of an authenticated answer. */
export const headers = (decision: RateLimiter.RateLimitDecision): Record<string, string> => ({
  "x-ratelimit-limit": String(decision.limit),
  "x-ratelimit-remaining": String(decision.remaining),
  "x-ratelimit-reset": String(decision.resetAt)
})
