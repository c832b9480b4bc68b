/**
 * LIM-RATE-1..3: a fixed-window budget per API key, counted by the core's RateLimiter port; X-RateLimit-* on every
 * authenticated answer, 429 with Retry-After past the limit, per-deployment and per-key limits, and the control
 * protocol's limit for keys created afterwards.
 */
import { describe, expect, it } from "vitest"
import { Ids, type Principal, RateLimiter } from "@custody-relay/core"
import { Clock, Effect } from "effect"
import * as RateLimitPolicies from "../src/RateLimitPolicies.js"
import { allPermissions, type Call, makeFixture, record } from "./RelayFixture.js"

describe("rate limits", () => {
  it("LIM-RATE-1 LIM-RATE-2 LIM-RATE-3: the limit+1-th request is 429 with the four headers; another key is unaffected", async () => {
    const fixture = makeFixture({ rateLimit: { limit: 3, windowSeconds: 60 } })
    try {
      const clientId = await fixture.createClient()
      // Windows are aligned to the epoch: a burst that straddles a window's end is tried again with a fresh key
      // (at most three times), since its later requests are rightly served from the next window's budget.
      let answers: Array<Call> = []
      for (let attempt = 1; attempt <= 3; attempt++) {
        const user = await fixture.createUser(clientId, allPermissions)
        answers = []
        for (let i = 0; i < 4; i++) answers.push(await fixture.as(user).get("/relay/v1/accounts"))
        if (new Set(answers.map((a) => a.headers.get("x-ratelimit-reset"))).size === 1) break
      }
      const second = await fixture.createUser(clientId, allPermissions)
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429])
      expect(answers.map((a) => a.headers.get("x-ratelimit-remaining"))).toEqual(["2", "1", "0", "0"])
      const limited = answers[3]
      if (limited === undefined) throw new Error("no answer")
      expect(limited.headers.get("x-ratelimit-limit")).toBe("3")
      const reset = Number(limited.headers.get("x-ratelimit-reset"))
      const now = Math.floor(Date.now() / 1000)
      expect(reset).toBeGreaterThan(now)
      expect(reset).toBeLessThanOrEqual(now + 60)
      expect(reset % 60).toBe(0)
      const retryAfter = Number(limited.headers.get("retry-after"))
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(60)
      expect(record(limited.body)["code"]).toBe("RATE_LIMITED")
      expect((await fixture.as(second).get("/relay/v1/accounts")).status).toBe(200)
    } finally {
      await fixture.dispose()
    }
  })

  it("LIM-RATE-1: refusals after authentication carry the headers too; 401s spend nobody's budget", async () => {
    const fixture = makeFixture({ rateLimit: { limit: 2, windowSeconds: 60 } })
    try {
      const clientId = await fixture.createClient()
      // As above: a run that straddles a window's end is tried again with a fresh key (at most three times), since
      // its last request is rightly served from the next window's budget.
      let denied: Call | undefined
      let last: Call | undefined
      for (let attempt = 1; attempt <= 3; attempt++) {
        const user = await fixture.createUser(clientId, [])
        denied = await fixture.as(user).get("/relay/v1/accounts")
        for (let i = 0; i < 5; i++) {
          await fixture.send("GET", "/relay/v1/accounts", { headers: { "x-api-key": user.keyId, "x-api-secret": "crs_wrong" } })
        }
        last = await fixture.as(user).get("/relay/v1/accounts")
        if (denied.headers.get("x-ratelimit-reset") === last.headers.get("x-ratelimit-reset")) break
      }
      expect(denied?.status).toBe(403)
      expect(denied?.headers.get("x-ratelimit-remaining")).toBe("1")
      // The second of two: had the wrong secrets spent the key's budget, it would be a 429.
      expect(last?.status).toBe(403)
      expect(last?.headers.get("x-ratelimit-remaining")).toBe("0")
    } finally {
      await fixture.dispose()
    }
  })

  it("LIM-RATE-2: a per-key limit overrides the credential's own budget, which overrides the deployment's", () => {
    const principal = (keyId: string, rateLimit?: { limit: number; windowSeconds: number }): Principal.Principal => ({
      apiUserId: Ids.ApiUserId.make("00000000-0000-7000-8000-000000000001"),
      clientId: null,
      name: "p",
      keyId,
      permissions: [],
      ...(rateLimit === undefined ? {} : { rateLimit })
    })
    const policies = RateLimitPolicies.make({ limit: 1000, windowSeconds: 60, perKey: { crk_partner: { limit: 7, windowSeconds: 10 } } })
    expect(policies.policyFor(principal("crk_partner", { limit: 3, windowSeconds: 5 }))).toEqual({ limit: 7, windowSeconds: 10 })
    expect(policies.policyFor(principal("crk_own", { limit: 3, windowSeconds: 5 }))).toEqual({ limit: 3, windowSeconds: 5 })
    expect(policies.policyFor(principal("crk_other"))).toEqual({ limit: 1000, windowSeconds: 60 })
    expect(RateLimitPolicies.make(undefined).policyFor(principal("crk_any"))).toEqual(RateLimitPolicies.DEFAULT_POLICY)
  })

  it("LIM-RATE-1: a request run a second time (its API user changed meanwhile) is decided on the count its first run took, under the budget it has now", async () => {
    let counts = 0
    const limiter: RateLimiter.RateLimiter["Service"] = {
      consume: (_key, policy) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          counts++
          const { resetAt } = RateLimiter.windowOf(now, policy.windowSeconds)
          return RateLimiter.decide(counts, policy, resetAt, now)
        })
    }
    // A day's window, so that every count here falls in one (unless the test runs across midnight UTC).
    const day = (limit: number) => ({ limit, windowSeconds: 86_400 })
    const run = <A>(effect: Effect.Effect<A>) => Effect.runPromise(effect)
    for (let n = 0; n < 3; n++) await run(limiter.consume("crk_a", day(3)))
    // The fourth request is refused; run again on a user whose budget was raised, it is let through on that count.
    const refused = await run(limiter.consume("crk_a", day(3)))
    expect([refused.allowed, refused.count]).toEqual([false, 4])
    const counted = { policy: day(3), decision: refused }
    const again = await run(RateLimitPolicies.countAgain(limiter, "crk_a", day(10), counted))
    expect([again.allowed, again.limit, again.remaining, counts]).toEqual([true, 10, 6, 4])
    // Run again under a lowered budget, the same count is refused.
    expect((await run(RateLimitPolicies.countAgain(limiter, "crk_a", day(2), counted))).allowed).toBe(false)
    expect(counts).toBe(4)
    // A window of another length is another window: counted there.
    await run(RateLimitPolicies.countAgain(limiter, "crk_a", { limit: 10, windowSeconds: 60 }, counted))
    expect(counts).toBe(5)
    // A store that does not say its count: a request let through tells it by its headers (decided on 2, nothing
    // counted), a refused one does not (counted anew).
    const { count: _, ...silent } = RateLimiter.decide(2, day(3), refused.resetAt, Date.now())
    expect((await run(RateLimitPolicies.countAgain(limiter, "crk_b", day(3), { policy: day(3), decision: silent }))).remaining).toBe(1)
    expect(counts).toBe(5)
    const { count: __, ...silentRefusal } = RateLimiter.decide(9, day(3), refused.resetAt, Date.now())
    await run(RateLimitPolicies.countAgain(limiter, "crk_b", day(3), { policy: day(3), decision: silentRefusal }))
    expect(counts).toBe(6)
  })

  it("LIM-RATE-2: the control protocol's PUT /rate-limit applies to API users created afterwards only", async () => {
    const fixture = makeFixture({ rateLimit: { limit: 1000, windowSeconds: 60 } })
    try {
      const clientId = await fixture.createClient()
      const before = await fixture.createUser(clientId, allPermissions)
      expect((await fixture.control("PUT", "/rate-limit", { limit: 5, windowSeconds: 30 })).status).toBe(200)
      const after = await fixture.createUser(clientId, allPermissions)
      await fixture.control("PUT", "/rate-limit", { limit: 1000, windowSeconds: 60 })
      const later = await fixture.createUser(clientId, allPermissions)
      expect((await fixture.as(before).get("/relay/v1/accounts")).headers.get("x-ratelimit-limit")).toBe("1000")
      expect((await fixture.as(after).get("/relay/v1/accounts")).headers.get("x-ratelimit-limit")).toBe("5")
      expect((await fixture.as(later).get("/relay/v1/accounts")).headers.get("x-ratelimit-limit")).toBe("1000")
      expect(record(record((await fixture.control("GET", "/profile")).body)["rateLimit"])).toEqual({ limit: 1000, windowSeconds: 60 })
    } finally {
      await fixture.dispose()
    }
  })
})
