/**
 * The rate limiter on Redis (RELAY_TEST_REDIS_URL; skipped, saying so, where it is unset; CI sets it): one budget
 * per key across nodes (LIM-RATE-1), other keys untouched (LIM-RATE-3), the window resetting when it ends, and an
 * unreachable Redis letting requests through (or answering 503 when told to fail closed). The counts a node takes in
 * one turn of the event loop go to Redis in one call (`TurnCounts`), and stay exact: a property over turns of
 * requests from two nodes checks every count's place against a model.
 */
import { connect, createServer, type Server, type Socket } from "node:net"
import { RateLimiter } from "@custody-relay/core"
import { Exit, Layer, ManagedRuntime } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { Redis } from "ioredis"
import { afterAll, assert, describe, it } from "vitest"
import { layerRedis, RETRY_EVERY_MILLIS } from "../src/index.js"
import { capturedLogs } from "../../core/test/CapturedLogs.js"
import { startServer } from "./ServerProcess.js"

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

/**
 * A TCP proxy to Redis that can hold Redis's replies back (`holdReplies`: a frozen server, a network that has stopped
 * passing packets; the commands still reach Redis and run) and can go away (`refuse`: every connection closed, new ones
 * refused, as while Redis restarts).
 */
const redisProxy = async (target: URL) => {
  /** Replies held back while holding, in order, each with the connection it goes to. */
  let held: Array<() => void> | undefined
  let server: Server | undefined
  const sockets = new Set<Socket>()
  const listen = (port: number) =>
    new Promise<number>((resolve) => {
      server = createServer((client) => {
        const upstream = connect(Number(target.port || 6379), target.hostname)
        sockets.add(client).add(upstream)
        client.on("data", (chunk: Buffer) => upstream.write(chunk))
        upstream.on("data", (chunk: Buffer) => {
          if (held === undefined) client.write(chunk)
          else held.push(() => client.write(chunk))
        })
        for (const [one, other] of [[client, upstream], [upstream, client]] as const) {
          one.on("error", () => other.destroy())
          one.on("close", () => other.destroy())
        }
      })
      server.listen(port, "127.0.0.1", () => {
        const address = server?.address()
        resolve(typeof address === "object" && address !== null ? address.port : 0)
      })
    })
  const port = await listen(0)
  return {
    url: `redis://127.0.0.1:${port}`,
    holdReplies: () => {
      held ??= []
    },
    refuse: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        sockets.clear()
        server?.close(() => resolve())
      }),
    /** Passes the held replies on, late, as a server that froze sends them when it thaws; accepts connections again. */
    restore: async () => {
      const replies = held ?? []
      held = undefined
      replies.forEach((reply) => reply())
      if (server?.listening !== true) await listen(port)
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        if (server?.listening === true) server.close(() => resolve())
        else resolve()
      })
  }
}

/** A node on `redisUrl` whose clock is a TestClock set to now, and the lines it logs. */
const nodeWithClock = (redisUrl: string, options: Partial<Parameters<typeof layerRedis>[0]> = {}) => {
  const { lines, layer: logging } = capturedLogs()
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(layerRedis({ url: redisUrl, keyPrefix: prefix, ...options }), TestClock.layer(), logging) as Layer.Layer<RateLimiter.RateLimiter | TestClock.TestClock>
  )
  runtimes.push(runtime as unknown as ManagedRuntime.ManagedRuntime<RateLimiter.RateLimiter, never>)
  return {
    lines,
    consume: (key: string) => runtime.runPromise(RateLimiter.RateLimiter.use((limiter) => limiter.consume(key, { limit: 1000, windowSeconds: 60 }))),
    setTime: (millis: number) => runtime.runPromise(TestClock.setTime(millis)),
    adjust: (millis: number) => runtime.runPromise(TestClock.adjust(millis))
  }
}

/**
 * A time for a node's clock whose 60 s window ends a full window after now in real time. Redis expires a window's key
 * at its end by its own clock: a node set to `Date.now()` near a minute's end saw its counts expire under the test.
 */
const windowAhead = () => Math.ceil(Date.now() / 60_000) * 60_000

/** What Redis itself counted for `key` (read beside the proxy, not through it). */
const countedInRedis = async (key: string) => {
  const redis = new Redis(url ?? "")
  try {
    const keys = await redis.keys(`${prefix}${key}:*`)
    const values = keys.length === 0 ? [] : await redis.mget(...keys)
    return values.reduce((total, value) => total + Number(value ?? 0), 0)
  } finally {
    await redis.quit()
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

  it("while Redis does not answer, one request a second asks it again and the others are let through without asking; the outage is logged once, and its end", async () => {
    const proxy = await redisProxy(new URL(url ?? ""))
    try {
      const node = nodeWithClock(proxy.url, { commandTimeoutMillis: 200 })
      await node.setTime(windowAhead())
      const key = `crk_${crypto.randomUUID()}`
      assert.isTrue((await node.consume(key)).allowed)
      proxy.holdReplies()
      // The first count after the hold waits for its answer until the command's timeout: the outage begins.
      assert.isTrue((await node.consume(key)).allowed)
      assert.strictEqual(await countedInRedis(key), 2)
      // Within the retry interval every request is let through at once, and none reaches Redis.
      const meanwhile = await Promise.all(Array.from({ length: 20 }, () => node.consume(key)))
      assert.deepStrictEqual(meanwhile.map((answer) => answer.allowed), meanwhile.map(() => true))
      assert.strictEqual(await countedInRedis(key), 2)
      // A second later, one request asks again (and still gets no answer); the others meanwhile do not.
      await node.adjust(RETRY_EVERY_MILLIS)
      const [asked, ...others] = await Promise.all(Array.from({ length: 5 }, () => node.consume(key)))
      assert.isTrue(asked?.allowed)
      assert.deepStrictEqual(others.map((answer) => answer.allowed), others.map(() => true))
      assert.strictEqual(await countedInRedis(key), 3)
      // Redis answers again: the next request that asks counts, and from then on every request does.
      await proxy.restore()
      await node.adjust(RETRY_EVERY_MILLIS)
      await node.consume(key)
      await node.consume(key)
      assert.strictEqual(await countedInRedis(key), 5)
      assert.deepStrictEqual(node.lines.map((line) => [line.level, Array.isArray(line.message) ? line.message[0] : line.message]), [
        ["WARN", "rate limit: Redis is unreachable; requests are let through uncounted"],
        ["INFO", "rate limit: counting in Redis again"]
      ])
    } finally {
      await proxy.close()
    }
  })

  it("while Redis refuses connections, requests are let through and the outage is logged once; counting resumes once it is back, and that is logged", async () => {
    const proxy = await redisProxy(new URL(url ?? ""))
    try {
      const node = nodeWithClock(proxy.url)
      await node.setTime(windowAhead())
      const key = `crk_${crypto.randomUUID()}`
      assert.isTrue((await node.consume(key)).allowed)
      await proxy.refuse()
      // Each asks Redis (the clock moves a retry interval between them), is refused at once, and is let through.
      for (let i = 0; i < 3; i++) {
        assert.isTrue((await node.consume(key)).allowed)
        await node.adjust(RETRY_EVERY_MILLIS)
      }
      await proxy.restore()
      let counted = 1
      // ioredis reconnects on its own schedule (at most 2 s apart): a request a retry interval asks until one counts.
      for (let attempt = 0; attempt < 400 && counted === 1; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 25))
        await node.adjust(RETRY_EVERY_MILLIS)
        await node.consume(key)
        counted = await countedInRedis(key)
      }
      assert.strictEqual(counted, 2)
      assert.deepStrictEqual(node.lines.map((line) => line.level), ["WARN", "INFO"])
    } finally {
      await proxy.close()
    }
  })

  it("the server's RELAY_REDIS_TIMEOUT_MILLIS and RELAY_REDIS_FAIL_OPEN reach its limiter: a count Redis does not answer is refused (503) once that wait has passed", async () => {
    const proxy = await redisProxy(new URL(url ?? ""))
    const server = await startServer({
      RELAY_DATABASE: ":memory:",
      RELAY_RATE_LIMIT_STORE: "redis",
      RELAY_REDIS_URL: proxy.url,
      RELAY_REDIS_TIMEOUT_MILLIS: "3000",
      RELAY_REDIS_FAIL_OPEN: "false"
    })
    try {
      const found = /initiator\s+x-api-key: (\S+)\s+x-api-secret: (\S+)/.exec(server.output())
      const headers = { "x-api-key": found?.[1] ?? "", "x-api-secret": found?.[2] ?? "" }
      const list = async () => {
        const started = performance.now()
        const response = await fetch(`${server.url}/relay/v1/accounts`, { headers })
        await response.arrayBuffer()
        return { status: response.status, retryAfter: response.headers.get("retry-after"), millis: performance.now() - started }
      }
      assert.strictEqual((await list()).status, 200)
      proxy.holdReplies()
      // Failing closed, the request is refused; it waited the configured 3 s, not the default 1 s, for Redis.
      const held = await list()
      assert.deepStrictEqual([held.status, held.retryAfter], [503, "1"])
      assert.isAtLeast(held.millis, 2_900)
    } finally {
      await server.stop("SIGKILL")
      await proxy.close()
    }
  }, 60_000)
})
