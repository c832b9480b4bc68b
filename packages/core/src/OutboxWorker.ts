/**
 * The outbox worker: carries out the outbox's entries after the units that wrote them committed (see Outbox).
 * Each round leases the due entries in one short unit of work, then carries each out with no unit open (a
 * provider call never holds a lock), and settles it in the unit that records its result. A failed attempt is
 * retried with exponential backoff and jitter; after `maxAttempts` the entry is given up, visibly, with what
 * that means for its record. A transfer's submission is the exception: it is retried until the provider answers,
 * since a submission whose outcome is unknown may be an order the provider holds, and releasing its funds could let
 * them be spent twice; the provider's refusal gives it up at once, and the transfer fails and releases its funds.
 *
 * Run one per process (`run`, forked for the life of a server); several processes on one database share the
 * work, and leases keep them from carrying out one entry at the same time. A process that dies mid-effect
 * leaves a lease that expires, and the entry is carried out again: at least once, idempotent at the provider.
 */
import { Cause, Duration, Effect, Latch, Option, Random } from "effect"
import { CustodyProvider } from "./CustodyProvider.js"
import { type Given, overDefaults, wholeNumber } from "./EmbedderOptions.js"
import * as OutageLog from "./OutageLog.js"
import * as Outbox from "./Outbox.js"
import type { RelayServices } from "./Relay.js"
import * as Retention from "./Retention.js"
import { CustodyProviderFailed } from "./RelayError.js"
import * as Storage from "./Storage.js"
import * as Timestamp from "./Timestamp.js"
import * as Transactions from "./Transactions.js"
import * as Webhooks from "./Webhooks.js"
import * as WhitelistedAddresses from "./WhitelistedAddresses.js"

export interface WorkerOptions {
  /** Pause between rounds that found nothing due. */
  readonly idleMillis: number
  /** How long a leased entry is this worker's; longer than any provider call takes. */
  readonly leaseMillis: number
  /** Entries leased per round. */
  readonly batch: number
  /**
   * Lanes carried out at once in each of the two pools (see `lanesOf` and `run`: up to this many webhook lanes and
   * this many provider effects), so a slow provider call or webhook receiver holds up only its own lane, not the
   * others. Each entry's units are short, so they take a write connection only briefly (PostgreSQL).
   */
  readonly concurrency: number
  /** Failed attempts before an entry is given up (a transfer's submission only by the provider's refusal). */
  readonly maxAttempts: number
  /** The first retry's delay; each next one doubles, up to `maxBackoffMillis`, then jittered down to three quarters. */
  readonly baseBackoffMillis: number
  readonly maxBackoffMillis: number
}

/**
 * Defaults: 20 attempts over more than a day, whatever the jitter (0.5 s doubling to an 8 h cap: the retries' delays
 * add up to 25 to 33 hours), so a receiver or a provider that is down overnight still gets its effects.
 */
export const defaults: WorkerOptions = {
  idleMillis: 200,
  leaseMillis: 60_000,
  batch: 16,
  concurrency: 4,
  maxAttempts: 20,
  baseBackoffMillis: 500,
  maxBackoffMillis: 8 * 60 * 60 * 1000
}

/**
 * The worker's options an embedder gives, over the defaults (an entry given as `undefined` keeps its default), each
 * checked: a RangeError naming the setting otherwise (see EmbedderOptions). A worker with no place never carries a
 * transfer out.
 */
export const optionsOf = (given?: Given<WorkerOptions>): WorkerOptions => {
  const options = overDefaults(defaults, given)
  wholeNumber("outbox.idleMillis", options.idleMillis, 1)
  wholeNumber("outbox.leaseMillis", options.leaseMillis, 1000)
  wholeNumber("outbox.batch", options.batch, 1)
  // Each pool leases again whenever it has room, so places may outnumber a lease's batch; and a first delay above the
  // cap is the cap (backoffCeilingMillis): neither pair needs the other's order.
  wholeNumber("outbox.concurrency", options.concurrency, 1)
  wholeNumber("outbox.maxAttempts", options.maxAttempts, 1)
  wholeNumber("outbox.baseBackoffMillis", options.baseBackoffMillis, 1)
  wholeNumber("outbox.maxBackoffMillis", options.maxBackoffMillis, 1)
  return options
}

/** What carries out each kind of entry. */
const handlers: {
  readonly [K in Outbox.EffectKind]: (entry: Outbox.OutboxEntry) => Effect.Effect<void, unknown, RelayServices>
} = {
  submitTransfer: Transactions.submitToProvider,
  followTransfer: Transactions.followAtProvider,
  registerWhitelistedAddress: WhitelistedAddresses.registerAtProvider,
  followWhitelistedAddress: WhitelistedAddresses.followReview,
  deliverWebhook: Webhooks.deliver
}

/**
 * Effects retried until the provider answers, whatever their count of attempts: only the provider's refusal gives
 * them up. A submission none of whose attempts was answered may still have reached the provider, which then holds
 * an order it will carry out; its transfer keeps its funds reserved until the provider's word (a later attempt is
 * answered with the order under the same request id, or refused) or an operator's (`Transactions.applyProviderEvent`
 * once the provider has been asked). Following a record the provider holds (a submitted transfer, an address under
 * review) is the only thing that ever asks where it stands: given up, the transfer would stay open with its funds
 * reserved whatever the provider did with it.
 */
const retriedUntilAnswered: ReadonlySet<Outbox.EffectKind> = new Set(["submitTransfer", "followTransfer", "followWhitelistedAddress"])

/** Whether an attempt's failure is the provider's refusal: it holds nothing, and a repeat cannot succeed. */
const isRefusal = (cause: Cause.Cause<unknown>): boolean => {
  const failure = Cause.findErrorOption(cause)
  return Option.isSome(failure) && failure.value instanceof CustodyProviderFailed && failure.value.refused === true
}

/** What giving an entry up means for its record, beyond the entry's own state. */
const givenUp: {
  readonly [K in Outbox.EffectKind]?: (unit: Storage.StorageUnit, subjectId: string) => Effect.Effect<void, unknown, RelayServices>
} = {
  submitTransfer: Transactions.failUnsubmitted,
  deliverWebhook: Webhooks.giveUp
}

/**
 * What follows, in the same unit, when an entry of a lane failed and is due again later: whether the lane's other
 * entries are now held behind it. A webhook subscription holds its other deliveries until one goes out
 * (Webhooks.holdDeliveries); held in the unit that schedules the retry, so whoever carries the retry out sees them held.
 */
const retryScheduled: {
  readonly [K in Outbox.EffectKind]?: (unit: Storage.StorageUnit, entry: Outbox.OutboxEntry) => Effect.Effect<boolean, Storage.StorageError>
} = {
  deliverWebhook: (unit, entry) => entry.lane === null ? Effect.succeed(false) : Webhooks.holdDeliveries(unit, entry.lane, entry.id)
}

/** A failed attempt as recorded: when the entry is due again (now when given up), and whether its lane is held behind it. */
interface FailureRecorded {
  readonly dueAgain: Timestamp.Timestamp
  readonly laneHeld: boolean
}

/** The longest delay before retry number `attempts` (1 for the first retry): exponential, capped. */
export const backoffCeilingMillis = (options: WorkerOptions, attempts: number): number =>
  Math.min(options.maxBackoffMillis, options.baseBackoffMillis * 2 ** Math.min(attempts - 1, 30))

/** Jitter takes a delay down to at most this share of its ceiling, so retries of one outage spread out. */
export const JITTER_FLOOR = 0.75

/** The delay before retry number `attempts`: its ceiling, jittered between three quarters and all of it. */
export const backoffMillis = (options: WorkerOptions, attempts: number) =>
  Effect.map(Random.next, (random) => {
    const ceiling = backoffCeilingMillis(options, attempts)
    return Math.round(ceiling * (JITTER_FLOOR + (1 - JITTER_FLOOR) * random))
  })

/**
 * The entries due now, none in `busyLanes` and those `filter` takes, leased to this worker; with the time they
 * were leased at. An idle relay only reads: a write unit (SQLite's write lock, a PostgreSQL transaction that writes)
 * is opened only when something is due.
 */
const lease = Effect.fnUntraced(function*(options: WorkerOptions, busyLanes: ReadonlyArray<string>, filter?: Outbox.DueFilter) {
  const nowMillis = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
  const now = Timestamp.fromMillis(nowMillis)
  // One statement, its answer checked again by the leasing unit: a lookup (no transaction of its own).
  const seen = yield* Storage.run("lookup", (unit) => unit.dueOutboxEntries(now, 1, busyLanes, filter))
  const due = seen.length === 0 ? seen : yield* Storage.run("write", (unit) => leaseDue(unit, now, nowMillis, options, busyLanes, filter))
  return { due, leasedAt: nowMillis }
})

/** Leases to this worker, in one write unit, the entries due now. */
const leaseDue = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  now: Timestamp.Timestamp,
  nowMillis: number,
  options: WorkerOptions,
  busyLanes: ReadonlyArray<string>,
  filter: Outbox.DueFilter | undefined
) {
  const due = yield* unit.dueOutboxEntries(now, options.batch, busyLanes, filter)
  const leasedUntil = Timestamp.fromMillis(nowMillis + options.leaseMillis)
  // Each as written, carrying its lease: what gives it back gives back this lease only (Outbox.release).
  const leased = due.map((entry) => ({ ...entry, leasedUntil, updatedAt: now }))
  for (const entry of leased) yield* unit.updateOutboxEntry(entry)
  return leased
})

const describe = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.findErrorOption(cause)
  const error = Option.isSome(failure) ? failure.value : Cause.squash(cause)
  if (error instanceof CustodyProviderFailed) return `${error.message}: ${error.refused === true ? "refused: " : ""}${error.detail}`
  return error instanceof Error ? error.message : String(error)
}

/**
 * Records a failed attempt: due again after the backoff, or given up after the last attempt. Answers when the entry is
 * due again (now, when it was given up or not found pending) and whether its lane is held behind it (`retryScheduled`).
 */
const recordFailure = Effect.fnUntraced(function*(options: WorkerOptions, entry: Outbox.OutboxEntry, cause: Cause.Cause<unknown>) {
  const delay = yield* backoffMillis(options, entry.attempts + 1)
  const nowMillis = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
  const now = Timestamp.fromMillis(nowMillis)
  const lastError = describe(cause).slice(0, 500)
  const refused = isRefusal(cause)
  const attempts = entry.attempts + 1
  // Past its attempts, an effect retried until answered is an operator's matter: a transfer's funds stay reserved.
  const unresolved = !refused && retriedUntilAnswered.has(entry.kind) && attempts >= options.maxAttempts
  yield* (unresolved
    ? Effect.logError("outbox effect still unanswered after its attempts; retried until the provider answers")
    : Effect.logWarning("outbox effect failed")).pipe(
      Effect.annotateLogs({ entry: entry.id, kind: entry.kind, subject: entry.subjectId, attempts, error: lastError })
    )
  return yield* Storage.run("write", (unit) => recordFailureIn(unit, entry, options, nowMillis, delay, lastError, now, refused))
})

const recordFailureIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  entry: Outbox.OutboxEntry,
  options: WorkerOptions,
  nowMillis: number,
  delay: number,
  lastError: string,
  now: Timestamp.Timestamp,
  refused: boolean
) {
  const found = yield* unit.getOutboxEntry(entry.id)
  if (Option.isNone(found) || found.value.state !== "pending") return { dueAgain: now, laneHeld: false } satisfies FailureRecorded
  const attempts = found.value.attempts + 1
  const gaveUp = refused || (!retriedUntilAnswered.has(entry.kind) && attempts >= options.maxAttempts)
  yield* unit.updateOutboxEntry({
    ...found.value,
    attempts,
    state: gaveUp ? "given_up" : "pending",
    nextAttemptAt: gaveUp ? found.value.nextAttemptAt : Timestamp.fromMillis(nowMillis + delay),
    leasedUntil: null,
    lastError,
    updatedAt: now
  })
  const consequence = givenUp[entry.kind]
  if (gaveUp && consequence !== undefined) yield* Effect.orDie(consequence(unit, entry.subjectId))
  if (gaveUp) return { dueAgain: now, laneHeld: false }
  const holding = retryScheduled[entry.kind]
  const laneHeld = holding === undefined ? false : yield* holding(unit, entry)
  return { dueAgain: Timestamp.fromMillis(nowMillis + delay), laneHeld }
})

/**
 * Carries out one leased entry; never fails (a failure is recorded on the entry). Answers, for a failed attempt, what
 * was recorded (undefined when it succeeded, or its failure could not be recorded).
 * An attempt that outlasts half its lease is abandoned as failed, so the lease never runs out under a call still in
 * flight and no second worker takes the entry while this one may still act on it.
 */
const carryOut = (options: WorkerOptions, entry: Outbox.OutboxEntry) =>
  handlers[entry.kind](entry).pipe(
    Effect.timeoutOrElse({
      duration: Duration.millis(options.leaseMillis / 2),
      orElse: () => Effect.fail(new Error(`no answer within ${options.leaseMillis / 2} ms`))
    }),
    Effect.as<FailureRecorded | undefined>(undefined),
    Effect.catchCause((cause) =>
      recordFailure(options, entry, cause).pipe(
        // The database itself may be what failed: the lease expires and the entry is carried out again.
        Effect.catchCause((recording) => Effect.as(logFailure("outbox failure could not be recorded", recording), undefined))
      )
    )
  )

/** The lane an entry is carried out in (see `lanesOf`). */
const laneKeyOf = (entry: Outbox.OutboxEntry): string =>
  entry.lane !== null
    ? `lane ${entry.lane}`
    : entry.kind === "deliverWebhook"
    ? `deliveries of ${entry.clientId}`
    : `entry ${entry.id}`

/** `lanesOf`'s lanes under their keys (`laneKeyOf`), in the order their first entries were leased. */
const lanesByKey = (due: ReadonlyArray<Outbox.OutboxEntry>): ReadonlyMap<string, ReadonlyArray<Outbox.OutboxEntry>> => {
  const lanes = new Map<string, Array<Outbox.OutboxEntry>>()
  for (const entry of due) {
    const key = laneKeyOf(entry)
    const lane = lanes.get(key)
    if (lane === undefined) lanes.set(key, [entry])
    else lane.push(entry)
  }
  return lanes
}

/**
 * A round's entries in lanes, each carried out in lease order: entries that name one lane share it (a webhook
 * subscription's deliveries), every other entry is a lane of its own. A record's deliveries then go out one after
 * another in the round that leased them, as a delivery would otherwise wait for any earlier one of its record still
 * pending (Webhooks.deliver) and be tried again later; and a slow receiver holds up only its own subscription's.
 * Deliveries written before entries named their lane (null) keep the lane they had then, their client's. Order needs
 * no more: a record's next provider effect is decided only after its last one is recorded (a transfer is followed
 * once its submission is).
 */
export const lanesOf = (due: ReadonlyArray<Outbox.OutboxEntry>): ReadonlyArray<ReadonlyArray<Outbox.OutboxEntry>> => [
  ...lanesByKey(due).values()
]

/**
 * Gives back the leases of `entries`, leased and not begun (Outbox.release), due at `dueAt` or when they were. Should
 * the database fail it, they stay leased: their leases run out and a later round takes them.
 */
const releaseLeases = (entries: ReadonlyArray<Outbox.OutboxEntry>, dueAt?: Timestamp.Timestamp) =>
  givingBack(entries, (unit) => Outbox.release(unit, entries, dueAt))

/** `release` in a write unit of its own, when there is anything to give back; a failure is logged, not raised. */
const givingBack = (entries: ReadonlyArray<Outbox.OutboxEntry>, release: (unit: Storage.StorageUnit) => Effect.Effect<void, Storage.StorageError>) =>
  entries.length === 0
    ? Effect.void
    : Storage.run("write", release).pipe(Effect.catchCause((cause) => logFailure("outbox leases could not be given back", cause)))

/**
 * Gives back the leases of a held subscription's `entries`: held, if it still is when this unit reads it (locked, so
 * a delivery that went out meanwhile and resumed it is seen); due at `dueAt` otherwise, since nothing would resume them.
 */
const releaseHeld = (subscriptionId: string, entries: ReadonlyArray<Outbox.OutboxEntry>, dueAt: Timestamp.Timestamp) =>
  givingBack(entries, (unit) =>
    Effect.flatMap(Webhooks.deliveriesHeld(unit, subscriptionId), (held) => Outbox.release(unit, entries, held ? Outbox.HELD : dueAt)))

/**
 * One lane's entries carried out in lease order. An attempt may take half a lease (carryOut), so one begun half a
 * lease or more after leasing could outlive the lease while another worker takes the entry: such an entry, and the
 * lane's later ones, are left; their leases run out and a later round leases them again. A lane of webhook deliveries
 * also stops at its first failed attempt: its later entries go to the same receiver, which just failed (a receiver
 * that never answers would otherwise hold a place for its timeout once per entry), so they and the lane's other
 * entries are held until one goes out (`retryScheduled`; a lane of deliveries written before entries named their lane
 * is a client's, and goes on). Answers how many it carried out.
 */
const carryOutLane = (options: WorkerOptions, leasedAt: number, lane: ReadonlyArray<Outbox.OutboxEntry>) => {
  const progress = { begun: 0 }
  // Stopped (the process shutting down), the lane gives back what it had not begun, for another node to take at once;
  // the entry under way keeps its lease: its call may have reached the provider.
  return carryOutLaneFrom(options, leasedAt, lane, progress).pipe(Effect.onInterrupt(() => releaseLeases(lane.slice(progress.begun))))
}

const carryOutLaneFrom = Effect.fnUntraced(function*(
  options: WorkerOptions,
  leasedAt: number,
  lane: ReadonlyArray<Outbox.OutboxEntry>,
  progress: { begun: number }
) {
  for (const entry of lane) {
    const nowMillis = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
    if (nowMillis - leasedAt >= options.leaseMillis / 2) break
    progress.begun++
    const failure = yield* carryOut(options, entry)
    // Only a lane that names its subscription: deliveries written before entries named their lane share their
    // client's lane, whose next entry may be another receiver's. What it leased with the failed one is given back
    // held with the rest of the lane, or due with the retry.
    if (failure !== undefined && entry.kind === "deliverWebhook" && entry.lane !== null) {
      yield* (failure.laneHeld ? releaseHeld(entry.lane, lane.slice(progress.begun), failure.dueAgain) : releaseLeases(lane.slice(progress.begun), failure.dueAgain))
      break
    }
  }
  return progress.begun
})

/** One round: leases what is due and carries it out, its lanes up to `concurrency` at once. Answers how many entries it carried out. */
export const runDue = Effect.fnUntraced(function*(options: WorkerOptions = defaults) {
  const { due, leasedAt } = yield* lease(options, [])
  const carried = yield* Effect.forEach(lanesOf(due), (lane) => carryOutLane(options, leasedAt, lane), { concurrency: options.concurrency })
  return carried.reduce((total, n) => total + n, 0)
})

/** Rounds until nothing is due: for tests and for draining before a shutdown. */
export const drain = Effect.fnUntraced(function*(options: WorkerOptions = defaults) {
  let total = 0
  for (let carried = yield* runDue(options); carried > 0; carried = yield* runDue(options)) total += carried
  return total
})

const HOUSEKEEPING_EVERY_MILLIS = 10 * 60 * 1000
/** What a failed housekeeping step's log line says of the next pass. */
const RUNS_AGAIN = `it runs again in ${HOUSEKEEPING_EVERY_MILLIS / 60_000} minutes`

const logFailure = (message: string, cause: Cause.Cause<unknown>) => {
  const { level, detail } = OutageLog.failureOf(cause)
  return Effect.logWithLevel(level)(message, detail)
}

/**
 * One pass of each node's housekeeping: held deliveries of subscriptions that hold none come due (a race's
 * leftovers, see `Webhooks.resumeUnheld`), and what the retention settings no longer keep is deleted (Retention).
 */
const keepHouse = Effect.andThen(
  Webhooks.resumeUnheld.pipe(Effect.catchCause((cause) => logFailure(`housekeeping: resuming held deliveries failed; ${RUNS_AGAIN}`, cause))),
  Retention.prune().pipe(
    Effect.flatMap((pruned) =>
      pruned.idempotencyKeys + pruned.outboxEntries + pruned.webhookDeliveries > 0
        ? Effect.logInfo("housekeeping deleted what the retention settings no longer keep").pipe(Effect.annotateLogs({ ...pruned }))
        : Effect.void),
    Effect.catchCause((cause) => logFailure(`housekeeping: deleting what the retention settings no longer keep failed; ${RUNS_AGAIN}`, cause))
  )
)

/**
 * While leases fail (the database unreachable), the running worker waits longer after each, doubling from
 * `idleMillis` up to this ceiling: a few connection attempts a minute rather than five a second, and effects resume
 * within this long of the database's return.
 */
export const LEASE_RETRY_CEILING_MILLIS = 5_000

/** The pause after the `failures`th lease in a row that failed. */
const pauseAfterFailedLeases = (settings: WorkerOptions, failures: number): number =>
  Math.min(settings.idleMillis * 2 ** Math.min(failures - 1, 30), Math.max(settings.idleMillis, LEASE_RETRY_CEILING_MILLIS))

/** Lanes leased and waiting for a place, in lease order, and lanes being carried out, of one pool (see `run`). */
interface PoolPlaces {
  readonly pool: Outbox.Pool
  /**
   * Lanes being carried out: their keys, the lane their entries name (null: nothing to skip when leasing), and their
   * client.
   */
  readonly running: Map<string, { readonly lane: string | null; readonly clientId: string }>
  readonly waiting: Array<{ readonly key: string; readonly leasedAt: number; readonly entries: ReadonlyArray<Outbox.OutboxEntry> }>
  /**
   * Until when the pool is not looked at again: its last lease found nothing due, and it is looked at once every
   * `idleMillis` then, however often the other pool's lanes end (each end would otherwise cost it a look).
   */
  quietUntil: number
  /**
   * Its last lease found nothing due while it skipped lanes of its own still going out or clients at their share: the
   * end of one of its lanes ends the quiet, since what was skipped may be due now. Without it a client at its share
   * waited out `idleMillis` after every lease (a healthy subscription of a client whose two other receivers failed got
   * 18 deliveries a second of its 25, and fell behind by minutes).
   */
  skippedSome: boolean
}

/**
 * The worker for the life of a process. Unlike rounds of `runDue`, it never waits for a slow lane to lease again: in
 * each of its two pools (Outbox.Pool: webhook deliveries, and the effects at the custody provider) up to
 * `concurrency` lanes are carried out at once, and whenever a pool has a free place and no leased lane of it waits
 * for one, it leases what is due in that pool, skipping the lanes still being carried out (their next entries go
 * after them, in a later lease). So a provider call or a webhook receiver that takes half a lease to answer holds up
 * only its own lane, and receivers that never answer, however many subscriptions one client makes, never hold up a
 * transfer's submission. Pauses when nothing was due, and longer after each lease that failed (see
 * `LEASE_RETRY_CEILING_MILLIS`; the outage is logged as `OutageLog` says). Interrupt to stop (its lanes stop with
 * it; what they leased is carried out again once the leases run out).
 */
export const run = (options: Given<WorkerOptions> = {}) => {
  const settings = optionsOf(options)
  return Effect.gen(function*() {
    yield* CustodyProvider
    const pools: ReadonlyArray<PoolPlaces> = (["provider", "deliveries"] as const).map((pool) => ({ pool, running: new Map(), waiting: [], quietUntil: 0, skippedSome: false }))
    const laneEnded = yield* Latch.make(false)
    let lastHousekeeping = Number.NEGATIVE_INFINITY
    let keepingHouse = false
    const leases = OutageLog.make({
      began: "outbox paused: leasing due entries failed; retrying",
      continues: "outbox still paused: leasing due entries fails",
      ended: "outbox resumed: leasing due entries again"
    })
    // The most places of the deliveries' pool one client's lanes hold at once: receivers that never answer, on as many
    // subscriptions as one client makes, leave the other places to the other clients' deliveries.
    const clientShare = Math.max(1, Math.floor(settings.concurrency / 2))
    /** The clients whose lanes in `pool` hold their share of its places: none of theirs starts or is leased meanwhile. */
    const atTheirShare = ({ pool, running }: PoolPlaces): ReadonlySet<string> => {
      if (pool !== "deliveries") return new Set()
      const held = new Map<string, number>()
      for (const { clientId } of running.values()) held.set(clientId, (held.get(clientId) ?? 0) + 1)
      return new Set([...held].filter(([, places]) => places >= clientShare).map(([clientId]) => clientId))
    }
    /** Whether a leased lane may start now: lane-less deliveries of a client whose earlier ones are still going out wait for them. */
    const startable = (places: PoolPlaces, full: ReadonlySet<string>) => (lane: PoolPlaces["waiting"][number]) =>
      !places.running.has(lane.key) && !full.has(lane.entries[0]?.clientId ?? "")
    const rounds = Effect.gen(function*() {
      while (true) {
        // Closed before looking, so a lane that ends after the look still wakes the wait below.
        laneEnded.closeUnsafe()
        for (const places of pools) {
          const { running, waiting } = places
          for (let i = 0; i < waiting.length && running.size < settings.concurrency;) {
            const next = waiting[i]!
            if (!startable(places, atTheirShare(places))(next)) {
              i++
              continue
            }
            waiting.splice(i, 1)
            running.set(next.key, { lane: next.entries[0]?.lane ?? null, clientId: next.entries[0]?.clientId ?? "" })
            yield* Effect.forkChild(carryOutLane(settings, next.leasedAt, next.entries).pipe(
              Effect.ensuring(Effect.sync(() => {
                running.delete(next.key)
                if (places.skippedSome) {
                  places.skippedSome = false
                  places.quietUntil = 0
                }
                laneEnded.openUnsafe()
              }))
            ))
          }
        }
        const roomy = pools.filter((places) =>
          places.running.size < settings.concurrency && !places.waiting.some(startable(places, atTheirShare(places))))
        const lookedAt = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
        const hungry = roomy.filter((places) => lookedAt >= places.quietUntil)
        if (hungry.length === 0) {
          // A lane's end, or the first pool with room whose quiet ends, whichever comes first.
          const quietEnds = Math.min(...roomy.map((places) => places.quietUntil))
          yield* (roomy.length === 0 ? laneEnded.await : Effect.race(Effect.sleep(Duration.millis(quietEnds - lookedAt)), laneEnded.await))
          continue
        }
        let failed: Cause.Cause<unknown> | undefined
        for (const places of hungry) {
          const { pool, running, waiting } = places
          const busyLanes = [...running.values()].flatMap(({ lane }) => (lane === null ? [] : [lane]))
          const filter = { pool, skipClients: [...atTheirShare(places)] }
          const leased = yield* lease(settings, busyLanes, filter).pipe(Effect.catchCause((cause) => Effect.succeed(cause)))
          if (Cause.isCause(leased)) {
            failed = leased
            break
          }
          if (leased.due.length === 0) {
            places.quietUntil = leased.leasedAt + settings.idleMillis
            places.skippedSome = busyLanes.length > 0 || filter.skipClients.length > 0
          }
          for (const [key, entries] of lanesByKey(leased.due)) waiting.push({ key, leasedAt: leased.leasedAt, entries })
        }
        if (failed !== undefined) {
          yield* leases.failed(OutageLog.failureOf(failed))
          yield* Effect.sleep(Duration.millis(pauseAfterFailedLeases(settings, leases.failures())))
          continue
        }
        yield* leases.succeeded
        // At the first lease that reaches the database, then every 10 minutes, one pass at a time; on a fiber of its
        // own, so a long pass (a backlog to prune) holds up no lease.
        const nowMillis = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
        if (!keepingHouse && nowMillis - lastHousekeeping >= HOUSEKEEPING_EVERY_MILLIS) {
          lastHousekeeping = nowMillis
          keepingHouse = true
          yield* Effect.forkChild(keepHouse.pipe(Effect.ensuring(Effect.sync(() => (keepingHouse = false)))))
        }
      }
    })
    // Stopped, it gives back the lanes it leased and had not begun, for another node to take at once instead of
    // after their leases (a rolling restart); each lane under way gives back the rest of its own (carryOutLane).
    const notBegun = () => pools.flatMap(({ waiting }) => waiting.flatMap((lane) => lane.entries))
    return yield* rounds.pipe(Effect.onInterrupt(() => releaseLeases(notBegun())))
  })
}
