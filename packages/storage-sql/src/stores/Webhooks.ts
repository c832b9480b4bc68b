/** Webhook subscriptions and deliveries (core `Webhook.WebhookStore`) on SQL; event types as a JSON array. */
import { Outbox, type Webhook } from "@custody-relay/core"
import { Effect, Option } from "effect"
import { sql } from "kysely"
import type { WebhookDeliveriesTable, WebhookSubscriptionsTable } from "../schema/Database.js"
import { deletingSettled } from "../SettledRows.js"
import { type StoreArguments } from "../SqlUnit.js"
import { retimingPending } from "./OutboxEntries.js"

const encodeSubscription = (s: Webhook.WebhookSubscription): WebhookSubscriptionsTable => ({
  id: s.id,
  client_id: s.clientId,
  url: s.url,
  event_types: JSON.stringify(s.eventTypes),
  enabled: s.enabled ? 1 : 0,
  disabled_reason: s.disabledReason,
  secret: s.secret,
  previous_secret: s.previousSecret,
  previous_secret_until: s.previousSecretUntil,
  deliveries_held: s.deliveriesHeld ? 1 : 0,
  created_at: s.createdAt,
  updated_at: s.updatedAt
})

const decodeSubscription = (row: WebhookSubscriptionsTable): Webhook.WebhookSubscription => ({
  id: row.id,
  clientId: row.client_id as Webhook.WebhookSubscription["clientId"],
  url: row.url,
  eventTypes: JSON.parse(row.event_types) as ReadonlyArray<string>,
  enabled: Number(row.enabled) === 1,
  disabledReason: row.disabled_reason,
  secret: row.secret,
  previousSecret: row.previous_secret,
  previousSecretUntil: row.previous_secret_until as Webhook.WebhookSubscription["previousSecretUntil"],
  deliveriesHeld: Number(row.deliveries_held) === 1,
  createdAt: row.created_at as Webhook.WebhookSubscription["createdAt"],
  updatedAt: row.updated_at as Webhook.WebhookSubscription["updatedAt"]
})

const encodeDelivery = (d: Webhook.WebhookDelivery): WebhookDeliveriesTable => ({
  id: d.id,
  subscription_id: d.subscriptionId,
  client_id: d.clientId,
  event_id: d.eventId,
  entity_id: d.entityId,
  event_at: d.eventAt,
  payload: d.payload,
  state: d.state,
  attempts: d.attempts,
  last_status: d.lastStatus,
  last_error: d.lastError,
  last_latency_millis: d.lastLatencyMillis,
  created_at: d.createdAt,
  updated_at: d.updatedAt
})

const decodeDelivery = (row: WebhookDeliveriesTable): Webhook.WebhookDelivery => ({
  id: row.id,
  subscriptionId: row.subscription_id,
  clientId: row.client_id as Webhook.WebhookDelivery["clientId"],
  eventId: row.event_id,
  entityId: row.entity_id,
  eventAt: row.event_at as Webhook.WebhookDelivery["eventAt"],
  payload: row.payload,
  state: row.state as Webhook.WebhookDelivery["state"],
  attempts: Number(row.attempts),
  lastStatus: row.last_status === null ? null : Number(row.last_status),
  lastError: row.last_error,
  lastLatencyMillis: row.last_latency_millis === null ? null : Number(row.last_latency_millis),
  createdAt: row.created_at as Webhook.WebhookDelivery["createdAt"],
  updatedAt: row.updated_at as Webhook.WebhookDelivery["updatedAt"]
})

export const store = ({ db, engine, mode, read, statements: { first, rows, write, writeLater }, compiled: { lookups, writes } }: StoreArguments): Webhook.WebhookStore => {
  const locks = mode === "write" && engine.locksRowsForWrite
  // Only a write unit keeps what it listed (see RowsRead): its rows are emptied when each write unit begins.
  const listed = mode === "write" ? read.webhook_subscriptions : undefined
  return {
    insertWebhookSubscription(subscription) {
      listed?.delete(subscription.clientId)
      return writeLater(writes.insertWebhookSubscription(encodeSubscription(subscription)), 1, `webhook_subscriptions ${subscription.id}`, true)
    },
    getWebhookSubscription(id) {
      return Effect.map(
        first(db.selectFrom("webhook_subscriptions").selectAll().where("id", "=", id).$if(locks, (qb) => qb.forNoKeyUpdate())),
        (row) => (row === undefined ? Option.none() : Option.some(decodeSubscription(row)))
      )
    },
    updateWebhookSubscription(subscription) {
      listed?.delete(subscription.clientId)
      return writeLater(writes.updateWebhookSubscription(encodeSubscription(subscription)), 1, `webhook_subscriptions ${subscription.id}`, false)
    },
    listWebhookSubscriptions(clientId) {
      const kept = listed?.get(clientId)
      if (kept !== undefined) return Effect.succeed(kept)
      return Effect.map(
        rows(lookups.webhookSubscriptionsOfClient(clientId)),
        (found) => {
          const subscriptions = found.map(decodeSubscription)
          listed?.set(clientId, subscriptions)
          return subscriptions
        }
      )
    },
    insertWebhookDelivery(delivery) {
      return writeLater(writes.insertWebhookDelivery(encodeDelivery(delivery)), 1, `webhook_deliveries ${delivery.id}`, true)
    },
    getWebhookDelivery(id) {
      return Effect.map(
        first(db.selectFrom("webhook_deliveries").selectAll().where("id", "=", id).$if(locks, (qb) => qb.forNoKeyUpdate())),
        (row) => (row === undefined ? Option.none() : Option.some(decodeDelivery(row)))
      )
    },
    updateWebhookDelivery(delivery) {
      return writeLater(writes.updateWebhookDelivery(encodeDelivery(delivery)), 1, `webhook_deliveries ${delivery.id}`, false)
    },
    listWebhookDeliveries(subscriptionId, limit) {
      return Effect.map(
        rows(
          db.selectFrom("webhook_deliveries").selectAll().where("subscription_id", "=", engine.opaque.text(subscriptionId))
            .orderBy("id", "desc").limit(engine.opaque.integer(limit))
        ),
        (found) => found.map(decodeDelivery)
      )
    },
    resumeUnheldDeliveries(now) {
      // Each subscription that holds nothing, then its held entries by the lane's partial index (migration 11).
      return write(
        retimingPending(db, now, now)
          .where("lane", "in", db.selectFrom("webhook_subscriptions").select("id").where("deliveries_held", "=", sql.lit(0)))
          .where("next_attempt_at", "=", Outbox.HELD)
      )
    },
    deleteSettledWebhookDeliveries(settledBefore, limit) {
      return write(deletingSettled(db, "webhook_deliveries", settledBefore, limit, locks))
    },
    hasEarlierPendingDelivery(delivery) {
      return Effect.map(
        first(
          db.selectFrom("webhook_deliveries").innerJoin("domain_events", "domain_events.id", "webhook_deliveries.event_id")
            .select("webhook_deliveries.id")
            .where("webhook_deliveries.subscription_id", "=", delivery.subscriptionId)
            .where("webhook_deliveries.entity_id", "=", delivery.entityId)
            // A literal, so SQLite sees the partial index's predicate.
            .where("webhook_deliveries.state", "=", sql.lit("pending"))
            // Earlier in the log, not by the events' times: each node stamps its events with its own clock, and two
            // writes of one record are serialised by its row, so the log's order is the record's.
            .where((eb) => eb("domain_events.position", "<", eb.selectFrom("domain_events as this_event").select("this_event.position").where("this_event.id", "=", delivery.eventId)))
            .limit(sql.lit(1))
        ),
        (row) => row !== undefined
      )
    }
  }
}
