/**
 * Idempotency-Key on POST (beyond the interface). The first request with a key claims it in the Storage port's
 * idempotency records, in the same database as the data, so the rules hold across nodes and restarts:
 * - a retry with the same key and the same request (method, path, body) replays the first answer;
 * - the same key with another request is 409 IDEMPOTENCY_KEY_REUSED;
 * - a retry while the first is still running is 409 IDEMPOTENCY_REQUEST_IN_PROGRESS;
 * - only a 2xx answer is kept: a refusal or a fault releases the key, since nothing was stored and the caller
 *   may fix the request and try again with the same key;
 * - keys are scoped to the API key id and expire (24 h by default). A claim left behind by a crashed node is taken
 *   over once it is older than the in-progress timeout.
 */
import { Storage, Timestamp, type Idempotency as CoreIdempotency } from "@custody-relay/core"
import { Effect, Exit, Option } from "effect"
import { IdempotencyKeyReused, IdempotencyRequestInProgress } from "./HttpError.js"
import type { Reply } from "./Reply.js"

export const HEADER = "idempotency-key"
export const REPLAYED_HEADER = "idempotent-replayed"
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/

/** A key is 1 to 255 visible ASCII characters. */
export const isValidKey = (key: string): boolean => KEY_PATTERN.test(key)

export interface IdempotencyOptions {
  readonly ttlSeconds: number
  /** After this long an in-progress claim is presumed abandoned (its node died) and may be taken over. */
  readonly inProgressTimeoutSeconds: number
}

export const defaults: IdempotencyOptions = { ttlSeconds: 24 * 60 * 60, inProgressTimeoutSeconds: 60 }

const hex = (buffer: ArrayBuffer): string =>
  Array.from(new Uint8Array(buffer), (byte) => byte.toString(16).padStart(2, "0")).join("")

/** Digest of what makes two requests "the same": method, path and the exact body. */
export const fingerprint = (method: string, pathname: string, body: string): Effect.Effect<string> =>
  Effect.promise(() => crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${method} ${pathname}\n${body}`))).pipe(
    Effect.map(hex)
  )

type Claim =
  | { readonly _tag: "Claimed" }
  | { readonly _tag: "Existing"; readonly record: CoreIdempotency.IdempotencyRecord }

const SWEEP_EVERY_MILLIS = 10 * 60 * 1000

export const make = (options: IdempotencyOptions) => {
  let lastSweep = 0

  const claim = (record: CoreIdempotency.IdempotencyRecord, nowMillis: number) =>
    Storage.run("write", (unit) =>
      Effect.gen(function*() {
        const existing = yield* unit.getIdempotencyRecord(record.scope, record.key)
        if (Option.isSome(existing)) {
          const found = existing.value
          const expired = Date.parse(found.expiresAt) <= nowMillis
          const abandoned = found.state === "in_progress" &&
            Date.parse(found.createdAt) + options.inProgressTimeoutSeconds * 1000 <= nowMillis
          if (!expired && !abandoned) return { _tag: "Existing", record: found } satisfies Claim
          yield* unit.updateIdempotencyRecord(record)
          return { _tag: "Claimed" } satisfies Claim
        }
        const inserted = yield* unit.claimIdempotencyRecord(record)
        if (inserted) return { _tag: "Claimed" } satisfies Claim
        const winner = yield* unit.getIdempotencyRecord(record.scope, record.key)
        return Option.isSome(winner) ? ({ _tag: "Existing", record: winner.value } satisfies Claim) : ({ _tag: "Claimed" } satisfies Claim)
      }))

  const sweep = (nowMillis: number) =>
    nowMillis - lastSweep < SWEEP_EVERY_MILLIS
      ? Effect.void
      : Effect.suspend(() => {
        lastSweep = nowMillis
        return Effect.asVoid(Storage.run("write", (unit) => unit.deleteExpiredIdempotencyRecords(Timestamp.fromMillis(nowMillis))))
      })

  /**
   * Runs `work` at most once per (scope, key) and request fingerprint. Only a 2xx reply is stored; a failure,
   * a non-2xx reply or a defect releases the key. The stored answer is replayed with `idempotent-replayed: true`.
   */
  const run = <E, R>(
    scope: string,
    key: string,
    requestHash: string,
    work: Effect.Effect<Reply, E, R>
  ): Effect.Effect<Reply, E | IdempotencyKeyReused | IdempotencyRequestInProgress, R | Storage.Storage> =>
    Effect.gen(function*() {
      const nowMillis = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
      yield* sweep(nowMillis)
      const record: CoreIdempotency.IdempotencyRecord = {
        scope,
        key,
        requestHash,
        state: "in_progress",
        responseStatus: null,
        responseBody: null,
        createdAt: Timestamp.fromMillis(nowMillis),
        expiresAt: Timestamp.fromMillis(nowMillis + options.ttlSeconds * 1000)
      }
      const claimed = yield* claim(record, nowMillis)
      if (claimed._tag === "Existing") {
        const found = claimed.record
        if (found.requestHash !== requestHash) return yield* new IdempotencyKeyReused()
        if (found.state === "in_progress" || found.responseStatus === null || found.responseBody === null) {
          return yield* new IdempotencyRequestInProgress()
        }
        return { status: found.responseStatus, body: found.responseBody, headers: { [REPLAYED_HEADER]: "true" } }
      }
      return yield* work.pipe(
        Effect.onExit((exit) => {
          const reply = Exit.isSuccess(exit) ? exit.value : undefined
          return reply !== undefined && reply.status >= 200 && reply.status < 300
            ? Storage.run("write", (unit) =>
              unit.updateIdempotencyRecord({ ...record, state: "completed", responseStatus: reply.status, responseBody: reply.body }))
            : Storage.run("write", (unit) => unit.deleteIdempotencyRecord(scope, key))
        })
      )
    })

  return { run }
}
