/**
 * The supervisor's probes (Health.ts): live and ready without a credential, under the base path, never rate limited;
 * ready answers 503 with Retry-After while the storage cannot answer, and live stays 200; a handler whose services
 * did not start answers every request 503, live too, and logs why.
 */
import { Relay, RateLimiter, Storage } from "@custody-relay/core"
import { Effect, Layer, Logger } from "effect"
import { describe, expect, it } from "vitest"
import { makeHandler } from "../src/index.js"
import { silentLogger } from "./RelayFixture.js"

const send = async (handler: ReturnType<typeof makeHandler>, method: string, path: string) => {
  const response = await handler(new Request(`http://relay.test${path}`, { method }))
  return { status: response.status, retryAfter: response.headers.get("retry-after"), text: await response.text() }
}

describe("health probes", () => {
  it("live and ready answer 200 without a credential, under the base path, by GET and HEAD, however often", async () => {
    const handler = makeHandler({ logger: silentLogger, basePath: "/custody", rateLimit: { limit: 2, windowSeconds: 60 } })
    try {
      for (let i = 0; i < 10; i++) {
        expect(await send(handler, "GET", "/custody/health/live")).toMatchObject({ status: 200, text: '{"status":"live"}' })
        expect(await send(handler, "GET", "/custody/health/ready")).toMatchObject({ status: 200, text: '{"status":"ready"}' })
      }
      expect(await send(handler, "HEAD", "/custody/health/ready")).toMatchObject({ status: 200, text: "" })
      // A command is not a probe, and outside the base path there is none.
      expect((await send(handler, "POST", "/custody/health/ready")).status).toBe(404)
      expect((await send(handler, "GET", "/health/ready")).status).toBe(404)
    } finally {
      await handler.dispose()
    }
  })

  it("ready is 503 with Retry-After while the storage cannot answer; live stays 200", async () => {
    let down = true
    const storage = Layer.effect(Storage.Storage, Effect.gen(function*() {
      const memory = yield* Storage.Storage
      return Storage.Storage.of({
        transaction: (mode, work) =>
          down
            ? Effect.fail(new Storage.StorageError({ reason: new Storage.StorageUnavailable({ message: "connect ECONNREFUSED", cause: new Error("ECONNREFUSED") }) }))
            : memory.transaction(mode, work)
      })
    })).pipe(Layer.provide(Storage.Storage.layerMemory))
    const handler = makeHandler({ logger: silentLogger, outbox: false, layer: Relay.layer(Layer.merge(storage, RateLimiter.RateLimiter.layerMemory)) })
    try {
      expect(await send(handler, "GET", "/health/ready")).toMatchObject({ status: 503, retryAfter: "1" })
      expect((await send(handler, "GET", "/health/live")).status).toBe(200)
      down = false
      expect((await send(handler, "GET", "/health/ready")).status).toBe(200)
    } finally {
      await handler.dispose()
    }
  })
})

describe("a handler whose services did not start", () => {
  it("is told through ready, logs the cause once as an error, and answers every request 503 with Retry-After, its liveness probe too, so a supervisor restarts it", async () => {
    const lines: Array<string> = []
    const logger = Logger.make((options) => {
      lines.push(Logger.formatJson.log(options))
    })
    // A storage that cannot start, as a database unreachable past its start-up bound is.
    const failing = Layer.effect(Storage.Storage, Effect.fail(new Error("connect ECONNREFUSED 127.0.0.1:5432"))) as unknown as Layer.Layer<Storage.Storage>
    const handler = makeHandler({ layer: Relay.layer(Layer.merge(failing, RateLimiter.RateLimiter.layerMemory)), logger })
    try {
      await expect(handler.ready).rejects.toBeDefined()
      for (const path of ["/relay/v1/accounts", "/health/live", "/health/ready"]) {
        const answer = await handler(new Request(`http://relay.test${path}`))
        expect(answer.status, path).toBe(503)
        expect(answer.headers.get("retry-after"), path).not.toBeNull()
        expect(((await answer.json()) as { code: string }).code).toBe("STORAGE_UNAVAILABLE")
      }
      const errors = lines.map((line) => JSON.parse(line) as { level: string; message: unknown; annotations: Record<string, unknown> }).filter((line) => line.level === "ERROR")
      expect(errors).toHaveLength(1)
      expect(String(errors[0]?.message)).toMatch(/the relay did not start/)
      expect(String(errors[0]?.annotations["error"])).toMatch(/ECONNREFUSED/)
    } finally {
      await handler.dispose()
    }
  })

  it("a request that arrives while the services are starting waits for them, and is answered 503 with Retry-After when they fail, not as a defect", async () => {
    // A storage whose start fails after a moment, as a database unreachable past its start-up bound does.
    const failing = Layer.effect(Storage.Storage, Effect.andThen(Effect.sleep(50), Effect.fail(new Error("connect ECONNREFUSED 127.0.0.1:5432")))) as unknown as Layer.Layer<Storage.Storage>
    const handler = makeHandler({ layer: Relay.layer(Layer.merge(failing, RateLimiter.RateLimiter.layerMemory)), logger: silentLogger })
    try {
      const early = [handler(new Request("http://relay.test/health/live")), handler(new Request("http://relay.test/relay/v1/accounts"))]
      await expect(handler.ready).rejects.toBeDefined()
      for (const answer of await Promise.all(early)) {
        expect(answer.status).toBe(503)
        expect(answer.headers.get("retry-after")).not.toBeNull()
      }
    } finally {
      await handler.dispose()
    }
  })
})
