/**
 * The benchmark's bound, not a deployment: the relay served exactly as `pnpm start` serves it (node adapter, the
 * same handler and demo data) but on the in-memory storage, so no SQL runs at all. What it answers per second is
 * the most any storage could let the rest of the pipeline (credentials, rate limit, permission, decoding, the
 * core's rules, the Effect runtime, the reply) reach. Started by bench/http.bench.ts, which prints
 * it beside the relay on SQLite and the baseline; it keeps nothing.
 */
import { Relay } from "@custody-relay/core"
import { makeHandler } from "@custody-relay/http"
import { serve } from "@custody-relay/http/node"
import { nodeSecretDigest } from "../src/NodeSecretDigest.js"
import { configFromEnv } from "../src/ServerConfig.js"
import { demoText, seedDemo } from "../src/seedDemo.js"

const handler = makeHandler({
  layer: Relay.layerMemory({ secretDigest: nodeSecretDigest }),
  // The relay's level, from the same RELAY_LOG_LEVEL (http.bench.ts passes the relay's), so the two differ in storage only.
  logLevel: configFromEnv().logLevel,
  rateLimit: { limit: Number(process.env["RELAY_RATE_LIMIT"] ?? 1_000_000_000), windowSeconds: 60 }
})
await handler.ready
const listening = await serve(handler, { port: Number(process.env["PORT"] ?? 0) })
process.stdout.write(`custody-relay (in-memory storage) listening on ${listening.url}\n`)
process.stdout.write(demoText(await handler.runtime.runPromise(seedDemo), listening.url))
process.once("SIGTERM", () => {
  void listening.close().then(() => handler.dispose()).then(() => process.exit(0))
})
// After the handler, as the server's own start does: whoever reads this line may signal at once.
process.stdout.write("custody-relay ready\n")
