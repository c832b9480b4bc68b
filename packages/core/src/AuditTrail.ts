/**
 * The audit trail: the domain events of the caller's client, newest first, as our documented extension of the
 * interface. One permission ("View audit trail") covers it; client scope as everywhere: another client's record
 * is 404, whether asked for by id or named in a filter. The operator's view across clients has no principal.
 */
import { Effect } from "effect"
import { requireUuid } from "./Accounts.js"
import * as DomainEvent from "./DomainEvent.js"
import { AccountId, TransactionId, WhitelistedAddressId } from "./Ids.js"
import { operation } from "./Operation.js"
import * as Page from "./Page.js"
import { authorize, type ClientPrincipal, type Principal, requireOwned } from "./Principal.js"
import { InvalidRequest } from "./RelayError.js"
import * as Storage from "./Storage.js"
import * as Timestamp from "./Timestamp.js"

export type RecordWithTrail = "account" | "transaction" | "whitelisted_address"

/** The caller's record of this kind with this id, or NotFound whether it is absent or another client's (SCOPE-1). */
const requireRecord = (unit: Storage.StorageUnit, caller: ClientPrincipal, record: RecordWithTrail, id: string) => {
  switch (record) {
    case "account":
      return Effect.flatMap(unit.getAccount(AccountId.make(id)), requireOwned(caller, record, id))
    case "transaction":
      return Effect.flatMap(unit.getTransaction(TransactionId.make(id)), requireOwned(caller, record, id))
    case "whitelisted_address":
      return Effect.flatMap(unit.getWhitelistedAddress(WhitelistedAddressId.make(id)), requireOwned(caller, record, id))
  }
}

const requireInstant = (field: "from" | "to", value: string) => {
  const instant = Timestamp.parse(value)
  return instant === undefined ? Effect.fail(InvalidRequest.field(field, Timestamp.WRITTEN_HINT)) : Effect.succeed(instant)
}

const isEntityType = (value: string): value is DomainEvent.EntityType => (DomainEvent.entityTypes as ReadonlyArray<string>).includes(value)
const isEventType = (value: string): value is DomainEvent.EventType => (DomainEvent.eventTypes as ReadonlyArray<string>).includes(value)

/**
 * The filter in the forms storage compares, or a 400 naming the field. Storage compares instants as text, so a time
 * is brought to its one written form first: `from: "2026-01-31T12:00:00Z"` must take in an event at
 * 12:00:00.000Z, which as text sorts before it. HTTP's query decoding has done this already; an embedder's filter
 * through the Promise facade or the core arrives here as written, and a value that names nothing is refused
 * rather than answered with an empty trail.
 */
const checkedFilter = Effect.fnUntraced(function*(filter: DomainEvent.TrailFilter) {
  if (typeof filter !== "object" || filter === null) return yield* InvalidRequest.field("filter", "must be an object")
  const { entityId, entityType, from, to, types } = filter
  if (entityType !== undefined && !isEntityType(entityType)) {
    return yield* InvalidRequest.field("entityType", `must be one of ${DomainEvent.entityTypes.join(", ")}`)
  }
  if (types !== undefined && !(Array.isArray(types) && types.every(isEventType))) {
    return yield* InvalidRequest.field("types", `must be a list of event types, each one of ${DomainEvent.eventTypes.join(", ")}`)
  }
  const checked: DomainEvent.TrailFilter = {
    ...filter,
    // Each type once: a repeated one would only lengthen the statement's `IN` list, without end from an embedder.
    ...(types === undefined ? {} : { types: [...new Set(types)] }),
    ...(entityId === undefined ? {} : { entityId: yield* requireUuid("entityId", entityId) }),
    ...(from === undefined ? {} : { from: yield* requireInstant("from", from) }),
    ...(to === undefined ? {} : { to: yield* requireInstant("to", to) })
  }
  return checked
})

const envelope = (found: Page.Page<DomainEvent.LoggedEvent>, page: Page.PageRequest) =>
  Page.envelope({ items: found.items.map(DomainEvent.toView), total: found.total }, page)

/** The caller's client's events matching `filter`, newest first. */
export const list = operation("AuditTrail.list")(function*(
  principal: Principal,
  filter: DomainEvent.TrailFilter,
  page: Page.PageRequest
) {
  const caller = yield* authorize(principal, "auditTrail.list")
  filter = yield* checkedFilter(filter)
  const found = yield* Storage.run(Storage.unitForPage(page), (unit) => unit.pageEvents(caller.clientId, filter, page))
  return envelope(found, page)
})

/** The events of one of the caller's records, newest first: 404 when it is absent or another client's. */
export const ofRecord = operation("AuditTrail.ofRecord")(function*(
  principal: Principal,
  record: RecordWithTrail,
  id: string,
  page: Page.PageRequest
) {
  const caller = yield* authorize(principal, "auditTrail.list")
  id = yield* requireUuid("id", id)
  const found = yield* Storage.run(Storage.unitForPage(page), (unit) => pageOfRecord(unit, caller, record, id, page))
  return envelope(found, page)
})

/** The record's events, once the caller is shown to own the record. */
const pageOfRecord = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  caller: ClientPrincipal,
  record: RecordWithTrail,
  id: string,
  page: Page.PageRequest
) {
  yield* requireRecord(unit, caller, record, id)
  return yield* unit.pageEvents(caller.clientId, { entityId: id }, page)
})

/** Every client's events matching `filter`, newest first: the operator's view (administration, no principal). */
export const acrossClients = operation("AuditTrail.acrossClients")(function*(
  filter: DomainEvent.TrailFilter,
  page: Page.PageRequest
) {
  filter = yield* checkedFilter(filter)
  const found = yield* Storage.run(Storage.unitForPage(page), (unit) => unit.pageEvents(null, filter, page))
  return envelope(found, page)
})
