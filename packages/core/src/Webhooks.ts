/**
 * Webhooks, our extension: a client subscribes a URL to event types and receives each matching domain event,
 * signed with the Standard Webhooks scheme (`webhook-id`, `webhook-timestamp`, `webhook-signature:
 * v1,<base64 HMAC-SHA256 of id.timestamp.body>`, secrets `whsec_…`), so receivers verify with the reference
 * libraries in any language.
 *
 * Delivery is an outbox effect (see Outbox, OutboxWorker): after commit, never under a lock, at least once (a
 * receiver de-duplicates by `webhook-id`, the event's id), retried with the worker's backoff (about a day), in
 * order per record (a delivery waits while an earlier one of the same record is pending), each attempt logged on
 * the delivery (status, latency, error). A subscription whose delivery is given up is disabled, with the reason.
 * A rotated secret keeps signing beside the new one for a grace period, so receivers can switch without a gap.
 */
import { Context, Duration, Effect, Layer, Option, Schema } from "effect"
import ipaddr from "ipaddr.js"
import { Webhook as StandardWebhook } from "standardwebhooks"
import * as DomainEvent from "./DomainEvent.js"
import { type Given, overDefaults, wholeNumber } from "./EmbedderOptions.js"
import * as Idempotency from "./Idempotency.js"
import { requireUuid } from "./Accounts.js"
import { ClientId, Ids } from "./Ids.js"
import { operation } from "./Operation.js"
import * as Outbox from "./Outbox.js"
import { authorize, type ClientPrincipal, type Principal } from "./Principal.js"
import { InvalidRequest, NotFound, TransitionNotAllowed } from "./RelayError.js"
import * as Storage from "./Storage.js"
import * as Timestamp from "./Timestamp.js"
import * as Webhook from "./Webhook.js"

/** What sends one delivery: an HTTP POST; its answer's status, or a failure (no answer, a timeout). */
export class WebhookTransport extends Context.Service<WebhookTransport, {
  readonly post: (
    url: string,
    headers: Readonly<Record<string, string>>,
    body: string,
    timeoutMillis: number
  ) => Effect.Effect<{ readonly status: number }, WebhookNotDelivered>
}>()("@custody-relay/core/WebhookTransport") {
  /** The Web platform's `fetch`, with the timeout as an abort signal; redirects are not followed. */
  static readonly layerFetch: Layer.Layer<WebhookTransport> = Layer.succeed(
    WebhookTransport,
    WebhookTransport.of({
      post: (url, headers, body, timeoutMillis) =>
        Effect.tryPromise({
          try: async (signal) => {
            const response = await fetch(url, {
              method: "POST",
              headers: { "content-type": "application/json", ...headers },
              body,
              redirect: "manual",
              signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMillis)])
            })
            await response.body?.cancel()
            return { status: response.status }
          },
          catch: (cause) => new WebhookNotDelivered({ detail: cause instanceof Error ? cause.message : String(cause) })
        })
    })
  )
}

/** A delivery attempt that got no 2xx answer. */
export class WebhookNotDelivered extends Schema.TaggedError<WebhookNotDelivered>()("WebhookNotDelivered", {
  detail: Schema.String
}) {
  override get message() {
    return this.detail
  }
}

export interface WebhookSettingsShape {
  /** How long one delivery waits for its answer. */
  readonly timeoutMillis: number
  /** How long a rotated secret keeps signing beside the new one. */
  readonly rotationGraceSeconds: number
  /** Whether a subscription may target loopback, private and link-local addresses (see the default's note). */
  readonly allowPrivateTargets: boolean
}

/** How webhooks behave; an embedder may provide another. */
export const WebhookSettings = Context.Reference<WebhookSettingsShape>("@custody-relay/core/WebhookSettings", {
  defaultValue: () => ({
    /** How long one delivery waits for its answer. */
    timeoutMillis: 10_000,
    /** How long a rotated secret keeps signing beside the new one. */
    rotationGraceSeconds: 24 * 60 * 60,
    /**
     * Whether a subscription may target loopback, private and link-local addresses. Off: a client could otherwise
     * make the relay call its own network (SSRF). Addresses are judged however they are written, and `localhost` and
     * its subdomains as names (isNonPublicHost); other names are not resolved here: a transport that sees the address
     * it connects to checks it (the server's layerNodeWebhookTransport), else the deployment's egress policy must.
     */
    allowPrivateTargets: false
  })
})

/**
 * The webhook settings an embedder gives, over the defaults (an entry given as `undefined` keeps its default), each
 * checked: a RangeError naming the setting otherwise (see EmbedderOptions).
 */
export const settingsOf = (given?: Given<WebhookSettingsShape>): WebhookSettingsShape => {
  const settings = overDefaults(WebhookSettings.defaultValue(), given)
  wholeNumber("webhooks.timeoutMillis", settings.timeoutMillis, 1)
  wholeNumber("webhooks.rotationGraceSeconds", settings.rotationGraceSeconds, 0)
  return settings
}

const SECRET_BYTES = 24

const newSecret = Effect.sync(() => {
  const bytes = crypto.getRandomValues(new Uint8Array(SECRET_BYTES))
  return `whsec_${btoa(String.fromCharCode(...bytes))}`
})

/**
 * Whether a URL's host (as `URL` writes it: IPv4 in dotted decimal, IPv6 in brackets) is one a subscription may not
 * target unless allowed: `localhost` and its subdomains, and every address but a public unicast one, by ipaddr.js's
 * table of special ranges (loopback, private, link-local, unique-local, carrier-grade NAT, unspecified, multicast,
 * broadcast, reserved, benchmarking, documentation, and the IPv6 prefixes that carry an IPv4 address: 6to4, Teredo,
 * NAT64). An IPv4-mapped address (`::ffff:127.0.0.1`) is judged by its IPv4 address, and an IPv4-compatible one
 * (`::127.0.0.1`, deprecated, which some stacks still route to IPv4) is refused, as both reach IPv4 hosts.
 */
export const isNonPublicHost = (hostname: string): boolean => {
  const host = hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname
  if (!ipaddr.isValid(host)) {
    const name = host.toLowerCase().replace(/\.$/, "")
    return name === "localhost" || name.endsWith(".localhost")
  }
  const address = ipaddr.parse(host)
  if (address.kind() === "ipv6") {
    const v6 = address as ipaddr.IPv6
    if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().range() !== "unicast"
    if (v6.parts.slice(0, 6).every((part) => part === 0)) return true
  }
  return address.range() !== "unicast"
}

/** A target a subscription may have: http(s), no credentials in it, and (unless allowed) no private address. */
const requireTarget = (url: string, allowPrivate: boolean) => {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return Effect.fail(InvalidRequest.field("url", "must be an absolute http or https URL"))
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") return Effect.fail(InvalidRequest.field("url", "must be http or https"))
  if (parsed.username !== "" || parsed.password !== "") return Effect.fail(InvalidRequest.field("url", "must not carry credentials"))
  if (url.length > 2000) return Effect.fail(InvalidRequest.field("url", "must be at most 2000 characters"))
  if (!allowPrivate && isNonPublicHost(parsed.hostname)) {
    return Effect.fail(InvalidRequest.field("url", "must not target a loopback, private or link-local address"))
  }
  return Effect.succeed(parsed.toString())
}

const requireTypes = (types: ReadonlyArray<string>) => {
  const unknown = types.filter((type) => !(DomainEvent.eventTypes as ReadonlyArray<string>).includes(type))
  return unknown.length === 0 ? Effect.succeed(types) : Effect.fail(InvalidRequest.field("eventTypes", `unknown event types: ${unknown.join(", ")}`))
}

/** A subscription as its owner reads it: never a secret. */
export const toView = (s: Webhook.WebhookSubscription) => ({
  id: s.id,
  url: s.url,
  eventTypes: s.eventTypes,
  enabled: s.enabled,
  disabledReason: s.disabledReason,
  previousSecretValidUntil: s.previousSecretUntil,
  createdAt: s.createdAt,
  updatedAt: s.updatedAt
})

/**
 * The caller's subscription with this id. An id is a UUID in any case (the canonical, lower-case one is looked up);
 * anything else is 400 before it reaches a store (a NUL byte in it failed PostgreSQL's UTF-8 check: a 500).
 */
const findOwned = (unit: Storage.StorageUnit, caller: ClientPrincipal, id: string) =>
  Effect.flatMap(requireUuid("id", id), (canonical) =>
    Effect.flatMap(unit.getWebhookSubscription(canonical), (found) =>
      Option.isSome(found) && found.value.clientId === caller.clientId
        ? Effect.succeed(found.value)
        // Absent or another client's: the same NotFound (SCOPE-1).
        : Effect.fail(new NotFound({ resource: "webhook_subscription", id: canonical }))))

export interface NewSubscription {
  readonly url: string
  readonly eventTypes?: ReadonlyArray<string>
}

/** Subscribes a URL; the answer carries the signing secret, the only time it is shown. */
export const subscribe = operation("Webhooks.subscribe")(function*(principal: Principal, input: NewSubscription) {
  const caller = yield* authorize(principal, "webhooks.manage")
  const settings = yield* WebhookSettings
  const url = yield* requireTarget(input.url, settings.allowPrivateTargets)
  const eventTypes = yield* requireTypes(input.eventTypes ?? [])
  const now = yield* Timestamp.now
  const subscription: Webhook.WebhookSubscription = {
    id: yield* (yield* Ids).next,
    clientId: caller.clientId,
    url,
    eventTypes: [...eventTypes],
    enabled: true,
    disabledReason: null,
    secret: yield* newSecret,
    previousSecret: null,
    previousSecretUntil: null,
    deliveriesHeld: false,
    createdAt: now,
    updatedAt: now
  }
  // Under an idempotency key the answer, secret and all, is kept with the subscription: a retry is answered the
  // subscription the first run made, not a second one signing with a secret its client never saw.
  return yield* Idempotency.write(
    Webhook.SubscriptionWithSecret,
    (unit) => Effect.as(unit.insertWebhookSubscription(subscription), { ...toView(subscription), secret: subscription.secret })
  )
})

export const list = operation("Webhooks.list")(function*(principal: Principal) {
  const caller = yield* authorize(principal, "webhooks.manage")
  const found = yield* Storage.run("read", (unit) => unit.listWebhookSubscriptions(caller.clientId))
  return found.map(toView)
})

export const get = operation("Webhooks.get")(function*(principal: Principal, id: string) {
  const caller = yield* authorize(principal, "webhooks.manage")
  return toView(yield* Storage.run("lookup", (unit) => findOwned(unit, caller, id)))
})

/** A new signing secret (shown once); the old one keeps signing beside it for the grace period. */
export const rotateSecret = operation("Webhooks.rotateSecret")(function*(principal: Principal, id: string) {
  const caller = yield* authorize(principal, "webhooks.manage")
  const secret = yield* newSecret
  const nowMillis = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
  const { rotationGraceSeconds } = yield* WebhookSettings
  // Kept under an idempotency key, as a subscription is: a retried rotation answers the first one's secret rather
  // than rotating again, which would end at once the grace of the secret its receivers still verify with.
  return yield* Idempotency.write(
    Webhook.SubscriptionWithSecret,
    (unit) => Effect.map(rotateIn(unit, caller, id, secret, nowMillis, rotationGraceSeconds), (rotated) => ({ ...toView(rotated), secret }))
  )
})

/** A rotation's unit of work: the new secret signs, the old one beside it until the grace ends. */
const rotateIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  caller: ClientPrincipal,
  id: string,
  secret: string,
  nowMillis: number,
  rotationGraceSeconds: number
) {
  const current = yield* findOwned(unit, caller, id)
  const next: Webhook.WebhookSubscription = {
    ...current,
    secret,
    previousSecret: current.secret,
    previousSecretUntil: Timestamp.fromMillis(nowMillis + rotationGraceSeconds * 1000),
    updatedAt: Timestamp.fromMillis(nowMillis)
  }
  yield* unit.updateWebhookSubscription(next)
  return next
})

/** How a toggle finds the subscription it changes: the caller's own, or any (the operator's). */
type FindSubscription = (unit: Storage.StorageUnit) => Effect.Effect<Webhook.WebhookSubscription, NotFound | InvalidRequest | Storage.StorageError>

const toggle = Effect.fnUntraced(function*(find: FindSubscription, enabled: boolean) {
  // A JavaScript caller's "false" is truthy: kept, it would leave on what was meant off, in memory and on SQLite alike.
  if (typeof enabled !== "boolean") return yield* InvalidRequest.field("enabled", "must be true or false")
  const now = yield* Timestamp.now
  return yield* Idempotency.write(Webhook.SubscriptionView, (unit) => Effect.map(toggleIn(unit, find, enabled, now), toView))
})

const toggleIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  find: FindSubscription,
  enabled: boolean,
  now: Timestamp.Timestamp
) {
  const current = yield* find(unit)
  const next = { ...current, enabled, disabledReason: enabled ? null : current.disabledReason, deliveriesHeld: false, updatedAt: now }
  yield* unit.updateWebhookSubscription(next)
  // Turned off, its held deliveries come due to be skipped, as every delivery due while it is off is; turned on, they
  // go out.
  if (current.deliveriesHeld) yield* unit.resumeLane(current.id, now)
  return next
})

/** Turns a subscription on (clearing why it was disabled) or off. */
export const setEnabled = operation("Webhooks.setEnabled")(function*(principal: Principal, id: string, enabled: boolean) {
  const caller = yield* authorize(principal, "webhooks.manage")
  return yield* toggle((unit) => findOwned(unit, caller, id), enabled)
})

/** A client's subscriptions, for its operator (administration, no principal): never a signing secret. */
export const listOfClient = operation("Webhooks.listOfClient")(function*(clientId: string) {
  const id = ClientId.make(yield* requireUuid("clientId", clientId))
  const found = yield* Storage.run("read", (unit) => unit.listWebhookSubscriptions(id))
  return found.map(toView)
})

/** The operator turns any client's subscription on or off (administration, no principal). */
export const setEnabledByOperator = operation("Webhooks.setEnabledByOperator")(function*(id: string, enabled: boolean) {
  return yield* toggle((unit) =>
    Effect.flatMap(requireUuid("id", id), (canonical) =>
      Effect.flatMap(unit.getWebhookSubscription(canonical), (found) =>
        Option.isSome(found) ? Effect.succeed(found.value) : Effect.fail(new NotFound({ resource: "webhook_subscription", id: canonical })))), enabled)
})

/** The delivery log of a subscription, newest first (no payload: the audit trail has the events). */
export const deliveries = operation("Webhooks.deliveries")(function*(principal: Principal, id: string, limit: number) {
  const caller = yield* authorize(principal, "webhooks.manage")
  const found = yield* Storage.run("read", (unit) =>
    Effect.flatMap(findOwned(unit, caller, id), (subscription) => unit.listWebhookDeliveries(subscription.id, limit)))
  return found.map(({ payload: _, clientId: __, ...delivery }) => delivery)
})

/**
 * The most events one redelivery queues. A redelivery runs in one write unit, which on SQLite every other write of
 * the node waits for: uncapped, one call could queue every event a client ever had (20,000 took 1.2 s, holding
 * another client's write 0.6 to 0.9 s). A longer stretch is taken in parts, with `since` and `until`.
 */
export const MAX_REDELIVERED = 1_000

/**
 * Delivers again one event (by id) or every event in a stretch of time (`since`, and `until` if given, both
 * inclusive; at most MAX_REDELIVERED of them, else refused, saying how many matched), to this subscription: new
 * deliveries, each signed anew with the same `webhook-id`, so a receiver that had them de-duplicates them.
 */
export const redeliver = operation("Webhooks.redeliver")(function*(
  principal: Principal,
  id: string,
  what: { readonly eventId?: string; readonly since?: string; readonly until?: string }
) {
  const caller = yield* authorize(principal, "webhooks.manage")
  if ((what.eventId === undefined) === (what.since === undefined)) {
    return yield* InvalidRequest.field("eventId", "give exactly one of eventId and since")
  }
  if (what.until !== undefined && what.since === undefined) return yield* InvalidRequest.field("until", "goes with since")
  const since = yield* instantIn("since", what.since)
  const until = yield* instantIn("until", what.until)
  const eventId = what.eventId === undefined ? undefined : yield* requireUuid("eventId", what.eventId)
  const filter: DomainEvent.TrailFilter = since === undefined
    ? { id: eventId ?? "" }
    : { from: since, ...(until === undefined ? {} : { to: until }) }
  return yield* Idempotency.write(Webhook.Redelivered, (unit) => redeliverIn(unit, caller, id, filter, eventId))
})

/** The instant a caller wrote in `field`, if any (Timestamp.parse); one that names no instant is refused. */
const instantIn = (field: "since" | "until", written: string | undefined): Effect.Effect<Timestamp.Timestamp | undefined, InvalidRequest> => {
  if (written === undefined) return Effect.succeed(undefined)
  const instant = Timestamp.parse(written)
  return instant === undefined ? Effect.fail(InvalidRequest.field(field, Timestamp.WRITTEN_HINT)) : Effect.succeed(instant)
}

/** A redelivery's unit of work: the matching events found and a new delivery of each queued, oldest first. */
const redeliverIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  caller: ClientPrincipal,
  id: string,
  events: DomainEvent.TrailFilter,
  eventId: string | undefined
) {
  const subscription = yield* findOwned(unit, caller, id)
  // A disabled subscription's deliveries are skipped as they come due: queued now, they would be dropped unsent.
  if (!subscription.enabled) {
    return yield* new TransitionNotAllowed({ entity: "webhook subscription", id: subscription.id, status: "disabled", action: "redeliver (enable it first)" })
  }
  // Only the types the subscription takes are read (all of them when it names none), so every event found is one it
  // takes.
  const filter = subscription.eventTypes.length === 0 ? events : { ...events, types: subscription.eventTypes as ReadonlyArray<DomainEvent.EventType> }
  const first = yield* unit.pageEvents(caller.clientId, filter, { page: 1, limit: 100 })
  if (first.total > MAX_REDELIVERED) {
    return yield* InvalidRequest.field(
      "since",
      `${first.total} events match; at most ${MAX_REDELIVERED} are delivered again at once: take the stretch in parts with since and until`
    )
  }
  // The matching events, walking the trail's pages (newest first), then sent oldest first. Events another unit
  // commits meanwhile (PostgreSQL's write units read committed rows at each statement) move the later pages along:
  // what they push onto the next page is read twice and kept once, and the walk goes on to the page the list now
  // ends on, by each page's own total, so the oldest are not pushed past it.
  const found = new Map(first.items.map((event) => [event.id, event]))
  for (let page = 2, total = first.total; (page - 1) * 100 < total; page++) {
    const events = yield* unit.pageEvents(caller.clientId, filter, { page, limit: 100 })
    if (events.items.length === 0) break
    for (const event of events.items) found.set(event.id, event)
    total = events.total
  }
  const chosen = [...found.values()].sort((a, b) => a.position - b.position)
  if (eventId !== undefined && chosen.length === 0) return yield* new NotFound({ resource: "event", id: eventId })
  for (const event of chosen) yield* Webhook.enqueueDelivery(unit, subscription, DomainEvent.toView(event), false)
  return { redelivered: chosen.length }
})

const signatureOf = (subscription: Webhook.WebhookSubscription, messageId: string, at: Date, body: string, now: string) => {
  const secrets = subscription.previousSecret !== null && subscription.previousSecretUntil !== null && subscription.previousSecretUntil > now
    ? [subscription.secret, subscription.previousSecret]
    : [subscription.secret]
  return secrets.map((secret) => new StandardWebhook(secret).sign(messageId, at, body)).join(" ")
}

/** Outbox effect: sends one delivery, after any earlier one of the same record, and logs the attempt. */
export const deliver = Effect.fnUntraced(function*(entry: Outbox.OutboxEntry) {
  // A lookup (no transaction of its own): what it finds is sent once and then logged, and a delivery only ever moves
  // from pending; on SQLite a read unit would also end the open group commit early.
  const found = yield* Storage.run("lookup", (unit) => findDelivery(unit, entry))
  const nowMillis = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
  const now = Timestamp.fromMillis(nowMillis)
  if (Option.isNone(found) || found.value.delivery.state !== "pending" || !found.value.subscription.enabled) {
    const skipped = Option.isSome(found) && found.value.delivery.state === "pending" ? found.value.delivery : undefined
    return yield* Storage.run("write", (unit) => skipDelivery(unit, entry, skipped, now))
  }
  const { delivery, subscription, waiting } = found.value
  // In order per record: an earlier delivery of the same record goes first.
  if (waiting) return yield* Storage.run("write", (unit) => waitForEarlier(unit, entry, delivery, nowMillis))
  const { timeoutMillis } = yield* WebhookSettings
  const at = new Date(nowMillis)
  const headers = {
    "webhook-id": delivery.eventId,
    "webhook-timestamp": String(Math.floor(nowMillis / 1000)),
    "webhook-signature": signatureOf(subscription, delivery.eventId, at, delivery.payload, now)
  }
  const started = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
  const answer = yield* Effect.result((yield* WebhookTransport).post(subscription.url, headers, delivery.payload, timeoutMillis).pipe(
    Effect.timeoutOrElse({
      duration: Duration.millis(timeoutMillis),
      orElse: () => Effect.fail(new WebhookNotDelivered({ detail: `no answer within ${timeoutMillis} ms` }))
    })
  ))
  const latency = (yield* Effect.clockWith((clock) => clock.currentTimeMillis)) - started
  const status = answer._tag === "Success" ? answer.success.status : null
  const delivered = status !== null && status >= 200 && status < 300
  const logged: Webhook.WebhookDelivery = {
    ...delivery,
    state: delivered ? "delivered" : "pending",
    attempts: delivery.attempts + 1,
    lastStatus: status,
    lastError: delivered ? null : answer._tag === "Failure" ? answer.failure.detail : `answered ${status}`,
    lastLatencyMillis: Math.round(latency),
    updatedAt: now
  }
  yield* Storage.run("write", (unit) =>
    Effect.andThen(
      unit.updateWebhookDelivery(logged),
      delivered ? Effect.andThen(Outbox.settle(unit, entry, Outbox.done), resumeIfHeld(unit, subscription, now)) : Effect.void
    ))
  if (!delivered) return yield* new WebhookNotDelivered({ detail: logged.lastError ?? "not delivered" })
})

/**
 * After a failed delivery that is due again later, in the unit that schedules its retry (OutboxWorker): the
 * subscription's other deliveries, those due and those it gets from now on, are held (`Outbox.HELD`) until a delivery
 * to it succeeds (`resumeIfHeld`), or it is turned off or on. The receiver just failed; they would go to it. A
 * receiver that is down then costs one attempt per retry of the failed one, holds no place meanwhile, and leaves no
 * due backlog for every lease to walk past (on SQLite, on the event loop). Holding again after a later failure writes
 * only what came due since.
 */
export const holdDeliveries = Effect.fnUntraced(function*(unit: Storage.StorageUnit, subscriptionId: string, failedEntryId: string) {
  const found = yield* unit.getWebhookSubscription(subscriptionId)
  // A subscription turned off skips its deliveries as they come due: nothing to hold.
  if (Option.isNone(found) || !found.value.enabled) return false
  const now = yield* Timestamp.now
  if (!found.value.deliveriesHeld) yield* unit.updateWebhookSubscription({ ...found.value, deliveriesHeld: true, updatedAt: now })
  yield* unit.holdLane(subscriptionId, failedEntryId, now)
  return true
})

/** Housekeeping (OutboxWorker): held deliveries of subscriptions that hold none come due (`resumeUnheldDeliveries`). */
export const resumeUnheld = Effect.flatMap(Timestamp.now, (now) => Storage.run("write", (unit) => unit.resumeUnheldDeliveries(now)))

/** Whether the subscription holds its deliveries now (read locked in a write unit, where the store locks rows). */
export const deliveriesHeld = (unit: Storage.StorageUnit, subscriptionId: string): Effect.Effect<boolean, Storage.StorageError> =>
  Effect.map(unit.getWebhookSubscription(subscriptionId), (found) => Option.isSome(found) && found.value.deliveriesHeld)

/** A delivery went out: what its subscription held comes due. */
const resumeIfHeld = (
  unit: Storage.StorageUnit,
  subscription: Webhook.WebhookSubscription,
  now: Timestamp.Timestamp
): Effect.Effect<void, Storage.StorageError> =>
  subscription.deliveriesHeld
    ? Effect.andThen(
      Effect.flatMap(unit.getWebhookSubscription(subscription.id), (found) =>
        Option.isSome(found) && found.value.deliveriesHeld
          ? unit.updateWebhookSubscription({ ...found.value, deliveriesHeld: false, updatedAt: now })
          : Effect.void),
      Effect.asVoid(unit.resumeLane(subscription.id, now))
    )
    : Effect.void

/** The longest a delivery waiting for an earlier one of its record goes before it looks again (see `waitForEarlier`). */
export const WAITING_LOOK_CEILING_MILLIS = 30_000

/**
 * A delivery that waits for an earlier one of its record looks again after a fifth of the time it has waited so far,
 * from 200 ms up to `WAITING_LOOK_CEILING_MILLIS`: a few looks while the earlier one is quickly delivered, and one
 * every 30 s while a dead receiver's earlier delivery is retried for a day (a look is a lookup and a write unit,
 * which on SQLite holds the write lock every client's writes share). Its log says what it waits for.
 */
const waitForEarlier = (unit: Storage.StorageUnit, entry: Outbox.OutboxEntry, delivery: Webhook.WebhookDelivery, nowMillis: number) => {
  const waited = nowMillis - Date.parse(entry.createdAt)
  const pause = Math.min(WAITING_LOOK_CEILING_MILLIS, Math.max(200, Math.round(waited / 5)))
  const now = Timestamp.fromMillis(nowMillis)
  const note = "waits for an earlier delivery of the same record to this subscription"
  return Effect.andThen(
    delivery.lastError === note ? Effect.void : unit.updateWebhookDelivery({ ...delivery, lastError: note, updatedAt: now }),
    Outbox.settle(unit, entry, Outbox.again(Timestamp.fromMillis(nowMillis + pause)))
  )
}

/** The delivery an outbox entry names, with its subscription and whether an earlier one of its record still waits. */
const findDelivery = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  entry: Outbox.OutboxEntry
) {
  const delivery = yield* unit.getWebhookDelivery(entry.subjectId)
  if (Option.isNone(delivery)) return Option.none()
  // Issued together: one round trip where the store sends statements issued together in one (PostgreSQL).
  const [subscription, waiting] = yield* Effect.all(
    [unit.getWebhookSubscription(delivery.value.subscriptionId), unit.hasEarlierPendingDelivery(delivery.value)],
    { concurrency: 2 }
  )
  return Option.map(subscription, (s) => ({ delivery: delivery.value, subscription: s, waiting }))
})

/** In one unit: a delivery its subscription no longer takes marked skipped, and its outbox entry settled. */
const skipDelivery = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  entry: Outbox.OutboxEntry,
  skipped: Webhook.WebhookDelivery | undefined,
  now: Timestamp.Timestamp
) {
  if (skipped !== undefined) {
    yield* unit.updateWebhookDelivery({ ...skipped, state: "skipped", lastError: "subscription disabled", updatedAt: now })
  }
  yield* Outbox.settle(unit, entry, Outbox.done)
})

/**
 * What follows when the outbox gives a delivery up: the delivery failed, and its subscription is disabled with
 * the reason, so a dead receiver costs the relay nothing more until its owner enables it again.
 */
export const giveUp = Effect.fnUntraced(function*(unit: Storage.StorageUnit, deliveryId: string) {
  const delivery = yield* unit.getWebhookDelivery(deliveryId)
  if (Option.isNone(delivery)) return
  const now = yield* Timestamp.now
  yield* unit.updateWebhookDelivery({ ...delivery.value, state: "failed", updatedAt: now })
  const subscription = yield* unit.getWebhookSubscription(delivery.value.subscriptionId)
  if (Option.isSome(subscription) && subscription.value.enabled) {
    yield* unit.updateWebhookSubscription({
      ...subscription.value,
      enabled: false,
      disabledReason: `delivery of event ${delivery.value.eventId} given up after ${delivery.value.attempts} attempts: ${delivery.value.lastError ?? "no answer"}`,
      deliveriesHeld: false,
      updatedAt: now
    })
    // What it held comes due, to be skipped as every delivery due while it is off is.
    if (subscription.value.deliveriesHeld) yield* unit.resumeLane(subscription.value.id, now)
  }
})

