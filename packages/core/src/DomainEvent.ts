/**
 * Domain events: an immutable record of every state change, appended in the unit of work that makes the change,
 * so the log holds a change exactly when the change itself committed. They are the audit trail (who did what,
 * when, from which status to which) and the source of the outbox's later deliveries.
 *
 * `catalogue` is the one list of event types: for each, the entity it is about, what it means and the Schema of
 * its `data`. Appending encodes the data through that Schema; docs/events.md is generated from the catalogue.
 * Events of one entity are in the order of their `position` (the log's own sequence): the units that change one
 * entity hold its row, so they append one after another. No event carries a secret.
 */
import { Effect, Schema } from "effect"
import { ApiUserId, ClientId, Ids } from "./Ids.js"
import { DecimalString } from "./Money.js"
import type { OutboxStore } from "./Outbox.js"
import type * as Page from "./Page.js"
import { RateLimitPolicy } from "./RateLimiter.js"
import type { StorageError } from "./Storage.js"
import * as Timestamp from "./Timestamp.js"
import { fanOut, readAheadFanOut, type WebhookStore } from "./Webhook.js"

export const entityTypes = ["client", "api_user", "account", "whitelisted_address", "transaction"] as const
export const EntityType = Schema.Literals(entityTypes)
export type EntityType = typeof EntityType.Type

/** Who made the change: an API user (by id and name), the custody provider, an operator (administration), or the relay itself. */
export const Actor = Schema.Union([
  Schema.Struct({ kind: Schema.Literal("api_user"), apiUserId: ApiUserId, name: Schema.String }),
  Schema.Struct({ kind: Schema.Literal("provider") }),
  Schema.Struct({ kind: Schema.Literal("operator") }),
  Schema.Struct({ kind: Schema.Literal("system") })
])
export type Actor = typeof Actor.Type

export const provider: Actor = { kind: "provider" }
export const operator: Actor = { kind: "operator" }
export const system: Actor = { kind: "system" }
export const apiUser = (caller: { readonly apiUserId: ApiUserId; readonly name: string }): Actor => ({
  kind: "api_user",
  apiUserId: caller.apiUserId,
  name: caller.name
})

const Funds = Schema.Struct({ accountId: Schema.String, amount: DecimalString, transactionId: Schema.NullOr(Schema.String) })
const TransactionStep = Schema.Struct({ subStatus: Schema.NullOr(Schema.String) })
const Nothing = Schema.Struct({})

interface EventKind<E extends EntityType, S extends Schema.Top> {
  readonly entity: E
  readonly meaning: string
  readonly data: S
}
const kind = <E extends EntityType, S extends Schema.Top>(entity: E, meaning: string, data: S): EventKind<E, S> => ({
  entity,
  meaning,
  data
})

/** Every event type: its entity, its meaning and the Schema of its data. */
export const catalogue = {
  "client.created": kind("client", "A client was created by an operator.", Schema.Struct({ name: Schema.String })),
  "api_user.created": kind(
    "api_user",
    "An API user (a credential) was created; its key id and permissions, never its secret.",
    Schema.Struct({ keyId: Schema.String, name: Schema.String, permissions: Schema.Array(Schema.String) })
  ),
  "api_user.revoked": kind("api_user", "An API user's credential was revoked.", Nothing),
  "api_user.secret_rotated": kind("api_user", "An API user's secret was replaced; the old one stops working at once.", Nothing),
  "api_user.permissions_changed": kind(
    "api_user",
    "An API user's permissions were replaced.",
    Schema.Struct({ before: Schema.Array(Schema.String), after: Schema.Array(Schema.String) })
  ),
  "api_user.rate_limit_changed": kind(
    "api_user",
    "An API user was given a request budget of its own, or returned (null) to the one API users without their own get.",
    Schema.Struct({ before: Schema.NullOr(RateLimitPolicy), after: Schema.NullOr(RateLimitPolicy) })
  ),
  "account.created": kind(
    "account",
    "An account was requested; it awaits approval.",
    Schema.Struct({ name: Schema.String, workspace: Schema.String, assetId: Schema.String, role: Schema.String })
  ),
  "account.approved": kind("account", "An account was approved.", Nothing),
  "account.rejected": kind("account", "An account was rejected.", Nothing),
  "account.activated": kind(
    "account",
    "The provider gave an approved account its deposit address; it is active.",
    Schema.Struct({ address: Schema.String })
  ),
  "account.approval_policy_changed": kind(
    "account",
    "The number of approvals a transaction from the account needs was changed.",
    Schema.Struct({ requiredApprovals: Schema.Int })
  ),
  "whitelisted_address.created": kind(
    "whitelisted_address",
    "An external address was submitted for whitelisting; it is pending.",
    Schema.Struct({ name: Schema.String, address: Schema.String, assetType: Schema.String })
  ),
  "whitelisted_address.registered": kind(
    "whitelisted_address",
    "The provider registered the address under its own id.",
    Schema.Struct({ providerId: Schema.String })
  ),
  "whitelisted_address.approved": kind("whitelisted_address", "The address was approved; it is usable as a destination.", Nothing),
  "whitelisted_address.rejected": kind("whitelisted_address", "The address was rejected.", Nothing),
  "whitelisted_address.archived": kind("whitelisted_address", "The address was archived.", Nothing),
  "transaction.initiated": kind(
    "transaction",
    "A transfer was initiated; its funds are reserved and it awaits its quorum.",
    Schema.Struct({
      sourceAccountId: Schema.String,
      destinationId: Schema.String,
      destinationType: Schema.String,
      amount: DecimalString,
      assetType: Schema.String,
      networkFee: DecimalString,
      requiredApprovals: Schema.Int
    })
  ),
  "transaction.approved_by_approver": kind(
    "transaction",
    "One approver approved the transaction (the quorum may need more).",
    Schema.Struct({ approvals: Schema.Int, requiredApprovals: Schema.Int })
  ),
  "transaction.rejected": kind("transaction", "An approver rejected the transaction; its funds are released.", TransactionStep),
  "transaction.quorum_reached": kind("transaction", "The transaction has its approvals; it goes to the provider.", TransactionStep),
  "transaction.submitted": kind(
    "transaction",
    "The transfer was handed to the custody provider, which answered with its own id.",
    Schema.Struct({ providerTransactionId: Schema.String })
  ),
  "transaction.provider_approved": kind("transaction", "The provider's policy passed the transfer; it is signed.", TransactionStep),
  "transaction.provider_rejected": kind("transaction", "The provider's policy blocked the transfer.", TransactionStep),
  "transaction.broadcast": kind("transaction", "The transfer was broadcast; it gathers confirmations.", TransactionStep),
  "transaction.completed": kind("transaction", "The transfer is confirmed on chain.", TransactionStep),
  "transaction.failed": kind("transaction", "The provider or the network failed the transfer; its funds are released.", TransactionStep),
  "transaction.cancelled": kind("transaction", "The transfer was withdrawn while it awaited its approvals; its funds are released.", TransactionStep),
  "funds.credited": kind("account", "Funds arrived on an account (a deposit, or an internal transfer's destination).", Funds),
  "funds.reserved": kind("account", "Funds were reserved for a transfer (amount plus fee in the same asset).", Funds),
  "funds.released": kind("account", "A reservation ended without a transfer; the funds are available again.", Funds),
  "funds.settled": kind("account", "A reservation was spent by a completed transfer.", Funds)
} as const

export type EventType = keyof typeof catalogue
export const eventTypes = Object.keys(catalogue) as ReadonlyArray<EventType>
export const EventTypeSchema = Schema.Literals(eventTypes as [EventType, ...Array<EventType>])

export type DataOf<T extends EventType> = (typeof catalogue)[T]["data"]["Type"]

export const DomainEvent = Schema.Struct({
  /** Time-ordered (UUIDv7). */
  id: Schema.String,
  type: EventTypeSchema,
  /** The client whose data changed; null for a credential that belongs to no client. */
  clientId: Schema.NullOr(ClientId),
  entityType: EntityType,
  entityId: Schema.String,
  statusBefore: Schema.NullOr(Schema.String),
  statusAfter: Schema.NullOr(Schema.String),
  actor: Actor,
  at: Timestamp.Timestamp,
  /** The type's data, encoded by its Schema in the catalogue. */
  data: Schema.Record(Schema.String, Schema.Unknown)
})
export type DomainEvent = typeof DomainEvent.Type

/** An event as stored, with its place in the log. */
export interface LoggedEvent extends DomainEvent {
  readonly position: number
}

export interface EventFilter {
  readonly clientId?: string
  readonly entityId?: string
}

/** What the audit trail filters by: every given one must hold. Times are inclusive. */
export interface TrailFilter {
  /** One event, by its id. */
  readonly id?: string
  readonly entityType?: EntityType
  readonly entityId?: string
  readonly types?: ReadonlyArray<EventType>
  readonly from?: string
  readonly to?: string
}

/** Whether an event satisfies every given filter; the memory store uses it, and SQL adapters mirror it. */
export const trailMatches = (event: DomainEvent, filter: TrailFilter): boolean =>
  (filter.id === undefined || event.id === filter.id) &&
  (filter.entityType === undefined || event.entityType === filter.entityType) &&
  (filter.entityId === undefined || event.entityId === filter.entityId) &&
  (filter.types === undefined || filter.types.length === 0 || filter.types.includes(event.type)) &&
  (filter.from === undefined || event.at >= filter.from) &&
  (filter.to === undefined || event.at <= filter.to)

/** An event on the wire: the record less its log position. */
export const EventView = DomainEvent
export type EventView = DomainEvent

export const toView = ({ position: _, ...event }: LoggedEvent): EventView => event

/** What an event says about its entity, before it is given an id and a time. */
export interface Change<T extends EventType> {
  readonly type: T
  readonly clientId: ClientId | null
  readonly entityId: string
  readonly statusBefore?: string | null
  readonly statusAfter?: string | null
  readonly actor: Actor
  readonly data: DataOf<T>
}

/** The event for `change`, its data encoded by the catalogue's Schema for its type. */
export const make = Effect.fnUntraced(function*<T extends EventType>(change: Change<T>) {
  const kindOf = catalogue[change.type] as EventKind<EntityType, Schema.Top>
  const data = (yield* Schema.encodeUnknownEffect(kindOf.data as Schema.Codec<unknown, unknown>)(change.data).pipe(
    Effect.orDie
  )) as Record<string, unknown>
  const event: DomainEvent = {
    id: yield* (yield* Ids).next,
    type: change.type,
    clientId: change.clientId,
    entityType: kindOf.entity,
    entityId: change.entityId,
    statusBefore: change.statusBefore ?? null,
    statusAfter: change.statusAfter ?? null,
    actor: change.actor,
    at: yield* Timestamp.now,
    data
  }
  return event
})

type Op<A> = Effect.Effect<A, StorageError>

/** The event log, joined in a unit of work like every store. */
export interface EventStore {
  readonly appendEvent: (event: DomainEvent) => Op<void>
  /** Events matching `filter` in log order, after `afterPosition`, at most `limit`. */
  readonly listEvents: (filter: EventFilter, afterPosition: number, limit: number) => Op<ReadonlyArray<LoggedEvent>>
  /** A page of one client's events (every client's, for null) matching `filter`, newest first, with the total. */
  readonly pageEvents: (clientId: string | null, filter: TrailFilter, page: Page.PageRequest) => Op<Page.Page<LoggedEvent>>
}

/**
 * Appends the event for `change` in `unit`, and a webhook delivery for each subscription that takes it: the
 * change, its record and its deliveries commit or roll back together.
 */
export const append = <T extends EventType>(unit: EventStore & WebhookStore & OutboxStore, change: Change<T>) =>
  Effect.flatMap(make(change), (event) => Effect.andThen(unit.appendEvent(event), fanOut(unit, event)))

/** What `append` reads for `clientId`'s events, read now (see Webhook.readAheadFanOut). */
export const readAheadAppend = (unit: WebhookStore, clientId: ClientId) => readAheadFanOut(unit, clientId)

/**
 * `read`, a command's first read in its unit, issued together with what `append` reads for `clientId`'s events:
 * where statements issued together share a round trip (PostgreSQL), the command's events cost none of their own
 * between its writes, and a lock the read takes is held a round trip less.
 */
export const readingAhead = <A, E, R>(unit: WebhookStore, clientId: ClientId, read: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.all([read, readAheadAppend(unit, clientId)], { concurrency: 2 }), ([value]) => value)
