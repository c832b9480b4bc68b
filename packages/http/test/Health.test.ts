/**
 * The supervisor's probes (Health.ts): live and ready without a credential, under the base path, never rate limited;
 * ready answers 503 with Retry-After while the storage cannot answer, and live stays 200.
 */
import { Relay, RateLimiter, Storage } from "@custody-relay/core"
import { Effect, Layer } from "effect"
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
