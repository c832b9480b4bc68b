/**
 * What the relay deletes as it ages, so the rows kept beside the custody record stop growing with the traffic:
 * idempotency keys once expired (`RelayConfig.idempotencyKeyTtlSeconds`), outbox entries done or given up longer ago
 * than `outboxEntryRetentionSeconds`, and webhook deliveries delivered, failed or skipped longer ago than
 * `webhookDeliveryRetentionSeconds` (either 0: kept for good). The custody record itself (clients, API users,
 * accounts, whitelisted addresses, transactions, the ledger and the domain events) is never deleted, and nothing
 * pending is: a held delivery waits however old it is.
 *
 * Each table is pruned in batches of `batch` rows, one write unit each, resting after every full batch (`restAfter`).
 * On SQLite a write unit holds the database's write lock and runs on the event loop, so a large backlog (the first
 * pass after an upgrade from a release that kept everything) is deleted between other requests, never in one
 * statement in front of them. The outbox worker runs `prune` as part of its housekeeping (OutboxWorker.run).
 */
import { Clock, Duration, Effect, Exit } from "effect"
import { type Given, overDefaults, wholeNumber } from "./EmbedderOptions.js"
import { RelayConfig } from "./RelayConfig.js"
import * as Storage from "./Storage.js"
import * as Timestamp from "./Timestamp.js"

export interface PruneOptions {
  /** Rows deleted per write unit. */
  readonly batch: number
  /**
   * The pause after a full batch, before the next (other requests' turn): `restFactor` times as long as the batch
   * took, and at least `pauseMillis`. So the deletes take at most 1 / (1 + restFactor) of the time, however slow a
   * batch is on this machine and engine.
   */
  readonly pauseMillis: number
  readonly restFactor: number
}

/**
 * Measured with `bench:retention` on a SQLite file (400,000 settled entries and as many deliveries), a reader's p99
 * while the first pass deletes, against its own on a server with nothing to delete, both from a cold start: batches of
 * 500 with a fixed 10 ms pause 3.9 times, of 200 1.8 times (17,000 rows a second); of 100 resting four times as long as
 * each took, 1.4 times (15,700 rows a second). The rest follows the batch's own cost, so a slower machine or a
 * PostgreSQL round trip slows the deletes, not the requests.
 */
export const defaults: PruneOptions = { batch: 100, pauseMillis: 2, restFactor: 4 }

/** How many rows a pass deleted, by what they were. */
export interface Pruned {
  readonly idempotencyKeys: number
  readonly outboxEntries: number
  readonly webhookDeliveries: number
}

/** The rest after a full batch that took `tookMillis`. */
export const restAfter = (options: PruneOptions, tookMillis: number): number => Math.max(options.pauseMillis, options.restFactor * tookMillis)

/** Deletes, a batch per unit, until a batch comes back short; answers how many in all. */
const inBatches = (options: PruneOptions, batch: (unit: Storage.StorageUnit) => Effect.Effect<number, Storage.StorageError>) =>
  Effect.gen(function*() {
    let total = 0
    while (true) {
      const began = yield* Clock.currentTimeMillis
      const deleted = yield* Storage.run("write", batch)
      total += deleted
      if (deleted < options.batch) return total
      const pause = restAfter(options, (yield* Clock.currentTimeMillis) - began)
      if (pause > 0) yield* Effect.sleep(Duration.millis(pause))
    }
  })

const count = (table: Exit.Exit<number>): number => (Exit.isSuccess(table) ? table.value : 0)

/** The instant `seconds` before `nowMillis`, or none when 0 keeps the rows for good. */
const settledBefore = (nowMillis: number, seconds: number): Timestamp.Timestamp | undefined =>
  seconds === 0 ? undefined : Timestamp.fromMillis(nowMillis - seconds * 1000)

/**
 * One pass over the three tables, each as of the time the pass began. Each table is pruned whatever befell the others:
 * a table whose deletes fail (a lock timeout, say) fails the pass, with the storage's failure as a defect as every
 * unit's is (`Storage.run`), after the other two were pruned.
 */
export const prune = Effect.fnUntraced(function*(given?: Given<PruneOptions>) {
  const options = overDefaults(defaults, given)
  wholeNumber("retention.batch", options.batch, 1)
  wholeNumber("retention.pauseMillis", options.pauseMillis, 0)
  wholeNumber("retention.restFactor", options.restFactor, 0, 100)
  const config = yield* RelayConfig
  const nowMillis = yield* Clock.currentTimeMillis
  const now = Timestamp.fromMillis(nowMillis)
  const outboxBefore = settledBefore(nowMillis, config.outboxEntryRetentionSeconds)
  const deliveriesBefore = settledBefore(nowMillis, config.webhookDeliveryRetentionSeconds)
  // Exits, not results: Storage.run turns a storage failure into a defect.
  const idempotencyKeys = yield* Effect.exit(inBatches(options, (unit) => unit.deleteExpiredIdempotencyRecords(now, options.batch)))
  const outboxEntries = yield* Effect.exit(
    outboxBefore === undefined ? Effect.succeed(0) : inBatches(options, (unit) => unit.deleteSettledOutboxEntries(outboxBefore, options.batch))
  )
  const webhookDeliveries = yield* Effect.exit(
    deliveriesBefore === undefined ? Effect.succeed(0) : inBatches(options, (unit) => unit.deleteSettledWebhookDeliveries(deliveriesBefore, options.batch))
  )
  for (const table of [idempotencyKeys, outboxEntries, webhookDeliveries]) {
    if (Exit.isFailure(table)) return yield* Effect.failCause(table.cause)
  }
  const pruned: Pruned = { idempotencyKeys: count(idempotencyKeys), outboxEntries: count(outboxEntries), webhookDeliveries: count(webhookDeliveries) }
  return pruned
})
