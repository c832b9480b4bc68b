/**
 * The CustodyProvider port: the custody platform that really holds keys (deposit addresses, fee estimates,
 * submission of approved transfers, address-book registration). `layerSimulated` is a deterministic stand-in for
 * tests, demos and conformance runs: its deposit addresses are valid addresses of the asset's chain, its fees
 * depend on asset and amount, and `SimulatedProviderControls` can switch fee estimation off for an asset (the
 * interface's 400 case) or make every call fail (its 500 case).
 *
 * Calls may be repeated when a unit of work is re-run, so each is idempotent on the id it is given (a real
 * provider gets our id as its external id / idempotency key).
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js"
import { Context, Effect, Layer } from "effect"
import type { Asset } from "./Asset.js"
import * as Money from "./Money.js"
import { CustodyProviderFailed, FeeEstimationUnsupported } from "./RelayError.js"

export interface FeeQuote {
  readonly fee: Money.DecimalString
  readonly feeAssetId: string
}

export interface TransferOrder {
  readonly transactionId: string
  readonly asset: Asset
  readonly amount: Money.DecimalString
  readonly sourceAccountId: string
  readonly destinationAddress: string
}

export class CustodyProvider extends Context.Service<CustodyProvider, {
  readonly estimateFee: (
    asset: Asset,
    amount: Money.DecimalString
  ) => Effect.Effect<FeeQuote, FeeEstimationUnsupported | CustodyProviderFailed>
  readonly createDepositAddress: (accountId: string, asset: Asset) => Effect.Effect<string, CustodyProviderFailed>
  readonly submitTransfer: (order: TransferOrder) => Effect.Effect<{ readonly providerTransactionId: string }, CustodyProviderFailed>
  readonly registerWhitelistedAddress: (
    entryId: string,
    asset: Asset,
    address: string
  ) => Effect.Effect<{ readonly providerId: string }, CustodyProviderFailed>
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

export interface SimulatedProviderOptions {
  /** Assets the provider cannot estimate fees for, from the start. */
  readonly noFeeEstimation?: ReadonlyArray<string>
}

export const layerSimulated = (
  options: SimulatedProviderOptions = {}
): Layer.Layer<CustodyProvider | SimulatedProviderControls> =>
  Layer.effectContext(
    Effect.sync(() => {
      const noFeeEstimation = new Set(options.noFeeEstimation ?? [])
      let failing = false
      const guard = (operation: string) =>
        failing
          ? Effect.fail(new CustodyProviderFailed({ operation, detail: "simulated provider outage" }))
          : Effect.void

      const provider = CustodyProvider.of({
        estimateFee: (asset, amount) =>
          Effect.gen(function*() {
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
        submitTransfer: (order) =>
          Effect.as(guard("submitTransfer"), { providerTransactionId: derivedUuid(`transfer:${order.transactionId}`) }),
        registerWhitelistedAddress: (entryId) =>
          Effect.as(guard("registerWhitelistedAddress"), { providerId: derivedUuid(`whitelist:${entryId}`) })
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
