/**
 * `pnpm --filter @custody-relay/server run bench:slow-receiver`: how long an approved transfer waits to be handed to
 * the provider while a webhook receiver is slow. A relay in this process on a SQLite file of its own, with its outbox
 * worker running (`OutboxWorker.run`, as a server runs it), the demo data, and one webhook subscription whose
 * receiver answers each delivery after BENCH_RECEIVER_MS; every event of the transfers goes to it. BENCH_TRANSFERS
 * transfers are initiated and approved, one every BENCH_EVERY_MS; each is timed from its approval to the moment its
 * provider id is recorded. Prints the median, p90 and longest wait in milliseconds. Asserts nothing.
 *
 * BENCH_RECEIVER_MS (default 2000), BENCH_TRANSFERS (default 20), BENCH_EVERY_MS (default 250).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { OutboxWorker, Relay, Transactions, Webhooks } from "@custody-relay/core"
import { Effect, Layer } from "effect"
import { fromDatabase } from "../src/StorageLayer.js"
import { approvedDemoTransfer, asDemoUser } from "../test/DemoRequests.js"
import { seededRelay } from "./SeededRelay.js"

const receiverMillis = Number(process.env["BENCH_RECEIVER_MS"] ?? "2000")
const transfers = Number(process.env["BENCH_TRANSFERS"] ?? "20")
const everyMillis = Number(process.env["BENCH_EVERY_MS"] ?? "250")

/** The receiver: every delivery answered 200, after `receiverMillis`. */
const slowReceiver = Layer.succeed(
  Webhooks.WebhookTransport,
  Webhooks.WebhookTransport.of({ post: () => Effect.as(Effect.sleep(receiverMillis), { status: 200 }) })
)

const sleep = (millis: number) => new Promise((resolve) => setTimeout(resolve, millis))

const run = async () => {
  const directory = mkdtempSync(join(tmpdir(), "relay-slow-receiver-bench-"))
  const { relay, demo, transfer } = await seededRelay(Relay.layer(fromDatabase(join(directory, "relay.db"), "memory"), { webhookTransport: slowReceiver }), {})
  try {
    const subscribed = await asDemoUser(relay, demo, "admin", "POST", "/relay/v1/webhooks", { url: "https://receiver.example.com/hooks" })
    if (subscribed.status !== 201) throw new Error(`subscribe: ${subscribed.status} ${await subscribed.text()}`)
    process.stdout.write(
      `\n${cpus().length} CPUs, ${cpus()[0]?.model ?? "?"}; node ${process.version}; SQLite; the worker at its defaults ` +
        `(concurrency ${OutboxWorker.defaults.concurrency}); a receiver answering every delivery after ${receiverMillis} ms; ` +
        `${transfers} transfers, one approved every ${everyMillis} ms\n\n`
    )
    const waits: Array<Promise<number>> = []
    for (let i = 0; i < transfers; i++) {
      const id = await approvedDemoTransfer(relay, demo, transfer)
      const approvedAt = performance.now()
      waits.push((async () => {
        while ((await relay.runtime.runPromise(Transactions.inspect(id))).providerTransactionId === null) await sleep(10)
        return performance.now() - approvedAt
      })())
      await sleep(everyMillis)
    }
    const sorted = (await Promise.all(waits)).sort((a, b) => a - b)
    const at = (share: number) => sorted[Math.min(sorted.length - 1, Math.floor(share * sorted.length))] ?? 0
    process.stdout.write(
      `from approval to the provider's id recorded, ms: median ${at(0.5).toFixed(0)}, p90 ${at(0.9).toFixed(0)}, longest ${at(1).toFixed(0)}\n`
    )
  } finally {
    await relay.dispose()
    rmSync(directory, { recursive: true, force: true })
  }
}

run().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
