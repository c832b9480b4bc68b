import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit } from "effect"
import * as fc from "fast-check"
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

/**
 * `countedTogether`, with the turn's end in the test's hands and a store that adds as Redis or the database would: a
 * turn's counts reach the store in one `add`, and every count gets the place one call per count would have given it.
 */
describe("RateLimiter.countedTogether", () => {
  const world = (options: { readonly oneCallAtATime?: boolean } = {}) => {
    const totals = new Map<string, number>()
    const adds: Array<ReadonlyArray<RateLimiter.WindowCounts>> = []
    let turnEnds: Array<() => void> = []
    let failWith: string | undefined
    // While held, a call waits for `release`, as a slow store's would.
    let held: Deferred.Deferred<void> | undefined
    let calls = 0
    const count = RateLimiter.countedTogether(
      (windows) =>
        Effect.andThen(Effect.sync(() => calls++), held === undefined ? Effect.void : Deferred.await(held)).pipe(Effect.andThen(() => {
          adds.push(windows)
          if (failWith !== undefined) return Effect.fail(failWith)
          return Effect.succeed(windows.map((w) => {
            const total = (totals.get(`${w.windowStart} ${w.key}`) ?? 0) + w.added
            totals.set(`${w.windowStart} ${w.key}`, total)
            return total
          }))
        })),
      { atTurnEnd: (send) => turnEnds.push(send), ...options }
    )
    const endTurn = () => {
      const due = turnEnds
      turnEnds = []
      for (const send of due) send()
    }
    return {
      count,
      adds,
      endTurn,
      fail: (error: string) => (failWith = error),
      turnEnds: () => turnEnds.length,
      calls: () => calls,
      hold: () => (held = Deferred.makeUnsafe<void>()),
      release: () => {
        const release = held
        held = undefined
        if (release !== undefined) Deferred.doneUnsafe(release, Exit.void)
      }
    }
  }

  it("LIM-RATE-1 LIM-RATE-3: a turn's counts are one add, each key's places in the order they were asked for", async () => {
    const { count, adds, endTurn, turnEnds } = world()
    const asked = ["a", "b", "a", "a", "b"].map((key) => Effect.runPromise(count(key, 60_000, 120_000)))
    assert.strictEqual(turnEnds(), 1)
    endTurn()
    assert.deepStrictEqual(await Promise.all(asked), [1, 1, 2, 3, 2])
    assert.deepStrictEqual(adds, [[{ key: "a", windowStart: 60_000, windowEnd: 120_000, added: 3 }, { key: "b", windowStart: 60_000, windowEnd: 120_000, added: 2 }]])
    const next = [Effect.runPromise(count("a", 60_000, 120_000)), Effect.runPromise(count("a", 120_000, 180_000))]
    endTurn()
    assert.deepStrictEqual(await Promise.all(next), [4, 1])
    assert.strictEqual(adds.length, 2)
  })

  it("LIM-RATE-1: one call at a time: the counts of turns that end while a call is out go together when it returns", async () => {
    const { calls, count, adds, endTurn, hold, release } = world({ oneCallAtATime: true })
    hold()
    const first = Effect.runPromise(count("a", 0, 60_000))
    endTurn()
    await new Promise((resolve) => setTimeout(resolve, 10))
    const later = ["a", "b"].map((key) => Effect.runPromise(count(key, 0, 60_000)))
    endTurn()
    const last = Effect.runPromise(count("a", 0, 60_000))
    endTurn()
    await new Promise((resolve) => setTimeout(resolve, 10))
    assert.strictEqual(calls(), 1, "no second call while the first is out")
    release()
    assert.deepStrictEqual(await Promise.all([first, ...later, last]), [1, 2, 1, 3])
    assert.deepStrictEqual(adds.map((call) => call.map((w) => [w.key, w.added])), [[["a", 1]], [["a", 2], ["b", 1]]])
  })

  it("a failed add fails every count of its turn, and the next turn counts again", async () => {
    const { count, endTurn, fail } = world()
    fail("unreachable")
    const failed = [Effect.runPromiseExit(count("a", 0, 60_000)), Effect.runPromiseExit(count("b", 0, 60_000))]
    endTurn()
    for (const exit of await Promise.all(failed)) assert.deepStrictEqual(exit, Exit.fail("unreachable"))
  })

  it("LIM-RATE-1: over any turns, every count's place is the one counting one at a time gives it (property)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.boolean(), fc.array(fc.array(fc.record({ key: fc.constantFrom("a", "b", "c"), window: fc.integer({ min: 0, max: 1 }) }), { minLength: 1, maxLength: 10 }), { maxLength: 6 }), async (oneCallAtATime, turns) => {
        const { count, adds, endTurn } = world({ oneCallAtATime })
        const oneAtATime = new Map<string, number>()
        for (const turn of turns) {
          const asked = turn.map(({ key, window }) => Effect.runPromise(count(key, window * 60_000, (window + 1) * 60_000)))
          endTurn()
          const expected = turn.map(({ key, window }) => {
            const place = (oneAtATime.get(`${window} ${key}`) ?? 0) + 1
            oneAtATime.set(`${window} ${key}`, place)
            return place
          })
          assert.deepStrictEqual(await Promise.all(asked), expected)
        }
        assert.strictEqual(adds.length, turns.length)
      })
    )
  })
})
