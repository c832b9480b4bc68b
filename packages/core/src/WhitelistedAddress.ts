/**
 * Whitelisted external addresses: the client's address book of destinations. A new entry is PENDING; approval or
 * rejection decides it; an entry that is no longer wanted is ARCHIVED, never deleted, so old transactions keep
 * their destination. Only APPROVED is usable as a destination (WL-STATE-1, TXN-DEST-1).
 */
import { Schema, Struct } from "effect"
import { ClientId, WhitelistedAddressId } from "./Ids.js"
import { FilterText, FilterValues } from "./Input.js"
import * as StateMachine from "./StateMachine.js"
import { Text } from "./Text.js"
import { Timestamp } from "./Timestamp.js"

export const statuses = ["PENDING", "APPROVED", "REJECTED", "ARCHIVED"] as const
export const WhitelistStatus = Schema.Literals(statuses)
export type WhitelistStatus = typeof WhitelistStatus.Type

export const machine = StateMachine.make({
  entity: "whitelisted address",
  states: statuses,
  initial: "PENDING",
  transitions: [
    { from: "PENDING", event: "approve", to: "APPROVED" },
    { from: "PENDING", event: "reject", to: "REJECTED" },
    { from: "PENDING", event: "archive", to: "ARCHIVED" },
    { from: "APPROVED", event: "archive", to: "ARCHIVED" },
    { from: "REJECTED", event: "archive", to: "ARCHIVED" }
  ]
} as const)
export type WhitelistEvent = (typeof machine.transitions)[number]["event"]

export const WhitelistedAddress = Schema.Struct({
  id: WhitelistedAddressId,
  clientId: ClientId,
  /** The custody provider's identifier of the address-book entry. */
  providerId: Schema.String,
  name: Schema.String,
  address: Schema.String,
  description: Schema.String,
  status: WhitelistStatus,
  assetType: Schema.String,
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type WhitelistedAddress = typeof WhitelistedAddress.Type

export const isUsableDestination = (entry: WhitelistedAddress): boolean => entry.status === "APPROVED"

/** Body of POST /relay/v1/whitelisted-addresses (WL-CREATE-1, LIM-SIZE-1). */
export const CreateWhitelistedAddressInput = Schema.Struct({
  name: Text(1, 100),
  address: Schema.String.check(Schema.isMaxLength(128)),
  assetType: Schema.String.check(Schema.isMaxLength(64)),
  description: Schema.optionalKey(Text(0, 500))
}).annotate({ examples: [{ name: "Exchange deposit", address: "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", assetType: "BTC" }] })
export type CreateWhitelistedAddressInput = typeof CreateWhitelistedAddressInput.Type

/** List and get record (WL-SHAPE-1). */
export const WhitelistedAddressView = WhitelistedAddress.mapFields(
  Struct.pick(["id", "providerId", "name", "address", "description", "status", "assetType"])
)
export type WhitelistedAddressView = typeof WhitelistedAddressView.Type

/** The create response: no providerId (WL-CREATE-2). */
export const WhitelistedAddressCreated = WhitelistedAddressView.mapFields(Struct.omit(["providerId"]))
export type WhitelistedAddressCreated = typeof WhitelistedAddressCreated.Type

export interface WhitelistFilter {
  readonly assetTypes?: ReadonlyArray<string>
  readonly statuses?: ReadonlyArray<WhitelistStatus>
}

/** A WhitelistFilter as an untyped caller passes it, checked as HTTP checks its query (the Promise facade decodes it). */
export const WhitelistFilterInput = Schema.Struct({
  assetTypes: Schema.optionalKey(FilterValues(FilterText(64))),
  statuses: Schema.optionalKey(FilterValues(WhitelistStatus))
})

export const toView = (entry: WhitelistedAddress): WhitelistedAddressView => ({
  id: entry.id,
  providerId: entry.providerId,
  name: entry.name,
  address: entry.address,
  description: entry.description,
  status: entry.status,
  assetType: entry.assetType
})

export const toCreated = (entry: WhitelistedAddress): WhitelistedAddressCreated => ({
  id: entry.id,
  name: entry.name,
  address: entry.address,
  description: entry.description,
  status: entry.status,
  assetType: entry.assetType
})
