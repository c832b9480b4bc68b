/**
 * Exactly-once commands. A command run with an idempotency key claims the key, does its work and records its
 * result in the same unit of work as its effects: a retry finds either nothing (the unit rolled back whole, so
 * it runs again) or the finished result (replayed), never half of one. Whether a first run is still going is
 * decided by the database's own locking: the running unit holds the key (its row, or a lock over every key), and
 * a second claim of it waits until that unit commits (then replays) or rolls back (then runs). A key is never taken
 * over by its age.
 *
 * The result is kept as the command's own value, Schema-encoded as JSON (no HTTP status or body), and the first
 * run answers with the value decoded from exactly that text, so a first answer and its replays are the same
 * value on any node, after any restart. Refusals are not kept: a refused command rolls back, releasing its key,
 * so the caller may correct the request and retry with the same key (Stripe's rule for a failed validation).
 *
 * Keys are scoped (the HTTP adapter and the Promise facade scope them to the API key id), carry a fingerprint of
 * the request (the same key with another request is `IdempotencyKeyReused`), and expire after
 * `RelayConfig.idempotencyKeyTtlSeconds`; an expired key is claimed anew.
 */
import { Context, Effect, Option, Schema } from "effect"
import { RelayConfig } from "./RelayConfig.js"
import { IdempotencyKeyReused } from "./RelayError.js"
import * as Storage from "./Storage.js"
import * as Timestamp from "./Timestamp.js"

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/

/** What a caller's key must be, the same over HTTP (the Idempotency-Key header) and through the Promise facade. */
export const KEY_RULE = "must be 1 to 255 visible ASCII characters"

/** Whether a caller's key keeps KEY_RULE. */
export const isValidKey = (key: unknown): key is string => typeof key === "string" && KEY_PATTERN.test(key)

/** A kept result: the key, what request it was for, and the command's encoded result. */
export const IdempotencyRecord = Schema.Struct({
  /** Whose key it is: keys of different callers never meet. */
  scope: Schema.String,
  key: Schema.String,
  /** What makes two requests "the same" (the HTTP adapter: a digest of method, path and body). */
  fingerprint: Schema.String,
  /** The command's result, encoded by its Schema as JSON text. */
  result: Schema.String,
  createdAt: Timestamp.Timestamp,
  expiresAt: Timestamp.Timestamp
})
export type IdempotencyRecord = typeof IdempotencyRecord.Type

/** What a claim records before the command runs. */
export type IdempotencyClaim = Omit<IdempotencyRecord, "result">

type Op<A> = Effect.Effect<A, Storage.StorageError>

/** The store of kept results, joined in a unit of work like every store. */
export interface IdempotencyStore {
  /**
   * Claims (scope, key) for this unit: records the claim, held by the unit until it ends, and answers none; or,
   * when a committed record that has not expired holds the key, answers it. A claim that meets one still held by
   * a running unit waits for it (or fails with a retryable conflict, and the unit is run again).
   */
  readonly claimIdempotencyKey: (claim: IdempotencyClaim) => Op<Option.Option<IdempotencyRecord>>
  /** The record of (scope, key) if committed and not expired at `now`: a look that claims nothing and waits for nothing. */
  readonly findIdempotencyRecord: (scope: string, key: string, now: Timestamp.Timestamp) => Op<Option.Option<IdempotencyRecord>>
  /** Stores the result of the command that claimed (scope, key) in this unit. */
  readonly completeIdempotencyKey: (scope: string, key: string, result: string) => Op<void>
  /** Removes up to `limit` records that expired before `now`, the longest expired first; answers how many. */
  readonly deleteExpiredIdempotencyRecords: (now: Timestamp.Timestamp, limit: number) => Op<number>
}

/**
 * The idempotency of the command about to run: its key, and whether the answer was a replay (set by the core,
 * read by the caller after the command, e.g. for the HTTP adapter's `Idempotent-Replayed` header).
 */
export class CommandKey {
  #replayed = false
  constructor(readonly scope: string, readonly key: string, readonly fingerprint: string) {}
  get replayed(): boolean {
    return this.#replayed
  }
  markReplayed(): void {
    this.#replayed = true
  }
  /**
   * The command ran under the key. A unit can run more than once (re-run after a lost race, or with a SQLite commit
   * group another unit undid), and a run that met a result it then lost with its group did not replay it: the run
   * that commits says which it was.
   */
  markRan(): void {
    this.#replayed = false
  }
}

/** The key the caller gave the command running in this fiber, if any (see `withKey`). */
export const CurrentKey = Context.Reference<CommandKey | undefined>("@custody-relay/core/Idempotency/CurrentKey", {
  defaultValue: () => undefined
})

/** Runs `command` under `key`: at most once per key, replaying the first result for a retry. */
export const withKey = <A, E, R>(command: Effect.Effect<A, E, R>, key: CommandKey): Effect.Effect<A, E, R> =>
  Effect.provideService(command, CurrentKey, key)

interface Kept {
  readonly encode: (value: unknown) => string
  readonly decode: (text: string) => unknown
}

// A command's result schema is one of a few constants; its JSON codec, derived afresh, is compiled anew at its first
// use, which cost a keyed command more than its encoding (docs/benchmarks.md, "initiations under an idempotency key").
const codecs = new WeakMap<Schema.Codec<unknown, unknown>, Kept>()

const keptAs = <S extends Schema.Codec<unknown, unknown>>(result: S) => {
  let kept = codecs.get(result)
  if (kept === undefined) {
    const json = Schema.fromJsonString(Schema.toCodecJson(result))
    kept = { encode: Schema.encodeSync(json), decode: Schema.decodeSync(json) }
    codecs.set(result, kept)
  }
  return kept as { readonly encode: (value: S["Type"]) => string; readonly decode: (text: string) => S["Type"] }
}

const replayOf = <S extends Schema.Codec<unknown, unknown>>(
  result: S,
  key: CommandKey,
  record: IdempotencyRecord
): Effect.Effect<S["Type"], IdempotencyKeyReused> => {
  if (record.fingerprint !== key.fingerprint) return Effect.fail(new IdempotencyKeyReused({ key: key.key }))
  key.markReplayed()
  return Effect.sync(() => keptAs(result).decode(record.result))
}

/**
 * A replay answered before the command does any work outside storage (a provider call): a look at committed
 * records only. None means the command must run; its `write` still claims the key, which settles a race.
 */
export const earlyReplay = <S extends Schema.Codec<unknown, unknown>>(result: S) =>
  Effect.withFiber((fiber): Effect.Effect<Option.Option<S["Type"]>, IdempotencyKeyReused, Storage.Storage> => {
    const key = fiber.getRef(CurrentKey)
    if (key === undefined) return Effect.succeed(Option.none())
    return Effect.flatMap(Timestamp.now, (now) =>
      Effect.flatMap(
        Storage.run("lookup", (unit) => unit.findIdempotencyRecord(key.scope, key.key, now)),
        (found) => Option.isNone(found) ? Effect.succeed(Option.none()) : Effect.map(replayOf(result, key, found.value), Option.some)
      ))
  })

/**
 * The command's unit of work: `work` and, when the command runs under a key, the key's claim and its result, all
 * in one write unit. The answer is the command's value as kept (decoded from the recorded text), or the first
 * run's value when a committed record held the key.
 */
export const write = <S extends Schema.Codec<unknown, unknown>, E, R>(
  result: S,
  work: (unit: Storage.StorageUnit) => Effect.Effect<S["Type"], E, R>
): Effect.Effect<S["Type"], Exclude<E, Storage.StorageError> | IdempotencyKeyReused, R | Storage.Storage> =>
  Effect.withFiber((fiber) => {
    const key = fiber.getRef(CurrentKey)
    if (key === undefined) return Storage.run("write", work)
    const ttlSeconds = fiber.getRef(RelayConfig).idempotencyKeyTtlSeconds
    return Storage.run("write", (unit) => writeUnderKey(unit, result, key, ttlSeconds, work))
  })

/** A command's unit under a key: the key claimed (or its first result replayed), the command, its result kept. */
const writeUnderKey = Effect.fnUntraced(function*<S extends Schema.Codec<unknown, unknown>, E, R>(
  unit: Storage.StorageUnit,
  result: S,
  key: CommandKey,
  ttlSeconds: number,
  work: (unit: Storage.StorageUnit) => Effect.Effect<S["Type"], E, R>
) {
  const nowMillis = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
  const claimed = yield* unit.claimIdempotencyKey({
    scope: key.scope,
    key: key.key,
    fingerprint: key.fingerprint,
    createdAt: Timestamp.fromMillis(nowMillis),
    expiresAt: Timestamp.fromMillis(nowMillis + ttlSeconds * 1000)
  })
  if (Option.isSome(claimed)) return yield* replayOf(result, key, claimed.value)
  key.markRan()
  const kept = keptAs(result)
  const text = kept.encode(yield* work(unit))
  yield* unit.completeIdempotencyKey(key.scope, key.key, text)
  return kept.decode(text)
})

/**
 * Keeps `value` as the answer of a request run under a key that changed nothing (a fee quote): a retry gets the
 * same answer, and the key is used up for other requests, as for a command. Without a key, no unit is opened.
 */
export const remember = <S extends Schema.Codec<unknown, unknown>>(result: S, value: S["Type"]) =>
  Effect.withFiber((fiber) =>
    fiber.getRef(CurrentKey) === undefined ? Effect.succeed(value) : write(result, () => Effect.succeed(value)))
