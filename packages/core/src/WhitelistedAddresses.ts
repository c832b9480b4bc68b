/**
 * Operations on whitelisted addresses: the interface's create, list and get, and the address-book workflow steps
 * (approve, reject, archive) that the interface leaves to the platform (our profile of WL-FLOW-1: they are
 * administration operations, run by the embedder's back office or the custody provider's callback).
 */
import { Effect, Option } from "effect"
import { requireUuid } from "./Accounts.js"
import { type Asset, requireAsset } from "./Asset.js"
import { type AddressReview, CustodyProvider, type ProgressReporting } from "./CustodyProvider.js"
import * as DomainEvent from "./DomainEvent.js"
import * as Idempotency from "./Idempotency.js"
import { Ids, WhitelistedAddressId } from "./Ids.js"
import { operation } from "./Operation.js"
import * as Outbox from "./Outbox.js"
import * as Page from "./Page.js"
import { authorize, type ClientPrincipal, type Principal, requireOwned } from "./Principal.js"
import { DuplicateWhitelistedAddress, InvalidAddress, NotFound, TransitionNotAllowed } from "./RelayError.js"
import { RelayConfig } from "./RelayConfig.js"
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
  const id = WhitelistedAddressId.make(yield* (yield* Ids).next)
  const now = yield* Timestamp.now
  return yield* Idempotency.write(WhitelistedAddress.WhitelistedAddressCreated, (unit) => createIn(unit, caller, input, asset, id, now))
})

/** Whitelisting's unit of work: the address checked for a duplicate in any spelling, stored, its registration queued. */
const createIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  caller: ClientPrincipal,
  input: WhitelistedAddress.CreateWhitelistedAddressInput,
  asset: Asset,
  id: WhitelistedAddressId,
  now: Timestamp.Timestamp
) {
  // One address is one entry however it is written (see Chain.spellingsOf); it is kept as the caller wrote it.
  // The unique index can only hold one spelling, so a client's whitelisting is serialized on its client row
  // (a read by id in a write unit locks it where the engine locks rows): two spellings cannot both pass.
  yield* DomainEvent.readingAhead(unit, caller.clientId, unit.getClient(caller.clientId))
  const existing = yield* unit.findWhitelistedAddress(caller.clientId, asset.assetId, asset.chain.spellingsOf(input.address))
  if (Option.isSome(existing)) return yield* new DuplicateWhitelistedAddress({ existingId: existing.value.id })
  // The provider is asked after commit (see Outbox); until it answers with its own id, the entry is known
  // to it by the request id the registration carries.
  const registration = yield* Outbox.enqueue(unit, "registerWhitelistedAddress", caller.clientId, id)
  const entry: WhitelistedAddress.WhitelistedAddress = {
    id,
    clientId: caller.clientId,
    providerId: registration.id,
    name: input.name,
    address: input.address,
    description: input.description ?? "",
    status: WhitelistedAddress.machine.initial,
    assetType: asset.assetId,
    createdAt: now,
    updatedAt: now
  }
  yield* unit.insertWhitelistedAddress(entry)
  yield* DomainEvent.append(unit, {
    type: "whitelisted_address.created",
    clientId: caller.clientId,
    entityId: id,
    statusAfter: entry.status,
    actor: DomainEvent.apiUser(caller),
    data: { name: entry.name, address: entry.address, assetType: entry.assetType }
  })
  return WhitelistedAddress.toCreated(entry)
})

export const list = operation("WhitelistedAddresses.list")(function*(
  principal: Principal,
  filter: WhitelistedAddress.WhitelistFilter,
  page: Page.PageRequest
) {
  const caller = yield* authorize(principal, "whitelistedAddresses.list")
  const found = yield* Storage.run(Storage.unitForPage(page), (unit) => unit.listWhitelistedAddresses(caller.clientId, filter, page))
  return Page.envelope({ items: found.items.map(WhitelistedAddress.toView), total: found.total }, page)
})

export const get = operation("WhitelistedAddresses.get")(function*(principal: Principal, id: string) {
  const caller = yield* authorize(principal, "whitelistedAddresses.get")
  id = yield* requireUuid("id", id)
  const entry = yield* Storage.run("lookup", (unit) =>
    Effect.flatMap(
      unit.getWhitelistedAddress(WhitelistedAddressId.make(id)),
      requireOwned(caller, "whitelisted_address", id)
    ))
  return WhitelistedAddress.toView(entry)
})

const eventOf = {
  approve: "whitelisted_address.approved",
  reject: "whitelisted_address.rejected",
  archive: "whitelisted_address.archived"
} as const satisfies Record<WhitelistedAddress.WhitelistEvent, DomainEvent.EventType>

const transitionIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  entry: WhitelistedAddress.WhitelistedAddress,
  event: WhitelistedAddress.WhitelistEvent,
  actor: DomainEvent.Actor
) {
  const status = yield* StateMachine.transition(WhitelistedAddress.machine, entry.status, event).pipe(
    Effect.fromResult,
    Effect.mapError(() =>
      new TransitionNotAllowed({ entity: "whitelisted address", id: entry.id, status: entry.status, action: event })
    )
  )
  const updated: WhitelistedAddress.WhitelistedAddress = { ...entry, status, updatedAt: yield* Timestamp.now }
  yield* unit.updateWhitelistedAddress(updated)
  yield* DomainEvent.append(unit, {
    type: eventOf[event],
    clientId: entry.clientId,
    entityId: entry.id,
    statusBefore: entry.status,
    statusAfter: status,
    actor,
    data: {}
  })
  return updated
})

/** Applies one step of the address-book workflow; a step the table does not allow is refused and changes nothing. */
export const transition = operation("WhitelistedAddresses.transition")(function*(
  id: string,
  event: WhitelistedAddress.WhitelistEvent
) {
  id = yield* requireUuid("id", id)
  return yield* Storage.run("write", (unit) =>
    Effect.flatMap(findAny(unit, id), (entry) => transitionIn(unit, entry, event, DomainEvent.operator)))
})

export const approve = (id: string) => transition(id, "approve")
export const reject = (id: string) => transition(id, "reject")
export const archive = (id: string) => transition(id, "archive")

/** The provider's verdict on an address it reviewed (a pushed callback, see ProviderReports); "pending" changes nothing. */
export const applyReview = operation("WhitelistedAddresses.applyReview")(function*(id: string, review: AddressReview) {
  id = yield* requireUuid("id", id)
  return yield* Storage.run("write", (unit) => reviewIn(unit, findAny(unit, id), review))
})

/**
 * A pushed verdict about the address `registration` (the outbox entry that registered it with the provider)
 * applied as `applyReview` does. The entry names the client, so the address is read with the look at the
 * client's webhook subscriptions its event needs: a provider pushes a verdict, not "pending".
 */
export const applyReportedReview = operation("WhitelistedAddresses.applyReportedReview")(function*(
  registration: Outbox.OutboxEntry,
  review: AddressReview
) {
  return yield* Storage.run("write", (unit) =>
    reviewIn(unit, DomainEvent.readingAhead(unit, registration.clientId, findAny(unit, registration.subjectId)), review))
})

/** The verdict applied to the address `read` finds, in `unit`, if it is still pending. */
const reviewIn = (
  unit: Storage.StorageUnit,
  read: Effect.Effect<WhitelistedAddress.WhitelistedAddress, NotFound | Storage.StorageError>,
  review: AddressReview
) =>
  Effect.flatMap(read, (entry) =>
    entry.status !== "PENDING" || review === "pending"
      ? Effect.succeed(entry)
      : transitionIn(unit, entry, review === "approved" ? "approve" : "reject", DomainEvent.provider))

/**
 * An outbox effect's look at its address before it calls the provider: a lookup (no transaction of its own), since
 * the unit after the call reads the address again, locked, and decides on that.
 */
const lookBefore = (outboxEntry: Outbox.OutboxEntry) => Effect.orDie(Storage.run("lookup", (unit) => findAny(unit, outboxEntry.subjectId)))

/**
 * Outbox effect: registers the address with the provider (request id: the entry's id), then records the
 * provider's own id and, for a polled provider, starts following its review.
 */
export const registerAtProvider = Effect.fnUntraced(function*(outboxEntry: Outbox.OutboxEntry) {
  const entry = yield* lookBefore(outboxEntry)
  const asset = yield* Effect.orDie(requireAsset(entry.assetType))
  const provider = yield* CustodyProvider
  const { providerId } = yield* provider.registerWhitelistedAddress({
    requestId: outboxEntry.id,
    entryId: entry.id,
    asset,
    address: entry.address
  })
  yield* Storage.run("write", (unit) => recordRegistration(unit, outboxEntry, entry, providerId, provider.progressReporting))
})

/**
 * In one unit: the provider's id recorded, the review followed when polled, the outbox entry settled. Only the unit
 * that records the id starts following: a registration carried out twice (a worker that outlived its lease, beside
 * the one that took the entry over) records it once and follows the review once.
 */
const recordRegistration = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  outboxEntry: Outbox.OutboxEntry,
  entry: WhitelistedAddress.WhitelistedAddress,
  providerId: string,
  progressReporting: ProgressReporting
) {
  const read = findAny(unit, entry.id)
  // Read ahead when the look found the provider's id new: the unit then appends its event.
  const current = yield* Effect.orDie(entry.providerId !== providerId ? DomainEvent.readingAhead(unit, entry.clientId, read) : read)
  if (current.providerId !== providerId) {
    yield* unit.updateWhitelistedAddress({ ...current, providerId, updatedAt: yield* Timestamp.now })
    yield* DomainEvent.append(unit, {
      type: "whitelisted_address.registered",
      clientId: current.clientId,
      entityId: current.id,
      statusBefore: current.status,
      statusAfter: current.status,
      actor: DomainEvent.provider,
      data: { providerId }
    })
    if (progressReporting === "polled" && current.status === "PENDING") {
      yield* Outbox.enqueue(unit, "followWhitelistedAddress", current.clientId, current.id)
    }
  }
  yield* Outbox.settle(unit, outboxEntry, Outbox.done)
})

/** Outbox effect: asks the provider where its review of the address stands, and applies its verdict. */
export const followReview = Effect.fnUntraced(function*(outboxEntry: Outbox.OutboxEntry) {
  const entry = yield* lookBefore(outboxEntry)
  if (entry.status !== "PENDING") return yield* Storage.run("write", (unit) => Outbox.settle(unit, outboxEntry, Outbox.done))
  const review = yield* (yield* CustodyProvider).addressReview(entry.providerId)
  const { providerPollMillis } = yield* RelayConfig
  const nowMillis = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
  yield* Storage.run("write", (unit) => recordReview(unit, outboxEntry, entry, review, nowMillis, providerPollMillis))
})

/** In one unit: the provider's verdict applied to an entry still pending, the outbox entry settled or due again. */
const recordReview = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  outboxEntry: Outbox.OutboxEntry,
  entry: WhitelistedAddress.WhitelistedAddress,
  review: AddressReview,
  nowMillis: number,
  providerPollMillis: number
) {
  const read = findAny(unit, entry.id)
  // Read ahead when the verdict is one: the unit then appends its event (the look found the entry pending).
  const reviewed = yield* Effect.orDie(reviewIn(unit, review !== "pending" ? DomainEvent.readingAhead(unit, entry.clientId, read) : read, review))
  // Still pending only while the provider's review is: a verdict moves the entry on.
  yield* Outbox.settle(
    unit,
    outboxEntry,
    reviewed.status === "PENDING" ? Outbox.again(Timestamp.fromMillis(nowMillis + providerPollMillis)) : Outbox.done
  )
})
