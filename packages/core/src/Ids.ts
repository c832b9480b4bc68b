/**
 * Identifiers of the custody domain. Every id is a UUID, branded by what it names, made at the edge (decoded from
 * a request or minted by the `Ids` port) and trusted inside. New ids are UUIDv7: time-ordered, so records sort by
 * creation and B-tree indexes stay append-mostly.
 */
import { Context, Effect, Layer, Schema, SchemaTransformation } from "effect"
import { v7 as uuidv7 } from "uuid"

// Any version: the relay reads ids minted elsewhere too. RFC 9562 makes the hex digits case-insensitive on input,
// so an id in upper case is the same id; ids are minted and stored in lower case, the canonical form.
const UUID_PATTERN = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/

const isUuidText = Schema.isPattern(UUID_PATTERN, {
  expected: "a UUID",
  toJsonSchema: () => ({ format: "uuid", pattern: UUID_PATTERN.source })
})

const uuid = Schema.String.check(isUuidText)

export const ClientId = uuid.pipe(Schema.brand("ClientId"))
export type ClientId = typeof ClientId.Type
export const ApiUserId = uuid.pipe(Schema.brand("ApiUserId"))
export type ApiUserId = typeof ApiUserId.Type
export const AccountId = uuid.pipe(Schema.brand("AccountId"))
export type AccountId = typeof AccountId.Type
export const TransactionId = uuid.pipe(Schema.brand("TransactionId"))
export type TransactionId = typeof TransactionId.Type
export const WhitelistedAddressId = uuid.pipe(Schema.brand("WhitelistedAddressId"))
export type WhitelistedAddressId = typeof WhitelistedAddressId.Type
export const LedgerEntryId = uuid.pipe(Schema.brand("LedgerEntryId"))
export type LedgerEntryId = typeof LedgerEntryId.Type

/** True when `value` is a UUID in its textual form, in either case (any version): the check behind every id. */
export const isUuid = (value: string): boolean => UUID_PATTERN.test(value)

/** The id a well-formed UUID names, as it is stored: in lower case. */
export const canonicalUuid = (value: string): string => value.toLowerCase()

/** An id in a request body: a UUID (`isUuid`), decoded to its canonical form. */
export const UuidInput = uuid.pipe(Schema.decode(SchemaTransformation.toLowerCase()))

/**
 * A new UUIDv7: uuid's `v7`, with its random bytes drawn from a pool refilled 4 KiB at a time. Alone, `v7` asks
 * `crypto.getRandomValues` for 16 bytes per id, a call of a few microseconds through node's crypto binding: about 5%
 * of an initiation, which mints four ids (docs/benchmarks.md, sixth round). The millisecond and the counter follow
 * uuid's own rule (a random counter each new millisecond, one more within it), so ids keep the order they were
 * minted in.
 */
const mintUuidV7 = (() => {
  const POOL_BYTES = 4096
  let pool = new Uint8Array(0)
  let used = 0
  let msecs = -Infinity
  let seq = 0
  return (): string => {
    if (used + 16 > pool.length) {
      pool = crypto.getRandomValues(new Uint8Array(POOL_BYTES))
      used = 0
    }
    const random = pool.subarray(used, used + 16)
    used += 16
    const now = Date.now()
    if (now > msecs) {
      msecs = now
      seq = ((random[6] ?? 0) & 0x7f) << 24 | (random[7] ?? 0) << 16 | (random[8] ?? 0) << 8 | (random[9] ?? 0)
    } else {
      seq = (seq + 1) | 0
      if (seq === 0) msecs++
    }
    return uuidv7({ random, msecs, seq })
  }
})()

/** Mints new ids. The default is UUIDv7; `layerSequential` gives repeatable ids for tests and demos. */
export class Ids extends Context.Service<Ids, {
  readonly next: Effect.Effect<string>
}>()("@custody-relay/core/Ids") {
  static readonly layer: Layer.Layer<Ids> = Layer.succeed(Ids, Ids.of({ next: Effect.sync(mintUuidV7) }))

  /** Ids `00000000-0000-7000-8000-000000000001`, `...2`, ...: valid UUIDv7 shapes in creation order. */
  static readonly layerSequential: Layer.Layer<Ids> = Layer.effect(
    Ids,
    Effect.sync(() => {
      let counter = 0
      return Ids.of({
        next: Effect.sync(() => `00000000-0000-7000-8000-${(++counter).toString(16).padStart(12, "0")}`)
      })
    })
  )
}
