/**
 * The rate limiter on Redis (RELAY_TEST_REDIS_URL; skipped, saying so, where it is unset; CI sets it): one budget
 * per key across nodes (LIM-RATE-1), other keys untouched (LIM-RATE-3), the window resetting when it ends, and an
 * unreachable Redis letting requests through (or answering 503 when told to fail closed).
 */
import { RateLimiter } from "@custody-relay/core"
import { Exit, type Layer, ManagedRuntime } from "effect"
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
})
