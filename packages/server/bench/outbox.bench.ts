/**
 * `pnpm --filter @custody-relay/server run bench:outbox`: what carrying an approved transfer to COMPLETED costs the
 * outbox worker on PostgreSQL reached over a link with a delay, as a database on another host answers. A relay in
 * this process (its worker stopped) on a database of its own, behind delayProxy.mjs (BENCH_PG_DELAY_MS each way)
 * and a round-trip counter; a polled simulated provider that settles a transfer at once, each of its calls answered
 * after BENCH_PROVIDER_MS. Each round initiates and approves BENCH_TRANSFERS transfers through the HTTP handler,
 * untimed, then times `OutboxWorker.drain()` with each worker concurrency of BENCH_CONCURRENCY in turn: the
 * submission to the provider and the poll that finds the transfer completed, for every transfer. Prints, for each
 * round and as medians: milliseconds and round trips a transfer, and transfers a second. Asserts nothing.
 *
 * BENCH_PG_URL (default RELAY_TEST_PG_URL), BENCH_PG_DELAY_MS (default 1), BENCH_PROVIDER_MS (default 0),
 * BENCH_CONCURRENCY (comma-separated, default the worker's own), BENCH_TRANSFERS (default 100), BENCH_ROUNDS
 * (default 3).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { CustodyProvider, OutboxWorker, Relay, Transactions } from "@custody-relay/core"
import { Context, Duration, Effect, Layer } from "effect"
import { countingProxy } from "../../storage-sql/test/CountingProxy.js"
import { fromDatabase } from "../src/StorageLayer.js"
import { approvedDemoTransfer } from "../test/DemoRequests.js"
import { delayProxy, median, postgresDatabase } from "./BenchProcess.js"
import { seededRelay } from "./SeededRelay.js"

const pgUrl = process.env["BENCH_PG_URL"] ?? process.env["RELAY_TEST_PG_URL"]
const delayMillis = Number(process.env["BENCH_PG_DELAY_MS"] ?? "1")
const transfers = Number(process.env["BENCH_TRANSFERS"] ?? "100")
const rounds = Number(process.env["BENCH_ROUNDS"] ?? "3")
const providerMillis = Number(process.env["BENCH_PROVIDER_MS"] ?? "0")
const concurrencies = (process.env["BENCH_CONCURRENCY"] ?? String(OutboxWorker.defaults.concurrency)).split(",").map(Number)

/** The simulated provider settling at once, each call of the worker's answered after `providerMillis`. */
const provider = Layer.effectContext(
  Effect.gen(function*() {
    const simulated = yield* CustodyProvider.CustodyProvider
    const controls = yield* CustodyProvider.SimulatedProviderControls
    const answering = <A, E>(call: Effect.Effect<A, E>) => Effect.delay(call, Duration.millis(providerMillis))
    return Context.make(CustodyProvider.CustodyProvider, {
      ...simulated,
      submitTransfer: (order) => answering(simulated.submitTransfer(order)),
      transferProgress: (id) => answering(simulated.transferProgress(id))
    }).pipe(Context.add(CustodyProvider.SimulatedProviderControls, controls))
  })
).pipe(Layer.provide(CustodyProvider.layerSimulated({
  lifecycle: { policyMillis: 0, broadcastMillis: 0, confirmationMillis: 0, addressReviewMillis: 0, failureShare: 0 }
})))

interface Round {
  readonly concurrency: number
  readonly millisPerTransfer: number
  readonly tripsPerTransfer: number
}

const run = async () => {
  if (pgUrl === undefined) {
    process.stdout.write("set BENCH_PG_URL (or RELAY_TEST_PG_URL) to a PostgreSQL server the bench may create a database on\n")
    process.exit(2)
  }
  const directory = mkdtempSync(join(tmpdir(), "relay-outbox-bench-"))
  const database = await postgresDatabase(pgUrl, `relay_outbox_bench_${process.pid}`)
  const delayed = await delayProxy(new URL(database.url), delayMillis, join(directory, "delay.log"))
  const target = new URL(database.url)
  target.hostname = "127.0.0.1"
  target.port = delayed.port
  const counter = await countingProxy(target)
  const { relay, demo, transfer } = await seededRelay(Relay.layer(fromDatabase(counter.url, "memory"), { provider }), false)
  try {
    const approvedTransfers = async () => {
      const ids: Array<string> = []
      for (let i = 0; i < transfers; i++) ids.push(await approvedDemoTransfer(relay, demo, transfer))
      return ids
    }
    // Carries out what seeding left (the whitelisted address's registration), and prepares the statements on the
    // pool's connections, as a node's first transfers do.
    await approvedTransfers()
    await relay.runtime.runPromise(OutboxWorker.drain())
    const results: Array<Round> = []
    process.stdout.write(
      `\n${cpus().length} CPUs, ${cpus()[0]?.model ?? "?"}; node ${process.version}; PostgreSQL behind a ${delayMillis} ms delay each way; ` +
        `the provider answers after ${providerMillis} ms; ${transfers} approved transfers a round, carried to COMPLETED by one worker ` +
        `(submission, then one poll), at concurrency ${concurrencies.join(", ")} in turn\n\n`
    )
    for (let round = 1; round <= rounds; round++) for (const concurrency of concurrencies) {
      const ids = await approvedTransfers()
      await counter.count(async () => {})
      let millis = 0
      const trips = await counter.count(async () => {
        const started = performance.now()
        await relay.runtime.runPromise(OutboxWorker.drain({ ...OutboxWorker.defaults, concurrency }))
        millis = performance.now() - started
      })
      for (const id of ids) {
        const { status } = await relay.runtime.runPromise(Transactions.inspect(id))
        if (status !== "COMPLETED") throw new Error(`transfer ${id} is ${status} after the drain`)
      }
      const result = { concurrency, millisPerTransfer: millis / transfers, tripsPerTransfer: trips / transfers }
      results.push(result)
      process.stdout.write(
        `round ${round}, concurrency ${concurrency}: ${result.millisPerTransfer.toFixed(2)} ms a transfer, ${result.tripsPerTransfer.toFixed(2)} round trips a transfer, ` +
          `${(1000 / result.millisPerTransfer).toFixed(1)} transfers a second\n`
      )
    }
    for (const concurrency of concurrencies) {
      const at = results.filter((r) => r.concurrency === concurrency)
      const ms = median(at.map((r) => r.millisPerTransfer))
      process.stdout.write(
        `median, concurrency ${concurrency}: ${ms.toFixed(2)} ms a transfer, ${median(at.map((r) => r.tripsPerTransfer)).toFixed(2)} round trips a transfer, ` +
          `${(1000 / ms).toFixed(1)} transfers a second\n`
      )
    }
  } finally {
    await relay.dispose()
    await counter.close()
    delayed.child.kill()
    await database.drop()
    rmSync(directory, { recursive: true, force: true })
  }
}

run().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
