/**
 * A relay handler in the bench's own process, quiet (no log output, no rate limit to speak of), seeded with the demo
 * data: what the benches that time the outbox worker run against. Dispose it when done.
 */
import type { OutboxWorker, Relay } from "@custody-relay/core"
import { makeHandler } from "@custody-relay/http"
import { type Layer, Logger } from "effect"
import { seedDemo } from "../src/seedDemo.js"
import { demoBtcTransfer } from "../test/DemoRequests.js"

export const seededRelay = async (
  layer: Layer.Layer<Relay.RelayServices, unknown>,
  outbox: false | Partial<OutboxWorker.WorkerOptions>
) => {
  const relay = makeHandler({
    layer,
    outbox,
    // A bench's setup sends requests as fast as it can; it measures the worker, not the limit.
    rateLimit: { limit: 1_000_000_000, windowSeconds: 60 },
    logger: Logger.make(() => undefined),
    logLevel: "Warn"
  })
  await relay.ready
  const demo = await relay.runtime.runPromise(seedDemo)
  return { relay, demo, transfer: demoBtcTransfer(demo) }
}
