/**
 * The rate limiter on Redis (RELAY_TEST_REDIS_URL; skipped, saying so, where it is unset; CI sets it): one budget
 * per key across nodes (LIM-RATE-1), other keys untouched (LIM-RATE-3), the window resetting when it ends, and an
 * unreachable Redis letting requests through (or answering 503 when told to fail closed). The counts a node takes in
 * one turn of the event loop go to Redis in one call (`TurnCounts`), and stay exact: a property over turns of
 * requests from two nodes checks every count's place against a model.
 */
import { RateLimiter } from "@custody-relay/core"
import { Exit, type Layer, ManagedRuntime } from "effect"
import * as fc from "fast-check"
import { Redis } from "ioredis"
import { afterAll, assert, describe, it } from "vitest"
import { layerRedis } from "../src/index.js"

const url = process.env["RELAY_TEST_REDIS_URL"]
if (url === undefined || url === "") console.log("RedisRateLimiter: skipped, RELAY_TEST_REDIS_URL is not set")
const prefix = `relay-test:${process.pid}:${Date.now()}:`
const runtimes: Array<ManagedRuntime.ManagedRuntime<RateLimiter.RateLimiter, never>> = []
const node = (options: Partial<Parameters<typeof layerRedis>[0]> = {}) => {
  const runtime = ManagedRuntime.make(layerRedis({ url: url ?? "", keyPrefix: prefix, ...options }) as Layer.Layer<RateLimiter.RateLimiter>)
  runtimes.push(runtime)
  return (key: string, limit: number, windowSeconds = 60) => runtime.runPromise(RateLimiter.RateLimiter.use((limiter) => limiter.consume(key, { limit, windowSeconds })))
}

/**
 * Runs a burst until all its answers fall in one window, at most three times. Windows are aligned to the epoch, so a
 * burst that starts just before a window ends straddles two, and its later requests are rightly served again; each
 * attempt takes a fresh key.
 */
const inOneWindow = async <A extends { readonly resetAt: number }>(burst: (key: string) => Promise<ReadonlyArray<A>>) => {
  for (let attempt = 1; ; attempt += 1) {
    const answers = await burst(`crk_${crypto.randomUUID()}`)
    if (new Set(answers.map((answer) => answer.resetAt)).size === 1 || attempt === 3) return answers
  }
}

afterAll(async () => {
  for (const runtime of runtimes) await runtime.dispose()
  if (url === undefined || url === "") return
  const redis = new Redis(url)
  const keys = await redis.keys(`${prefix}*`)
  if (keys.length > 0) await redis.del(...keys)
  await redis.quit()
})

describe.skipIf(url === undefined || url === "")("RateLimiter on Redis", () => {
  it("LIM-RATE-1 LIM-RATE-3: two nodes share one budget per key; another key keeps its own", async () => {
    const [a, b] = [node(), node()]
    const answers = await inOneWindow(async (key) => {
      const burst = []
      for (let i = 0; i < 3; i += 1) burst.push(await a(key, 5), await b(key, 5))
      return burst
    })
    assert.deepStrictEqual(answers.map((answer) => answer.allowed), [true, true, true, true, true, false])
    assert.deepStrictEqual(answers.map((answer) => answer.remaining), [4, 3, 2, 1, 0, 0])
    const last = answers[5]!
    assert.isAtLeast(last.retryAfterSeconds, 1)
    assert.strictEqual(last.resetAt % 60, 0)
    assert.isTrue((await b("crk_other", 5)).allowed)
  })

  it("a key is served again in the next window (windows aligned to the epoch, as every node computes them)", async () => {
    const a = node()
    let key = ""
    const [, limited] = await inOneWindow(async (fresh) => {
      key = fresh
      return [await a(key, 1, 1), await a(key, 1, 1)]
    })
    if (limited === undefined || limited.allowed) return assert.fail("the second request of a 1-per-second window was allowed")
    await new Promise((resolve) => setTimeout(resolve, limited.retryAfterSeconds * 1000 + 50))
    assert.isTrue((await a(key, 1, 1)).allowed)
  })

  it("an unreachable Redis lets requests through by default, and is a StorageError (503) when told to fail closed", async () => {
    const open = node({ url: "redis://127.0.0.1:1" })
    assert.isTrue((await open("crk_any", 1)).allowed)
    assert.isTrue((await open("crk_any", 1)).allowed)
    const runtime = ManagedRuntime.make(layerRedis({ url: "redis://127.0.0.1:1", failOpen: false }) as Layer.Layer<RateLimiter.RateLimiter>)
    runtimes.push(runtime)
    const exit = await runtime.runPromiseExit(RateLimiter.RateLimiter.use((limiter) => limiter.consume("crk_any", { limit: 1, windowSeconds: 60 })))
    assert.isTrue(Exit.isFailure(exit))
    assert.include(JSON.stringify(exit), "StorageUnavailable")
  })

  it("LIM-RATE-1 LIM-RATE-3: the counts a node takes in one turn go to Redis in one call, each key's in the order they were asked for", async () => {
    const a = node()
    await a("crk_warm", 1)
    const watcher = new Redis(url ?? "")
    const fencer = watcher.duplicate()
    const monitor = await watcher.monitor()
    const calls: Array<string> = []
    const fence = `${prefix}fence:${crypto.randomUUID()}`
    let fenced: () => void = () => undefined
    monitor.on("monitor", (_time: string, args: ReadonlyArray<string>) => {
      if (args[0] === "echo" && args[1] === fence) fenced()
      else if (args[0] === "eval" && args.some((arg) => arg.startsWith(prefix))) calls.push(args.join(" "))
    })
    try {
      const answers = await inOneWindow(async (key) => {
        calls.length = 0
        const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => a(i % 2 === 0 ? key : `${key}:other`, 100)))
        // MONITOR shows commands in the order Redis ran them: once the fence shows, every call of the burst has.
        await new Promise<void>((resolve) => {
          fenced = resolve
          void fencer.echo(fence)
        })
        return burst
      })
      assert.strictEqual(calls.length, 1, `one call for the turn's 20 counts, not:\n${calls.join("\n")}`)
      const remaining = (parity: number) => answers.filter((_, i) => i % 2 === parity).map((answer) => answer.remaining)
      assert.deepStrictEqual(remaining(0), [99, 98, 97, 96, 95, 94, 93, 92, 91, 90])
      assert.deepStrictEqual(remaining(1), [99, 98, 97, 96, 95, 94, 93, 92, 91, 90])
    } finally {
      watcher.disconnect()
      fencer.disconnect()
    }
  })

  it("LIM-RATE-1: counts taken in turns by two nodes are exact: each key allows exactly its limit, every count in its own place", async () => {
    const nodes = [node(), node()] as const
    const request = fc.record({ node: fc.constantFrom(0 as const, 1 as const), key: fc.integer({ min: 0, max: 2 }) })
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 6 }), fc.array(fc.array(request, { minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 5 }), async (limit, turns) => {
        const run = crypto.randomUUID()
        const answers: Array<{ readonly turn: number; readonly node: number; readonly key: number; readonly allowed: boolean; readonly remaining: number; readonly resetAt: number }> = []
        for (const [turn, requests] of turns.entries()) {
          const answered = await Promise.all(requests.map((r) => nodes[r.node](`crk_${run}:${r.key}`, limit, 86_400)))
          answered.forEach((answer, i) => answers.push({ turn, ...requests[i]!, ...answer }))
        }
        // A run that straddles two windows is rightly counted in both; the model is one window's.
        if (new Set(answers.map((answer) => answer.resetAt)).size > 1) return
        for (const key of [0, 1, 2]) {
          const mine = answers.filter((answer) => answer.key === key)
          const allowed = mine.filter((answer) => answer.allowed)
          assert.strictEqual(allowed.length, Math.min(limit, mine.length))
          assert.deepStrictEqual(allowed.map((answer) => answer.remaining).sort((x, y) => y - x), allowed.map((_, i) => limit - 1 - i))
          // A count asked for after another (a later turn, or later in the same node's turn) takes a later place.
          allowed.forEach((later, j) =>
            allowed.slice(0, j).forEach((earlier) => {
              if (earlier.turn < later.turn || earlier.node === later.node) assert.isAbove(earlier.remaining, later.remaining)
            })
          )
        }
      }),
      { numRuns: 25 }
    )
  })

  it("an unreachable Redis lets every request of a turn through", async () => {
    const open = node({ url: "redis://127.0.0.1:1" })
    const answers = await Promise.all(Array.from({ length: 5 }, () => open("crk_any", 1)))
    assert.deepStrictEqual(answers.map((answer) => answer.allowed), [true, true, true, true, true])
  })
})
