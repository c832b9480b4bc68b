/**
 * Webhook subscriptions and deliveries: the records, their store, and the fan-out that turns each domain event
 * into one delivery per matching subscription, in the unit of work that appends the event (so a delivery exists
 * exactly when its event committed). Deliveries are carried out by the outbox worker (see Webhooks).
 */
import { Effect, Option, Schema, Struct } from "effect"
import type { DomainEvent } from "./DomainEvent.js"
import { ClientId, Ids } from "./Ids.js"
import * as Outbox from "./Outbox.js"
import type { StorageError } from "./Storage.js"
import * as Timestamp from "./Timestamp.js"

export const WebhookSubscription = Schema.Struct({
  id: Schema.String,
  clientId: ClientId,
  url: Schema.String,
  /** The event types delivered; empty: every type. */
  eventTypes: Schema.Array(Schema.String),
  enabled: Schema.Boolean,
  /** Why the relay disabled it (its receiver kept failing), or null. */
  disabledReason: Schema.NullOr(Schema.String),
  /** The signing secret (`whsec_…`): shown once, at creation or rotation. */
  secret: Schema.String,
  /** The secret before the last rotation, still signing until `previousSecretUntil`. */
  previousSecret: Schema.NullOr(Schema.String),
  previousSecretUntil: Schema.NullOr(Timestamp.Timestamp),
  /**
   * A delivery to it failed and is due again later: its other deliveries, new ones included, are held
   * (`Outbox.HELD`) until one succeeds, or it is turned off or on (see `Webhooks.holdDeliveries`).
   */
  deliveriesHeld: Schema.Boolean,
  createdAt: Timestamp.Timestamp,
  updatedAt: Timestamp.Timestamp
})
export type WebhookSubscription = typeof WebhookSubscription.Type

export const deliveryStates = ["pending", "delivered", "failed", "skipped"] as const

export const WebhookDelivery = Schema.Struct({
  id: Schema.String,
  subscriptionId: Schema.String,
  clientId: ClientId,
  /** The event's id: also the `webhook-id` a receiver de-duplicates by, the same on every attempt. */
  eventId: Schema.String,
  entityId: Schema.String,
  /** The event's time: deliveries of one record go out in this order, one after another. */
  eventAt: Timestamp.Timestamp,
  /** The JSON body, fixed when the delivery is made, so every attempt sends the same bytes. */
  payload: Schema.String,
  state: Schema.Literals(deliveryStates),
  attempts: Schema.Int,
  lastStatus: Schema.NullOr(Schema.Int),
  lastError: Schema.NullOr(Schema.String),
  lastLatencyMillis: Schema.NullOr(Schema.Int),
  createdAt: Timestamp.Timestamp,
  updatedAt: Timestamp.Timestamp
})
export type WebhookDelivery = typeof WebhookDelivery.Type

/** A subscription as its owner reads it: never a secret. */
export const SubscriptionView = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  eventTypes: Schema.Array(Schema.String),
  enabled: Schema.Boolean,
  disabledReason: Schema.NullOr(Schema.String),
  previousSecretValidUntil: Schema.NullOr(Timestamp.Timestamp),
  createdAt: Timestamp.Timestamp,
  updatedAt: Timestamp.Timestamp
})

/** The answer to a subscription or a rotation: the view and the signing secret, shown this once. */
export const SubscriptionWithSecret = Schema.Struct({ ...SubscriptionView.fields, secret: Schema.String })

/** One entry of a subscription's delivery log. */
export const DeliveryView = WebhookDelivery.mapFields(Struct.omit(["payload", "clientId"]))

export const NewSubscriptionInput = Schema.Struct({
  url: Schema.String.check(Schema.isMaxLength(2000)),
  eventTypes: Schema.optionalKey(Schema.Array(Schema.String.check(Schema.isMaxLength(64))).check(Schema.isMaxLength(64)))
})

/** The answer to a redelivery: how many deliveries it queued. */
export const Redelivered = Schema.Struct({ redelivered: Schema.Int })

export const RedeliverInput = Schema.Struct({
  eventId: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(64))),
  /** An instant as a caller may write it (Timestamp.WRITTEN), milliseconds optional. */
  since: Schema.optionalKey(Schema.String.check(Schema.isPattern(Timestamp.WRITTEN))),
  /** With `since`: the events up to this instant only (inclusive), to take a long stretch in parts. */
  until: Schema.optionalKey(Schema.String.check(Schema.isPattern(Timestamp.WRITTEN)))
})

type Op<A> = Effect.Effect<A, StorageError>

export interface WebhookStore {
  readonly insertWebhookSubscription: (subscription: WebhookSubscription) => Op<void>
  readonly getWebhookSubscription: (id: string) => Op<Option.Option<WebhookSubscription>>
  readonly updateWebhookSubscription: (subscription: WebhookSubscription) => Op<void>
  /** A client's subscriptions, oldest first. */
  readonly listWebhookSubscriptions: (clientId: ClientId) => Op<ReadonlyArray<WebhookSubscription>>
  readonly insertWebhookDelivery: (delivery: WebhookDelivery) => Op<void>
  readonly getWebhookDelivery: (id: string) => Op<Option.Option<WebhookDelivery>>
  readonly updateWebhookDelivery: (delivery: WebhookDelivery) => Op<void>
  /** A subscription's deliveries, newest first, at most `limit`. */
  readonly listWebhookDeliveries: (subscriptionId: string, limit: number) => Op<ReadonlyArray<WebhookDelivery>>
  /** Whether a delivery to the subscription of an earlier event of the same record (by log position) is still pending. */
  readonly hasEarlierPendingDelivery: (delivery: WebhookDelivery) => Op<boolean>
  /**
   * Brings due at `now` the held deliveries (`Outbox.HELD`) of every subscription that does not hold its deliveries;
   * answers how many. The worker's housekeeping: a hold and a resumption that raced on two nodes, or a delivery
   * queued held from a read of the subscription that a resumption overtook, leave no delivery held for good.
   */
  readonly resumeUnheldDeliveries: (now: Timestamp.Timestamp) => Op<number>
  /**
   * Deletes up to `limit` deliveries delivered, failed or skipped (last updated) before `settledBefore`, the oldest
   * first; answers how many. A pending delivery is never deleted (Retention).
   */
  readonly deleteSettledWebhookDeliveries: (settledBefore: Timestamp.Timestamp, limit: number) => Op<number>
}

export const matches = (subscription: WebhookSubscription, type: string): boolean =>
  subscription.enabled && (subscription.eventTypes.length === 0 || subscription.eventTypes.includes(type))

/** The event's JSON body as delivered (the same record the audit trail shows). */
export const payloadOf = (event: DomainEvent): string => JSON.stringify(event)

/** A delivery of `event` to `subscription`, written with its outbox entry in `unit`. */
export const enqueueDelivery = Effect.fnUntraced(function*(
  unit: WebhookStore & Outbox.OutboxStore,
  subscription: WebhookSubscription,
  event: DomainEvent,
  /**
   * Held when its subscription holds its deliveries (a new event's delivery); never, for a redelivery: an old event's
   * delivery counts as earlier than the failed one of its record that the hold waits on, which would wait for it.
   */
  held: boolean = subscription.deliveriesHeld
) {
  const now = yield* Timestamp.now
  const delivery: WebhookDelivery = {
    id: yield* (yield* Ids).next,
    subscriptionId: subscription.id,
    clientId: subscription.clientId,
    eventId: event.id,
    entityId: event.entityId,
    eventAt: event.at,
    payload: payloadOf(event),
    state: "pending",
    attempts: 0,
    lastStatus: null,
    lastError: null,
    lastLatencyMillis: null,
    createdAt: now,
    updatedAt: now
  }
  yield* unit.insertWebhookDelivery(delivery)
  // Order is kept per subscription (and record): its deliveries share a lane, and one slow receiver holds up no other.
  // A subscription whose delivery failed holds its new ones too, until that one is delivered (Webhooks.holdDeliveries).
  yield* Outbox.enqueue(unit, "deliverWebhook", subscription.clientId, delivery.id, subscription.id, held ? Outbox.HELD : undefined)
  return delivery
})

/**
 * Reads ahead what `fanOut` reads first, the client's subscriptions (a unit lists them once, see the store): a unit
 * that will append events issues this with its first reads, so where statements issued together share a round trip
 * (PostgreSQL) the list costs none of its own later, between the unit's writes. Changes nothing.
 */
export const readAheadFanOut = (unit: WebhookStore, clientId: ClientId) => Effect.asVoid(unit.listWebhookSubscriptions(clientId))

/** One delivery per enabled subscription of the event's client that takes its type, in the event's unit. */
export const fanOut = (unit: WebhookStore & Outbox.OutboxStore, event: DomainEvent) =>
  event.clientId === null
    ? Effect.void
    : Effect.flatMap(unit.listWebhookSubscriptions(event.clientId), (subscriptions) =>
      Effect.forEach(subscriptions.filter((s) => matches(s, event.type)), (s) => enqueueDelivery(unit, s, event), {
        discard: true
      }))
