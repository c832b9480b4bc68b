/**
 * The transactional outbox: effects outside the database (calls to the custody provider) are written as entries
 * in the unit of work that decides them, and carried out after commit by `OutboxWorker`. An entry exists exactly
 * when the decision committed; it is carried out at least once (retried with backoff until done or given up),
 * never while a database lock is held, and its id is the stable request id the provider is given, so a repeat
 * is recognised by the provider. Its state is visible: pending, attempts, last error, done or given up.
 *
 * Leases keep two workers (two nodes on one database) from carrying out one entry at the same time: leasing
 * marks an entry taken until a time, and skips entries another unit is leasing (FOR UPDATE SKIP LOCKED on
 * PostgreSQL; SQLite's write lock serializes leasing).
 */
import { Effect, Option, Schema } from "effect"
import { ClientId, Ids } from "./Ids.js"
import type { StorageError } from "./Storage.js"
import * as Timestamp from "./Timestamp.js"

/**
 * What an entry asks for: hand an approved transfer to the provider, follow its progress there, register a
 * whitelisted address, follow its review.
 */
export const effectKinds = [
  "submitTransfer",
  "followTransfer",
  "registerWhitelistedAddress",
  "followWhitelistedAddress",
  "deliverWebhook"
] as const
export const EffectKind = Schema.Literals(effectKinds)
export type EffectKind = typeof EffectKind.Type

/**
 * The worker's two pools of places (OutboxWorker.run): webhook deliveries, and the effects at the custody provider.
 * Each leases and carries out its own entries, so receivers that take their full timeout to answer never hold up a
 * transfer's submission, however many subscriptions a client makes.
 */
export type Pool = "deliveries" | "provider"

/** Which of the due entries a lease takes; every one when absent. */
export interface DueFilter {
  /** Only the entries of this pool. */
  readonly pool?: Pool
  /** None of these clients' (in the deliveries' pool, the clients holding their share of its places). */
  readonly skipClients?: ReadonlyArray<string>
}

/** The pool an effect of `kind` is carried out in. */
export const poolOf = (kind: EffectKind): Pool => (kind === "deliverWebhook" ? "deliveries" : "provider")

/**
 * The kinds a lease takes: those of `pool`, or every kind this release carries out. Stores lease by this list, never
 * by "any other kind", so an entry of a kind a later release added (written by a newer node on the same database
 * during a rolling upgrade) is left to a node that knows it, and never takes an older worker's place or batch.
 */
export const kindsOf = (pool: Pool | undefined): ReadonlyArray<EffectKind> =>
  pool === undefined ? effectKinds : effectKinds.filter((kind) => poolOf(kind) === pool)

/**
 * The kinds whose entries are nothing but a record of attempts once settled, which Retention deletes after
 * `RelayConfig.outboxEntryRetentionSeconds`. Every other kind is kept for good, as the custody record is:
 * - a transfer's submission and an address's registration, whose ids are the request ids the custody provider names in
 *   its own callbacks (ProviderReports: a transfer's progress, an address's review), which may come long after the
 *   entry settled (a submission accepted, the transfer then held in the provider's review for weeks); one per record;
 * - a kind this release does not know (a later release's, on the same database during a rolling upgrade): only a
 *   release that knows what its callbacks name may delete it, as only one that knows it leases it (`kindsOf`).
 * A release that adds a kind to this list changes the partial index of migration 12 to match, in a migration of its own.
 */
export const deletedOnceSettled: ReadonlyArray<EffectKind> = ["followTransfer", "followWhitelistedAddress", "deliverWebhook"]

export const entryStates = ["pending", "done", "given_up"] as const
export const EntryState = Schema.Literals(entryStates)
export type EntryState = typeof EntryState.Type

export const OutboxEntry = Schema.Struct({
  /** Time-ordered; also the request id the provider is given for this effect. */
  id: Schema.String,
  kind: EffectKind,
  clientId: ClientId,
  /** The record the effect is about (a transaction, a whitelisted address). */
  subjectId: Schema.String,
  /**
   * Entries of one lane are carried out one after another, in lease order, within a round (OutboxWorker.lanesOf):
   * a webhook delivery's lane is its subscription. Null: a lane of its own.
   */
  lane: Schema.NullOr(Schema.String),
  state: EntryState,
  /** Failed attempts so far. */
  attempts: Schema.Int,
  nextAttemptAt: Timestamp.Timestamp,
  /** While a worker carries the entry out, until when it is theirs. */
  leasedUntil: Schema.NullOr(Timestamp.Timestamp),
  lastError: Schema.NullOr(Schema.String),
  createdAt: Timestamp.Timestamp,
  updatedAt: Timestamp.Timestamp
})
export type OutboxEntry = typeof OutboxEntry.Type

type Op<A> = Effect.Effect<A, StorageError>

/** The outbox, joined in a unit of work like every store. */
export interface OutboxStore {
  readonly insertOutboxEntry: (entry: OutboxEntry) => Op<void>
  readonly getOutboxEntry: (id: string) => Op<Option.Option<OutboxEntry>>
  readonly updateOutboxEntry: (entry: OutboxEntry) => Op<void>
  /**
   * Up to `limit` pending entries due at `now` whose lease is free, oldest due first, of the kinds the filter's pool
   * takes (`kindsOf`), skipping any another unit is leasing at this moment and any in one of `busyLanes` (lanes this
   * worker is still carrying out). The caller marks them leased in the same unit.
   */
  readonly dueOutboxEntries: (
    now: Timestamp.Timestamp,
    limit: number,
    busyLanes?: ReadonlyArray<string>,
    filter?: DueFilter
  ) => Op<ReadonlyArray<OutboxEntry>>
  /** The entries about one record, oldest first. */
  readonly listOutboxEntries: (subjectId: string) => Op<ReadonlyArray<OutboxEntry>>
  /**
   * Holds every pending entry of `lane` but `except` that no one has leased at `now` (due at `HELD`); answers how many.
   * A lane whose entry failed waits for that one's retry, its others out of every lease's way: a receiver that is
   * down leaves no due backlog for each lease to walk past. Entries already held are not written again.
   */
  readonly holdLane: (lane: string, except: string, now: Timestamp.Timestamp) => Op<number>
  /** Makes the held entries of `lane` due at `now`; answers how many. */
  readonly resumeLane: (lane: string, now: Timestamp.Timestamp) => Op<number>
  /**
   * Deletes up to `limit` entries done or given up (last updated) before `settledBefore`, the oldest first, of the
   * kinds `deletedOnceSettled` only; answers how many. Pending entries, held ones included, are never deleted (Retention).
   */
  readonly deleteSettledOutboxEntries: (settledBefore: Timestamp.Timestamp, limit: number) => Op<number>
}

/**
 * When a held entry is due: never, until its lane is resumed. A time no clock reaches, so every due query passes it
 * over as it passes over an entry due later.
 */
export const HELD = "9999-12-31T23:59:59.999Z" as Timestamp.Timestamp

/** Writes a new pending entry for `kind` on `subjectId`, due at once (or at `dueAt`), in `lane` (or a lane of its own). */
export const enqueue = Effect.fnUntraced(function*(
  unit: OutboxStore,
  kind: EffectKind,
  clientId: ClientId,
  subjectId: string,
  lane: string | null = null,
  dueAt?: Timestamp.Timestamp
) {
  const now = yield* Timestamp.now
  const entry: OutboxEntry = {
    id: yield* (yield* Ids).next,
    kind,
    clientId,
    subjectId,
    lane,
    state: "pending",
    attempts: 0,
    nextAttemptAt: dueAt ?? now,
    leasedUntil: null,
    lastError: null,
    createdAt: now,
    updatedAt: now
  }
  yield* unit.insertOutboxEntry(entry)
  return entry
})

/** How a carried-out entry ends: done, or due again at a time (a follow-up that saw no change yet). */
export type Settlement =
  | { readonly _tag: "Done" }
  | { readonly _tag: "Again"; readonly at: Timestamp.Timestamp }

export const done: Settlement = { _tag: "Done" }
export const again = (at: Timestamp.Timestamp): Settlement => ({ _tag: "Again", at })

/** Records how `entry` ended, in the unit that made its effect's change (so both commit together). */
export const settle = (unit: OutboxStore, entry: OutboxEntry, settlement: Settlement) =>
  Effect.flatMap(Timestamp.now, (now) =>
    Effect.flatMap(unit.getOutboxEntry(entry.id), (found) =>
      Option.isNone(found) || found.value.state !== "pending"
        ? Effect.void
        : unit.updateOutboxEntry(
          settlement._tag === "Done"
            ? { ...found.value, state: "done", leasedUntil: null, lastError: null, updatedAt: now }
            : { ...found.value, nextAttemptAt: settlement.at, leasedUntil: null, lastError: null, updatedAt: now }
        )))

/**
 * Gives back the lease of entries this worker leased and did not begin (the rest of a lane whose receiver just failed,
 * the lanes waiting when the worker stops), due at `dueAt` or when they were: another worker, or this one, may take
 * them then instead of after their lease. Each keeps its attempts and last error. An entry is given back only while
 * it still holds the lease it was leased with (`entry.leasedUntil`): once that lease ran out another worker may have
 * leased it, and clearing that worker's lease would let a third take it while the second carries it out. One no
 * longer pending is left too.
 */
export const release = (unit: OutboxStore, entries: ReadonlyArray<OutboxEntry>, dueAt?: Timestamp.Timestamp) =>
  Effect.flatMap(Timestamp.now, (now) =>
    Effect.forEach(entries, (entry) =>
      Effect.flatMap(unit.getOutboxEntry(entry.id), (found) =>
        Option.isNone(found) || found.value.state !== "pending" || entry.leasedUntil === null || found.value.leasedUntil !== entry.leasedUntil
          ? Effect.void
          : unit.updateOutboxEntry({ ...found.value, nextAttemptAt: dueAt ?? found.value.nextAttemptAt, leasedUntil: null, updatedAt: now })), { discard: true }))
