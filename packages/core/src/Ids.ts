/**
 * Identifiers of the custody domain. Every id is a UUID, branded by what it names, made at the edge (decoded from
 * a request or minted by the `Ids` port) and trusted inside. New ids are UUIDv7: time-ordered, so records sort by
 * creation and B-tree indexes stay append-mostly.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { v7 as uuidv7 } from "uuid"

const uuid = Schema.String.check(Schema.isUUID())

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

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** True when `value` is a UUID in its canonical textual form (any version): the check behind every id parameter. */
export const isUuid = (value: string): boolean => UUID_PATTERN.test(value)

/** Mints new ids. The default is UUIDv7; `layerSequential` gives repeatable ids for tests and demos. */
export class Ids extends Context.Service<Ids, {
  readonly next: Effect.Effect<string>
}>()("@custody-relay/core/Ids") {
  static readonly layer: Layer.Layer<Ids> = Layer.succeed(Ids, Ids.of({ next: Effect.sync(() => uuidv7()) }))

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
