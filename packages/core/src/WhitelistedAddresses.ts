/**
 * Operations on whitelisted addresses: the interface's create, list and get, and the address-book workflow steps
 * (approve, reject, archive) that the interface leaves to the platform (our profile of WL-FLOW-1: they are
 * administration operations, run by the embedder's back office or the custody provider's callback).
 */
import { Effect, Option } from "effect"
import { requireUuid } from "./Accounts.js"
import { requireAsset } from "./Asset.js"
import { CustodyProvider } from "./CustodyProvider.js"
import { Ids, WhitelistedAddressId } from "./Ids.js"
import { operation } from "./Operation.js"
import * as Page from "./Page.js"
import { authorize, type Principal, requireOwned } from "./Principal.js"
import { DuplicateWhitelistedAddress, InvalidAddress, NotFound, TransitionNotAllowed } from "./RelayError.js"
import * as StateMachine from "./StateMachine.js"
import * as Storage from "./Storage.js"
import * as Timestamp from "./Timestamp.js"
import * as WhitelistedAddress from "./WhitelistedAddress.js"

const findAny = (unit: Storage.StorageUnit, id: string) =>
  Effect.flatMap(unit.getWhitelistedAddress(WhitelistedAddressId.make(id)), NotFound.unlessFound("whitelisted_address", id))

export const create = operation("WhitelistedAddresses.create")(function*(
  principal: Principal,
  input: WhitelistedAddress.CreateWhitelistedAddressInput
) {
  const caller = yield* authorize(principal, "whitelistedAddresses.create")
  const asset = yield* requireAsset(input.assetType)
  if (!asset.chain.isValidAddress(input.address)) return yield* new InvalidAddress({ assetType: asset.assetId })
  const provider = yield* CustodyProvider
  const id = WhitelistedAddressId.make(yield* (yield* Ids).next)
  const now = yield* Timestamp.now
  return yield* Storage.run("write", (unit) =>
    Effect.gen(function*() {
      // One address is one entry however it is written (see Chain.spellingsOf); it is kept as the caller wrote it.
      // The unique index can only hold one spelling, so a client's whitelisting is serialized on its client row
      // (a read by id in a write unit locks it where the engine locks rows): two spellings cannot both pass.
      yield* unit.getClient(caller.clientId)
      const existing = yield* unit.findWhitelistedAddress(caller.clientId, asset.assetId, asset.chain.spellingsOf(input.address))
      if (Option.isSome(existing)) return yield* new DuplicateWhitelistedAddress({ existingId: existing.value.id })
      const { providerId } = yield* provider.registerWhitelistedAddress(id, asset, input.address)
      const entry: WhitelistedAddress.WhitelistedAddress = {
        id,
        clientId: caller.clientId,
        providerId,
        name: input.name,
        address: input.address,
        description: input.description ?? "",
        status: WhitelistedAddress.machine.initial,
        assetType: asset.assetId,
        createdAt: now,
        updatedAt: now
      }
      yield* unit.insertWhitelistedAddress(entry)
      return WhitelistedAddress.toCreated(entry)
    }))
})

export const list = operation("WhitelistedAddresses.list")(function*(
  principal: Principal,
  filter: WhitelistedAddress.WhitelistFilter,
  page: Page.PageRequest
) {
  const caller = yield* authorize(principal, "whitelistedAddresses.list")
  const found = yield* Storage.run("read", (unit) => unit.listWhitelistedAddresses(caller.clientId, filter, page))
  return Page.envelope({ items: found.items.map(WhitelistedAddress.toView), total: found.total }, page)
})

export const get = operation("WhitelistedAddresses.get")(function*(principal: Principal, id: string) {
  const caller = yield* authorize(principal, "whitelistedAddresses.get")
  id = yield* requireUuid("id", id)
  const entry = yield* Storage.run("read", (unit) =>
    Effect.flatMap(
      unit.getWhitelistedAddress(WhitelistedAddressId.make(id)),
      requireOwned(caller, "whitelisted_address", id)
    ))
  return WhitelistedAddress.toView(entry)
})

/** Applies one step of the address-book workflow; a step the table does not allow is refused and changes nothing. */
export const transition = operation("WhitelistedAddresses.transition")(function*(
  id: string,
  event: WhitelistedAddress.WhitelistEvent
) {
  id = yield* requireUuid("id", id)
  const now = yield* Timestamp.now
  return yield* Storage.run("write", (unit) =>
    Effect.gen(function*() {
      const entry = yield* findAny(unit, id)
      const status = yield* StateMachine.transition(WhitelistedAddress.machine, entry.status, event).pipe(
        Effect.fromResult,
        Effect.mapError(() =>
          new TransitionNotAllowed({ entity: "whitelisted address", id, status: entry.status, action: event })
        )
      )
      const updated: WhitelistedAddress.WhitelistedAddress = { ...entry, status, updatedAt: now }
      yield* unit.updateWhitelistedAddress(updated)
      return updated
    }))
})

export const approve = (id: string) => transition(id, "approve")
export const reject = (id: string) => transition(id, "reject")
export const archive = (id: string) => transition(id, "archive")
