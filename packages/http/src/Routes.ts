/**
 * The route table: every endpoint of the interface (and our two extension endpoints) as data. A route names its
 * method and path, the core operation it runs (the permission is read from the core's one table,
 * `Permission.requiredPermission`, AUTH-PERM-1), its query parameters and body Schema (the decoders and the
 * OpenAPI document are both derived from them), its success status (201 on creates, 200 otherwise) and the Schema
 * of its answer. Routes know nothing of authentication, rate limits or idempotency: the handler does those once.
 */
import {
  Account,
  Accounts,
  AuditTrail,
  DomainEvent,
  FeeEstimate,
  Page,
  Permission,
  type Principal,
  type Relay,
  RelayError,
  Transaction,
  Transactions,
  Webhook,
  Webhooks,
  WhitelistedAddress,
  WhitelistedAddresses
} from "@custody-relay/core"
import { Effect, Result, Schema } from "effect"
import * as QueryParameter from "./QueryParameter.js"
import * as Reply from "./Reply.js"
import { decodeWith } from "./RequestBody.js"

export type Method = "GET" | "POST"

/** What a route receives once its request is decoded. */
export interface RouteInput {
  readonly params: Readonly<Record<string, string>>
  readonly search: URLSearchParams
  /** The parsed JSON body, `undefined` when there was none. */
  readonly body: unknown
}

export interface Route {
  readonly method: Method
  readonly path: string
  readonly operation: Permission.Operation
  readonly summary: string
  readonly description?: string
  /** Our addition to the interface, marked as such in the OpenAPI document and the docs. */
  readonly extension: boolean
  readonly successStatus: 200 | 201
  readonly query: QueryParameter.QueryParameters
  readonly body: Schema.Top | undefined
  readonly response: Schema.Top
  /** Decodes the input and runs the operation; the answer is the JSON value of a successful response. */
  readonly handle: (
    principal: Principal.Principal,
    input: RouteInput
  ) => Effect.Effect<unknown, RelayError.RelayError, Relay.RelayServices>
}

interface RouteSpec<Q extends QueryParameter.QueryParameters, B> {
  readonly method: Method
  readonly path: string
  readonly operation: Permission.Operation
  readonly summary: string
  readonly description?: string
  readonly extension?: boolean
  readonly successStatus?: 200 | 201
  readonly query?: Q
  readonly body?: Schema.ConstraintDecoder<B> & Schema.Top
  readonly response: Schema.Top
  readonly run: (
    principal: Principal.Principal,
    input: { readonly params: Readonly<Record<string, string>>; readonly query: QueryParameter.Decoded<Q>; readonly body: B }
  ) => Effect.Effect<unknown, RelayError.RelayError, Relay.RelayServices>
}

const noQuery: QueryParameter.QueryParameters = {}

const define = <const Q extends QueryParameter.QueryParameters = {}, B = undefined>(spec: RouteSpec<Q, B>): Route => {
  const query = spec.query ?? (noQuery as Q)
  const decodeBody = spec.body === undefined ? undefined : decodeWith(spec.body)
  return {
    method: spec.method,
    path: spec.path,
    operation: spec.operation,
    summary: spec.summary,
    ...(spec.description === undefined ? {} : { description: spec.description }),
    extension: spec.extension ?? false,
    successStatus: spec.successStatus ?? 200,
    query,
    body: spec.body,
    response: spec.response,
    handle: (principal, input) => {
      const decodedQuery = QueryParameter.decodeAll(query, input.search)
      if (Result.isFailure(decodedQuery)) return Effect.fail(decodedQuery.failure)
      if (decodeBody === undefined) {
        // A route without a body schema takes none; whatever was sent is ignored. B is `undefined` here.
        return spec.run(principal, { params: input.params, query: decodedQuery.success, body: undefined as B })
      }
      const body = decodeBody(input.body)
      if (Result.isFailure(body)) return Effect.fail(body.failure)
      return spec.run(principal, { params: input.params, query: decodedQuery.success, body: body.success })
    }
  }
}

const param = (params: Readonly<Record<string, string>>, name: string): string => params[name] ?? ""

/** The interface's fee estimate record, its fee a JSON number written with the quote's exact digits. */
const wireFeeEstimate = (quote: FeeEstimate.FeeQuote) => ({
  assetType: quote.assetType,
  amount: quote.amount,
  estimatedFee: Reply.exactJsonNumber(quote.fee),
  feeAssetType: quote.feeAssetType
})

const accountsQuery = {
  page: QueryParameter.page,
  limit: QueryParameter.limit,
  search: QueryParameter.text("Matches account name, asset id or deposit address (case-insensitive)", 255),
  assetId: QueryParameter.text("Asset symbol", 64),
  workspace: QueryParameter.oneOf({ description: "Workspace", values: Account.workspaces }),
  role: QueryParameter.manyOf({ description: "Role; repeat the parameter for several", values: Account.roles }),
  status: QueryParameter.oneOf({ description: "Account status", values: Account.statuses })
}

const transactionsQuery = {
  page: QueryParameter.page,
  limit: QueryParameter.limit,
  accountId: QueryParameter.uuid("Source custody account; an account outside the client's scope gives an empty page"),
  assetType: QueryParameter.text("Asset symbol", 64),
  status: QueryParameter.oneOf({
    description: "Status group, case-insensitive; default all",
    values: ["all", ...Transaction.statusGroups] as const,
    caseInsensitive: "lower"
  })
}

const whitelistQuery = {
  page: QueryParameter.page,
  limit: QueryParameter.limit,
  assetType: QueryParameter.manyText("Asset symbol; repeat the parameter for several", 64),
  status: QueryParameter.manyOf({
    description: "Status; repeat the parameter for several",
    values: WhitelistedAddress.statuses,
    caseInsensitive: "upper"
  })
}

const trailQuery = {
  page: QueryParameter.page,
  limit: QueryParameter.limit,
  entityType: QueryParameter.oneOf({ description: "The kind of record the event is about", values: DomainEvent.entityTypes }),
  entityId: QueryParameter.uuid("The record the event is about"),
  type: QueryParameter.manyOf({ description: "Event type; repeat the parameter for several", values: DomainEvent.eventTypes }),
  from: QueryParameter.timestamp("Events at or after this time"),
  to: QueryParameter.timestamp("Events at or before this time")
}

const recordTrailQuery = { page: QueryParameter.page, limit: QueryParameter.limit }

const AuditTrailNote =
  "Our extension to the interface: the domain events of the caller's client, newest first (docs/lifecycle.md lists " +
  "every type). Needs \"View audit trail\"; another client's record is 404."

/** The events of one kind of record, by its id (our extension). */
const recordTrail = (path: string, record: AuditTrail.RecordWithTrail, summary: string) =>
  define({
    method: "GET",
    path,
    operation: "auditTrail.list",
    summary,
    description: AuditTrailNote,
    extension: true,
    query: recordTrailQuery,
    response: Page.PageEnvelope(DomainEvent.EventView),
    run: (principal, { params, query }) => AuditTrail.ofRecord(principal, record, param(params, "id"), pageOf(query))
  })

const WebhooksNote =
  "Our extension to the interface: webhook subscriptions of the caller's client (docs/webhooks.md). Needs " +
  "\"Manage webhooks\". Deliveries are signed with the Standard Webhooks scheme."

const pageOf = (query: { readonly page: number; readonly limit: number }): Page.PageRequest => ({
  page: query.page,
  limit: query.limit
})

/** The page `request` names of a list held whole (a client's webhook subscriptions), in the interface's envelope. */
const pageIn = <A>(all: ReadonlyArray<A>, request: Page.PageRequest) => {
  const from = Page.offset(request)
  return Page.envelope({ items: all.slice(from, from + request.limit), total: all.length }, request)
}

const TransactionApprovalNote =
  "Our extension to the interface: one approver's decision on a transaction awaiting its quorum. Approvers are " +
  "distinct API users holding \"Approve transaction\"; the initiator cannot decide on its own transaction."

export const routes: ReadonlyArray<Route> = [
  define({
    method: "GET",
    path: "/relay/v1/accounts",
    operation: "accounts.list",
    summary: "List custody accounts",
    query: accountsQuery,
    response: Page.PageEnvelope(Account.AccountView),
    run: (principal, { query }) => {
      const filter: Account.AccountFilter = {
        ...(query.search === undefined ? {} : { search: query.search }),
        ...(query.assetId === undefined ? {} : { assetId: query.assetId }),
        ...(query.workspace === undefined ? {} : { workspace: query.workspace }),
        ...(query.role === undefined ? {} : { roles: query.role }),
        ...(query.status === undefined ? {} : { status: query.status })
      }
      return Accounts.list(principal, filter, pageOf(query))
    }
  }),
  define({
    method: "GET",
    path: "/relay/v1/accounts/{id}",
    operation: "accounts.get",
    summary: "Get a custody account",
    response: Account.AccountView,
    run: (principal, { params }) => Accounts.get(principal, param(params, "id"))
  }),
  define({
    method: "POST",
    path: "/relay/v1/accounts",
    operation: "accounts.create",
    summary: "Create a custody account",
    successStatus: 201,
    body: Account.CreateAccountInput,
    response: Account.AccountCreated,
    run: (principal, { body }) => Accounts.create(principal, body)
  }),
  define({
    method: "POST",
    path: "/relay/v1/accounts/approve",
    operation: "accounts.approve",
    summary: "Approve a custody account",
    body: Account.AccountDecisionInput,
    response: Account.AccountDecision,
    run: (principal, { body }) => Accounts.approve(principal, body)
  }),
  define({
    method: "POST",
    path: "/relay/v1/accounts/reject",
    operation: "accounts.reject",
    summary: "Reject a custody account",
    body: Account.AccountDecisionInput,
    response: Account.AccountDecision,
    run: (principal, { body }) => Accounts.reject(principal, body)
  }),
  define({
    method: "GET",
    path: "/relay/v1/transactions",
    operation: "transactions.list",
    summary: "List custody transactions",
    query: transactionsQuery,
    response: Page.PageEnvelope(Transaction.TransactionListItem),
    run: (principal, { query }) => {
      const filter: Transaction.TransactionFilter = {
        ...(query.accountId === undefined ? {} : { accountId: query.accountId }),
        ...(query.assetType === undefined ? {} : { assetType: query.assetType }),
        ...(query.status === undefined || query.status === "all" ? {} : { group: query.status })
      }
      return Transactions.list(principal, filter, pageOf(query))
    }
  }),
  define({
    method: "GET",
    path: "/relay/v1/transactions/{id}",
    operation: "transactions.get",
    summary: "Get a custody transaction",
    response: Transaction.TransactionDetail,
    run: (principal, { params }) => Transactions.get(principal, param(params, "id"))
  }),
  define({
    method: "GET",
    path: "/relay/v1/transactions/{id}/status",
    operation: "transactions.status",
    summary: "Get a custody transaction's status",
    response: Transaction.TransactionStatusView,
    run: (principal, { params }) => Transactions.status(principal, param(params, "id"))
  }),
  define({
    method: "POST",
    path: "/relay/v1/transactions/calculate-fee",
    operation: "transactions.calculateFee",
    summary: "Estimate the network fee of a transaction",
    body: Transaction.TransferInput,
    response: FeeEstimate.FeeEstimate,
    run: (principal, { body }) => Effect.map(Transactions.quoteFee(principal, body), wireFeeEstimate)
  }),
  define({
    method: "POST",
    path: "/relay/v1/transactions/initiate",
    operation: "transactions.initiate",
    summary: "Initiate a custody transaction",
    successStatus: 201,
    body: Transaction.TransferInput,
    response: Transaction.TransactionInitiated,
    run: (principal, { body }) => Transactions.initiate(principal, body)
  }),
  define({
    method: "POST",
    path: "/relay/v1/transactions/{id}/approve",
    operation: "transactions.approve",
    summary: "Approve a custody transaction (extension)",
    description: TransactionApprovalNote,
    extension: true,
    response: Transaction.TransactionDetail,
    run: (principal, { params }) => Transactions.approve(principal, param(params, "id"))
  }),
  define({
    method: "POST",
    path: "/relay/v1/transactions/{id}/reject",
    operation: "transactions.reject",
    summary: "Reject a custody transaction (extension)",
    description: TransactionApprovalNote,
    extension: true,
    response: Transaction.TransactionDetail,
    run: (principal, { params }) => Transactions.reject(principal, param(params, "id"))
  }),
  define({
    method: "POST",
    path: "/relay/v1/whitelisted-addresses",
    operation: "whitelistedAddresses.create",
    summary: "Whitelist an external address",
    successStatus: 201,
    body: WhitelistedAddress.CreateWhitelistedAddressInput,
    response: WhitelistedAddress.WhitelistedAddressCreated,
    run: (principal, { body }) => WhitelistedAddresses.create(principal, body)
  }),
  define({
    method: "GET",
    path: "/relay/v1/whitelisted-addresses",
    operation: "whitelistedAddresses.list",
    summary: "List whitelisted addresses",
    query: whitelistQuery,
    response: Page.PageEnvelope(WhitelistedAddress.WhitelistedAddressView),
    run: (principal, { query }) => {
      const filter: WhitelistedAddress.WhitelistFilter = {
        ...(query.assetType === undefined ? {} : { assetTypes: query.assetType }),
        ...(query.status === undefined ? {} : { statuses: query.status })
      }
      return WhitelistedAddresses.list(principal, filter, pageOf(query))
    }
  }),
  define({
    method: "GET",
    path: "/relay/v1/whitelisted-addresses/{id}",
    operation: "whitelistedAddresses.get",
    summary: "Get a whitelisted address",
    response: WhitelistedAddress.WhitelistedAddressView,
    run: (principal, { params }) => WhitelistedAddresses.get(principal, param(params, "id"))
  }),
  define({
    method: "GET",
    path: "/relay/v1/events",
    operation: "auditTrail.list",
    summary: "List the audit trail (extension)",
    description: AuditTrailNote,
    extension: true,
    query: trailQuery,
    response: Page.PageEnvelope(DomainEvent.EventView),
    run: (principal, { query }) => {
      const filter: DomainEvent.TrailFilter = {
        ...(query.entityType === undefined ? {} : { entityType: query.entityType }),
        ...(query.entityId === undefined ? {} : { entityId: query.entityId }),
        ...(query.type === undefined ? {} : { types: query.type }),
        ...(query.from === undefined ? {} : { from: query.from }),
        ...(query.to === undefined ? {} : { to: query.to })
      }
      return AuditTrail.list(principal, filter, pageOf(query))
    }
  }),
  recordTrail("/relay/v1/accounts/{id}/events", "account", "The audit trail of a custody account (extension)"),
  recordTrail("/relay/v1/transactions/{id}/events", "transaction", "The audit trail of a custody transaction (extension)"),
  recordTrail("/relay/v1/whitelisted-addresses/{id}/events", "whitelisted_address", "The audit trail of a whitelisted address (extension)"),
  define({
    method: "POST",
    path: "/relay/v1/webhooks",
    operation: "webhooks.manage",
    summary: "Subscribe a URL to events (extension)",
    description: WebhooksNote + " The answer carries the signing secret, shown only this once.",
    extension: true,
    successStatus: 201,
    body: Webhook.NewSubscriptionInput,
    response: Webhook.SubscriptionWithSecret,
    run: (principal, { body }) => Webhooks.subscribe(principal, body)
  }),
  define({
    method: "GET",
    path: "/relay/v1/webhooks",
    operation: "webhooks.manage",
    summary: "List webhook subscriptions (extension)",
    description: WebhooksNote + " Paged as every list is (page, limit), oldest first.",
    extension: true,
    query: recordTrailQuery,
    response: Page.PageEnvelope(Webhook.SubscriptionView),
    run: (principal, { query }) => Effect.map(Webhooks.list(principal), (all) => pageIn(all, pageOf(query)))
  }),
  define({
    method: "GET",
    path: "/relay/v1/webhooks/{id}",
    operation: "webhooks.manage",
    summary: "Get a webhook subscription (extension)",
    description: WebhooksNote,
    extension: true,
    response: Webhook.SubscriptionView,
    run: (principal, { params }) => Webhooks.get(principal, param(params, "id"))
  }),
  define({
    method: "POST",
    path: "/relay/v1/webhooks/{id}/rotate-secret",
    operation: "webhooks.manage",
    summary: "Rotate a webhook subscription's signing secret (extension)",
    description: WebhooksNote + " The old secret keeps signing beside the new one for a grace period (24 h by default).",
    extension: true,
    response: Webhook.SubscriptionWithSecret,
    run: (principal, { params }) => Webhooks.rotateSecret(principal, param(params, "id"))
  }),
  define({
    method: "POST",
    path: "/relay/v1/webhooks/{id}/enable",
    operation: "webhooks.manage",
    summary: "Enable a webhook subscription (extension)",
    description: WebhooksNote,
    extension: true,
    response: Webhook.SubscriptionView,
    run: (principal, { params }) => Webhooks.setEnabled(principal, param(params, "id"), true)
  }),
  define({
    method: "POST",
    path: "/relay/v1/webhooks/{id}/disable",
    operation: "webhooks.manage",
    summary: "Disable a webhook subscription (extension)",
    description: WebhooksNote,
    extension: true,
    response: Webhook.SubscriptionView,
    run: (principal, { params }) => Webhooks.setEnabled(principal, param(params, "id"), false)
  }),
  define({
    method: "GET",
    path: "/relay/v1/webhooks/{id}/deliveries",
    operation: "webhooks.manage",
    summary: "A webhook subscription's delivery log (extension)",
    description: WebhooksNote +
      " The newest `limit` deliveries, newest first: each delivery's state, attempts, last status, error and latency. One page: `total` counts the deliveries shown, and a later page is refused.",
    extension: true,
    query: recordTrailQuery,
    response: Page.PageEnvelope(Webhook.DeliveryView),
    run: (principal, { params, query }) =>
      query.page !== 1
        ? Effect.fail(RelayError.InvalidRequest.field("page", "the delivery log has one page, of the newest `limit` deliveries"))
        : Effect.map(Webhooks.deliveries(principal, param(params, "id"), query.limit), (items) =>
          Page.envelope({ items: [...items], total: items.length }, { page: 1, limit: query.limit }))
  }),
  define({
    method: "POST",
    path: "/relay/v1/webhooks/{id}/redeliver",
    operation: "webhooks.manage",
    summary: "Deliver again one event, or every event since a time (extension)",
    description: WebhooksNote + " Give exactly one of eventId and since; the deliveries keep the events' webhook-id. A disabled subscription is refused (409): enable it first.",
    extension: true,
    body: Webhook.RedeliverInput,
    response: Webhook.Redelivered,
    run: (principal, { params, body }) => Webhooks.redeliver(principal, param(params, "id"), body)
  })
]

/** The permission a route needs, from the core's one table. */
export const permissionOf = (route: Route): Permission.Permission => Permission.requiredPermission[route.operation]
