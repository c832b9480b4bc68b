/**
 * The test control protocol v1.2 (docs/control-protocol.md), mounted at /__control only when a control token is
 * configured; its profile declares our answers where the interface says "not shown". It
 * plays the custody platform's back office for conformance runs: clients, API users, activation, deposits,
 * whitelist decisions, transaction progress and rate limits. Every call must carry `x-control-token` (401
 * otherwise); an unknown id is 404; a call we do not offer is 501. Each call maps to one core operation.
 */
import {
  Account,
  Accounts,
  Administration,
  Asset,
  CustodyProvider,
  Permission,
  RateLimiter,
  type Relay,
  RelayConfig,
  RelayError,
  Transaction,
  Transactions,
  WhitelistedAddress,
  WhitelistedAddresses
} from "@custody-relay/core"
import { Effect, Redacted, Result, Schema } from "effect"
import type { AnyError } from "./ErrorTable.js"
import { ControlCallUnsupported, ControlUnauthorized } from "./HttpError.js"
import type { Incoming } from "./Incoming.js"
import type { LogCapture } from "./LogCapture.js"
import type * as RateLimitPolicies from "./RateLimitPolicies.js"
import { json, type Reply } from "./Reply.js"
import { decodeWith, parseJson, readText } from "./RequestBody.js"
import * as Router from "./Router.js"
import { interfaceVersion, version } from "./version.js"

export const PREFIX = "/__control"

export type ProviderFault = "unsupported" | "error"

/** Clients whose custody provider is told to fail fee estimation (capability `provider-fault`). */
export type ProviderFaults = Map<string, ProviderFault>

export const capabilities = [
  "api-users.revoke",
  "api-users.permissions",
  "accounts.activate",
  "accounts.credit",
  "whitelisted-addresses.status",
  "transactions.advance",
  "rate-limit",
  "provider-fault",
  "logs"
] as const

/** The provider as seen by one client with a fault switched on: fee estimation refuses or fails. */
export const faultyProvider = (fault: ProviderFault) =>
(provider: CustodyProvider.CustodyProvider["Service"]): CustodyProvider.CustodyProvider["Service"] => ({
  ...provider,
  estimateFee: (asset) =>
    fault === "unsupported"
      ? Effect.fail(new RelayError.FeeEstimationUnsupported({ assetId: asset.assetId }))
      : Effect.fail(new RelayError.CustodyProviderFailed({ operation: "estimateFee", detail: "control: provider fault" }))
})

const NewApiUser = Schema.Struct({
  clientId: Schema.NullOr(Schema.String.check(Schema.isMaxLength(64))),
  permissions: Schema.Array(Permission.Permission),
  name: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(100)))
})
const Permissions = Schema.Struct({ permissions: Schema.Array(Permission.Permission) })
const Credit = Schema.Struct({ amount: Schema.String.check(Schema.isMaxLength(128)) })
const WhitelistChange = Schema.Struct({ status: Schema.Literals(["APPROVED", "REJECTED", "ARCHIVED"]) })
const Advance = Schema.Struct({ to: Transaction.AdvanceTarget })
const RateLimit = RateLimiter.RateLimitPolicyInput
const Fault = Schema.Struct({ calculateFee: Schema.Literals(["none", "unsupported", "error"]) })

type Call = (
  params: Readonly<Record<string, string>>,
  body: unknown
) => Effect.Effect<Reply, AnyError, Relay.RelayServices>

interface ControlRoute {
  readonly method: string
  readonly path: string
  readonly call: Call
}

const decoded = <A>(result: Result.Result<A, RelayError.InvalidRequest>) =>
  Result.isSuccess(result) ? Effect.succeed(result.success) : Effect.fail(result.failure)

const withBody = <S extends Schema.ConstraintDecoder<unknown>>(
  schema: S,
  f: (params: Readonly<Record<string, string>>, body: S["Type"]) => Effect.Effect<Reply, AnyError, Relay.RelayServices>
): Call => {
  const decode = decodeWith(schema)
  return (params, body) => Effect.flatMap(decoded(decode(body)), (input) => f(params, input))
}

const id = (params: Readonly<Record<string, string>>): string => params["id"] ?? ""

const ok = json(200, { ok: true })

/** Addresses of the asset's chain that are valid, and near-misses (one character changed) that are not. */
export const sampleAddresses = (asset: Asset.Asset) => {
  const encoder = new TextEncoder()
  const valid = [1, 2].map((n) => asset.chain.addressFromSeed(encoder.encode(`profile-sample-${asset.assetId}-${n}`)))
  const invalid: Array<string> = []
  for (const address of valid) {
    const last = address.charAt(address.length - 1)
    for (const replacement of ["0", "O", "l", "q", "p", "z", "2", "A"]) {
      const candidate = address.slice(0, -1) + replacement
      if (replacement !== last && !asset.chain.isValidAddress(candidate)) {
        invalid.push(candidate)
        break
      }
    }
  }
  invalid.push("not-an-address")
  return { valid, invalid: invalid.filter((a) => !asset.chain.isValidAddress(a)) }
}

export interface ControlOptions {
  readonly token: string
  readonly policies: RateLimitPolicies.RateLimitPolicies
  readonly providerFaults: ProviderFaults
  readonly maxBodyBytes: number
  readonly logs: LogCapture
}

const tokenMatches = (given: string | null, expected: string): boolean => {
  // A blank token is refused when the protocol is mounted (make); never let one match, whatever the caller sends.
  if (given === null || expected.trim() === "" || given.length !== expected.length) return false
  let difference = 0
  for (let i = 0; i < expected.length; i++) difference |= given.charCodeAt(i) ^ expected.charCodeAt(i)
  return difference === 0
}

export const make = (options: ControlOptions) => {
  if (options.token.trim() === "") {
    throw new Error("controlToken must not be empty or blank: leave it out to keep the test control protocol off")
  }
  const table: ReadonlyArray<ControlRoute> = [
    {
      method: "POST",
      path: "/__control/clients",
      call: () => Effect.map(Administration.createClient(), (client) => json(201, { clientId: client.id }))
    },
    {
      method: "POST",
      path: "/__control/api-users",
      call: withBody(NewApiUser, (_, input) =>
        Effect.map(
          Administration.createApiUser({
            clientId: input.clientId,
            permissions: input.permissions,
            ...(input.name === undefined ? {} : { name: input.name })
          }),
          (credential) =>
            json(201, {
              apiUserId: credential.apiUserId,
              keyId: credential.keyId,
              secret: Redacted.value(credential.secret)
            })
        ))
    },
    {
      method: "POST",
      path: "/__control/api-users/{id}/revoke",
      call: (params) => Effect.as(Administration.revokeApiUser(id(params)), ok)
    },
    {
      method: "PUT",
      path: "/__control/api-users/{id}/permissions",
      call: withBody(Permissions, (params, input) => Effect.as(Administration.setPermissions(id(params), input.permissions), ok))
    },
    {
      method: "POST",
      path: "/__control/accounts/{id}/activate",
      call: (params) =>
        Effect.map(Accounts.activate(id(params)), (account) =>
          json(200, { accountId: account.id, status: account.status, address: account.address }))
    },
    {
      method: "POST",
      path: "/__control/accounts/{id}/credit",
      call: withBody(Credit, (params, input) =>
        Effect.map(Accounts.deposit(id(params), input.amount), (account) =>
          json(200, { accountId: account.id, availableBalance: account.availableBalance })))
    },
    {
      method: "POST",
      path: "/__control/whitelisted-addresses/{id}/status",
      call: withBody(WhitelistChange, (params, input) => {
        const step = input.status === "APPROVED"
          ? WhitelistedAddresses.approve
          : input.status === "REJECTED"
          ? WhitelistedAddresses.reject
          : WhitelistedAddresses.archive
        return Effect.map(step(id(params)), (entry) => json(200, { id: entry.id, status: entry.status }))
      })
    },
    {
      method: "POST",
      path: "/__control/transactions/{id}/advance",
      call: withBody(Advance, (params, input) =>
        Effect.map(Transactions.advanceTo(id(params), input.to), (tx) =>
          json(200, { id: tx.id, status: tx.status, subStatus: tx.subStatus })))
    },
    {
      method: "PUT",
      path: "/__control/rate-limit",
      call: withBody(RateLimit, (_, input) =>
        // Kept with the data (Administration.setRateLimitForNewApiUsers), so every node creates keys alike.
        Effect.map(
          Administration.setRateLimitForNewApiUsers({ limit: input.limit, windowSeconds: input.windowSeconds }),
          (policy) => json(200, { limit: policy.limit, windowSeconds: policy.windowSeconds })
        ))
    },
    {
      method: "PUT",
      path: "/__control/clients/{id}/provider-fault",
      call: withBody(Fault, Effect.fnUntraced(function*(params: Readonly<Record<string, string>>, input: typeof Fault.Type) {
        const { id: clientId } = yield* Administration.getClient(id(params))
        if (input.calculateFee === "none") options.providerFaults.delete(clientId)
        else options.providerFaults.set(clientId, input.calculateFee)
        return json(200, { clientId, calculateFee: input.calculateFee })
      }))
    },
    {
      method: "GET",
      path: "/__control/logs",
      call: () => Effect.sync(() => json(200, { lines: options.logs.drain() }))
    },
    {
      method: "GET",
      path: "/__control/profile",
      call: Effect.fnUntraced(function*() {
        const assets = yield* Asset.Assets
        const config = yield* RelayConfig.RelayConfig
        return json(200, {
          name: "custody-relay",
          version,
          interfaceVersion,
          assets: assets.all.map((asset) => ({
            assetId: asset.assetId,
            precision: asset.precision,
            chainType: asset.chain.chainType,
            sampleAddresses: sampleAddresses(asset),
            feeEstimation: true
          })),
          accountStatuses: Account.statuses,
          transactionStatuses: Transaction.statuses.map((status) => ({ status, group: Transaction.groupOf[status] })),
          whitelistStatuses: WhitelistedAddress.statuses,
          rateLimit: options.policies.deploymentDefault,
          capabilities,
          // Control protocol v1.2: our answers where the interface says "not shown", so the kit holds us to them.
          errorBody: { messagePointer: "/message" },
          transactionTypes: ["WITHDRAWAL"],
          multiValueFilters: "both",
          calculateFee: { checksFunds: false },
          funds: { reserve: "amount-and-fee" },
          approvals: {
            required: config.defaultRequiredApprovals,
            approve: "POST /relay/v1/transactions/{id}/approve",
            reject: "POST /relay/v1/transactions/{id}/reject"
          }
        })
      })
    }
  ]
  const match = Router.make(table)

  return Effect.fnUntraced(function*(request: Incoming): Effect.fn.Return<Reply, AnyError, Relay.RelayServices> {
    if (!tokenMatches(request.header("x-control-token"), options.token)) return yield* new ControlUnauthorized()
    const found = match(request.method, request.pathname)
    if (found._tag !== "Found") return yield* new ControlCallUnsupported()
    const text = yield* readText(request, options.maxBodyBytes)
    const body = parseJson(text, request.header("content-type") ?? "application/json")
    if (Result.isFailure(body)) return yield* body.failure
    return yield* found.route.call(found.params, body.success)
  })
}
