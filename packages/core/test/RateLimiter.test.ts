import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { RateLimiter } from "@custody-relay/core"

describe("RateLimiter (memory)", () => {
  it.effect("LIM-RATE-1 LIM-RATE-3: a fixed window per key, with reset time and retry-after", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.RateLimiter
      const policy = { limit: 3, windowSeconds: 60 }
      yield* TestClock.adjust(125_000)
      const decisions = yield* Effect.all([1, 2, 3, 4].map(() => limiter.consume("key-a", policy)))
      assert.deepStrictEqual(decisions.map((d) => [d.allowed, d.remaining]), [[true, 2], [true, 1], [true, 0], [false, 0]])
      assert.strictEqual(decisions[3]!.resetAt, 180)
      assert.strictEqual(decisions[3]!.retryAfterSeconds, 55)
      assert.isTrue((yield* limiter.consume("key-b", policy)).allowed)
      yield* TestClock.adjust(55_000)
      const next = yield* limiter.consume("key-a", policy)
      assert.deepStrictEqual([next.allowed, next.remaining, next.resetAt], [true, 2, 240])
    }).pipe(Effect.provide(RateLimiter.RateLimiter.layerMemory)))
})
