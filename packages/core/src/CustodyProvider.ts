/**
 * The CustodyProvider port: the custody platform that really holds keys (deposit addresses, fee estimates,
 * submission of approved transfers, address-book registration). `layerSimulated` is a deterministic stand-in for
 * tests, demos and conformance runs: its deposit addresses are valid addresses of the asset's chain, its fees
 * depend on asset and amount, and `SimulatedProviderControls` can switch fee estimation off for an asset (the
 * interface's 400 case) or make every call fail (its 500 case).
 *
 * Only the fee estimate is called while a request waits; every other call is an outbox effect (see Outbox),
 * carried out after commit and repeated until it succeeds, so each is idempotent on the request id it is given
 * (a real provider gets it as its external id / idempotency key). No call is ever made inside a unit of work.
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js"
import { Clock, Context, Duration, Effect, Layer } from "effect"
import type { Asset } from "./Asset.js"
import * as Money from "./Money.js"
import { RelayConfig } from "./RelayConfig.js"
import { CustodyProviderFailed, FeeEstimationUnsupported } from "./RelayError.js"

export interface FeeQuote {
  readonly fee: Money.DecimalString
  readonly feeAssetId: string
}

export interface TransferOrder {
  /** Ours, stable for this effect: the provider's idempotency key / external id, so a repeat is recognised. */
  readonly requestId: string
  readonly transactionId: string
  readonly asset: Asset
  readonly amount: Money.DecimalString
  readonly sourceAccountId: string
  readonly destinationAddress: string
}

export interface AddressRegistration {
  /** Ours, stable for this effect (see TransferOrder). */
  readonly requestId: string
  readonly entryId: string
  readonly asset: Asset
  readonly address: string
}

/**
 * Where a submitted transfer stands at the provider: waiting for its policy, signed (policy passed), broadcast
 * (gathering confirmations), completed; or rejected by its policy, or failed, with a sub-status saying why.
 */
export type TransferProgress =
  | { readonly stage: "pending_policy" | "signed" | "broadcast" | "completed" }
  | { readonly stage: "rejected" | "failed"; readonly subStatus: string }

/** Where a registered address stands in the provider's review. */
export type AddressReview = "pending" | "approved" | "rejected"

/**
 * How the relay learns of progress: "polled", the outbox worker asks (`transferProgress`, `addressReview`) until
 * the record is settled; "pushed", the embedder's receiver of the provider's own callbacks reports it with
 * `ProviderReports.apply`, naming the request the relay made (its outbox entry's id).
 */
export type ProgressReporting = "polled" | "pushed"

export class CustodyProvider extends Context.Service<CustodyProvider, {
  readonly progressReporting: ProgressReporting
  /** The one call made while a request waits (calculate-fee, initiate): before any unit of work, with a timeout. */
  readonly estimateFee: (
    asset: Asset,
    amount: Money.DecimalString
  ) => Effect.Effect<FeeQuote, FeeEstimationUnsupported | CustodyProviderFailed>
  /** A deposit address for the account; the same account gets the same address on a repeat. */
  readonly createDepositAddress: (accountId: string, asset: Asset) => Effect.Effect<string, CustodyProviderFailed>
  readonly submitTransfer: (order: TransferOrder) => Effect.Effect<{ readonly providerTransactionId: string }, CustodyProviderFailed>
  readonly transferProgress: (providerTransactionId: string) => Effect.Effect<TransferProgress, CustodyProviderFailed>
  readonly registerWhitelistedAddress: (
    registration: AddressRegistration
  ) => Effect.Effect<{ readonly providerId: string }, CustodyProviderFailed>
  readonly addressReview: (providerId: string) => Effect.Effect<AddressReview, CustodyProviderFailed>
}>()("@custody-relay/core/CustodyProvider") {}

/** Switches for the simulated provider, so tests can reach its refusal and failure paths. */
export class SimulatedProviderControls extends Context.Service<SimulatedProviderControls, {
  readonly setFeeEstimation: (assetId: string, supported: boolean) => Effect.Effect<void>
  readonly setFailing: (failing: boolean) => Effect.Effect<void>
}>()("@custody-relay/core/SimulatedProviderControls") {}

/** Network fee of the simulated provider: a base per fee asset plus a part proportional to the amount. */
const baseFee: Record<string, string> = {
  BTC: "0.00002",
  ETH: "0.00042",
  LTC: "0.0001",
  SOL: "0.000005"
}
const DEFAULT_BASE_FEE = "0.0001"
const PROPORTIONAL_FEE = "0.0001"

/** A UUID-shaped id derived from a seed: the provider's ids are stable across re-runs of the same call. */
const derivedUuid = (seed: string): string => {
  const hex = bytesToHex(sha256(utf8ToBytes(seed)))
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`
}

/**
 * The simulated provider's life cycle: how long its policy takes, how long a broadcast and its confirmations take,
 * how long its address review takes, and what share of transfers it fails (decided by the transfer's id, so a
 * run is repeatable). Times are read from Effect's Clock, so TestClock drives them in tests.
 */
export interface SimulatedLifecycle {
  readonly policyMillis: number
  readonly broadcastMillis: number
  readonly confirmationMillis: number
  readonly addressReviewMillis: number
  /** From 0 to 1: the share of transfers that fail after broadcast (DROPPED_BY_NETWORK). */
  readonly failureShare: number
}

export const defaultLifecycle: SimulatedLifecycle = {
  policyMillis: 1000,
  broadcastMillis: 1000,
  confirmationMillis: 2000,
  addressReviewMillis: 2000,
  failureShare: 0
}

export interface SimulatedProviderOptions {
  /** Assets the provider cannot estimate fees for, from the start. */
  readonly noFeeEstimation?: ReadonlyArray<string>
  /**
   * "manual" (the default): the provider reports no progress of its own ("pushed" with nothing pushed); tests and
   * the test control protocol move records. A life cycle: it is polled and moves them itself, as a platform would.
   */
  readonly lifecycle?: "manual" | Partial<SimulatedLifecycle>
}

/** Where a share in [0, 1) of the id space begins: the first 8 hex digits of the id's digest as a fraction. */
const shareOf = (id: string): number => parseInt(bytesToHex(sha256(utf8ToBytes(`fate:${id}`))).slice(0, 8), 16) / 0x1_0000_0000

export const layerSimulated = (
  options: SimulatedProviderOptions = {}
): Layer.Layer<CustodyProvider | SimulatedProviderControls> =>
  Layer.effectContext(
    Effect.sync(() => {
      const noFeeEstimation = new Set(options.noFeeEstimation ?? [])
      const lifecycle = options.lifecycle === undefined || options.lifecycle === "manual"
        ? undefined
        : { ...defaultLifecycle, ...options.lifecycle }
      // When each transfer and address reached the provider. A restarted process forgets them; the relay's next
      // poll then starts them again from that moment, as a platform that lost its queue would.
      const submittedAt = new Map<string, number>()
      const registeredAt = new Map<string, number>()
      let failing = false
      const guard = (operation: string) =>
        failing
          ? Effect.fail(new CustodyProviderFailed({ operation, detail: "simulated provider outage" }))
          : Effect.void
      const since = (table: Map<string, number>, id: string) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const first = table.get(id)
          if (first === undefined) table.set(id, now)
          return now - (first ?? now)
        })

      const provider = CustodyProvider.of({
        progressReporting: lifecycle === undefined ? "pushed" : "polled",
        estimateFee: Effect.fnUntraced(function*(asset: Asset, amount: Money.DecimalString) {
          yield* guard("estimateFee")
          if (noFeeEstimation.has(asset.assetId)) {
            return yield* new FeeEstimationUnsupported({ assetId: asset.assetId })
          }
          const base = baseFee[asset.feeAssetId] ?? DEFAULT_BASE_FEE
          // A token's fee is paid in the chain's own asset, so it does not scale with the token amount.
          const proportional = asset.feeAssetId === asset.assetId
            ? Money.multiply(amount, Money.canonical(PROPORTIONAL_FEE))
            : Money.ZERO
          const fee = Money.roundDown(Money.add(Money.canonical(base), proportional), asset.precision)
          return { fee, feeAssetId: asset.feeAssetId }
        }),
        createDepositAddress: (accountId, asset) =>
          Effect.as(guard("createDepositAddress"), asset.chain.addressFromSeed(utf8ToBytes(`deposit:${accountId}`))),
        submitTransfer: Effect.fnUntraced(function*(order: TransferOrder) {
          yield* guard("submitTransfer")
          const providerTransactionId = derivedUuid(`transfer:${order.transactionId}`)
          yield* since(submittedAt, providerTransactionId)
          return { providerTransactionId }
        }),
        transferProgress: Effect.fnUntraced(function*(providerTransactionId: string) {
          yield* guard("transferProgress")
          const elapsed = yield* since(submittedAt, providerTransactionId)
          if (lifecycle === undefined) return { stage: "pending_policy" } as const
          const signedAt = lifecycle.policyMillis
          const broadcastAt = signedAt + lifecycle.broadcastMillis
          const settledAt = broadcastAt + lifecycle.confirmationMillis
          if (elapsed < signedAt) return { stage: "pending_policy" } as const
          if (elapsed < broadcastAt) return { stage: "signed" } as const
          if (elapsed < settledAt) return { stage: "broadcast" } as const
          return shareOf(providerTransactionId) < lifecycle.failureShare
            ? { stage: "failed", subStatus: "DROPPED_BY_NETWORK" } as const
            : { stage: "completed" } as const
        }),
        registerWhitelistedAddress: Effect.fnUntraced(function*(registration: AddressRegistration) {
          yield* guard("registerWhitelistedAddress")
          const providerId = derivedUuid(`whitelist:${registration.entryId}`)
          yield* since(registeredAt, providerId)
          return { providerId }
        }),
        addressReview: Effect.fnUntraced(function*(providerId: string) {
          yield* guard("addressReview")
          const elapsed = yield* since(registeredAt, providerId)
          return lifecycle !== undefined && elapsed >= lifecycle.addressReviewMillis ? "approved" : "pending"
        })
      })
      const controls = SimulatedProviderControls.of({
        setFeeEstimation: (assetId, supported) =>
          Effect.sync(() => {
            if (supported) noFeeEstimation.delete(assetId)
            else noFeeEstimation.add(assetId)
          }),
        setFailing: (value) =>
          Effect.sync(() => {
            failing = value
          })
      })
      return Context.make(CustodyProvider, provider).pipe(Context.add(SimulatedProviderControls, controls))
    })
  )

/**
 * A provider call a request waits for (a fee estimate, an account's deposit address), bounded by
 * `RelayConfig.providerCallTimeoutMillis`: a provider that does not answer in time is a provider failure (the
 * interface's 500), not a request that hangs for as long as the provider does.
 */
export const answeredInTime = (operation: string) => <A, E, R>(call: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.service(RelayConfig), ({ providerCallTimeoutMillis }) =>
    Effect.timeoutOrElse(call, {
      duration: Duration.millis(providerCallTimeoutMillis),
      orElse: () => Effect.fail(new CustodyProviderFailed({ operation, detail: `no answer within ${providerCallTimeoutMillis} ms` }))
    }))
