/**
 * Asset: the registry of assets the relay supports, each with its decimal precision (TXN-PREC-2), its chain
 * (address format) and the asset its network fee is paid in.
 *
 * Asset ids are matched exactly and case-sensitively: `"BTC"` is supported, `"btc"` is not. The interface
 * names assets by upper-case symbol, and one spelling per asset keeps filters, storage keys and error
 * messages unambiguous.
 *
 * The registry is checked once when it is built: a bad embedder configuration throws at start-up instead of
 * surfacing later as a confusing request failure.
 */
import { Context, Effect, Layer, Option } from "effect"
import { Bitcoin, Ethereum, Litecoin, Solana } from "./Chain.js"
import type { Chain } from "./Chain.js"
import { UnsupportedAsset } from "./RelayError.js"

export interface Asset {
  readonly assetId: string
  readonly name: string
  /** Decimal places an amount of this asset may have. */
  readonly precision: number
  readonly chain: Chain
  /** The asset the network fee is paid in: ETH for USDC, the asset itself for BTC. */
  readonly feeAssetId: string
}

export const builtInAssets: ReadonlyArray<Asset> = [
  { assetId: "BTC", name: "Bitcoin", precision: 8, chain: Bitcoin, feeAssetId: "BTC" },
  { assetId: "ETH", name: "Ether", precision: 18, chain: Ethereum, feeAssetId: "ETH" },
  { assetId: "USDC", name: "USD Coin", precision: 6, chain: Ethereum, feeAssetId: "ETH" },
  { assetId: "USDT", name: "Tether USD", precision: 6, chain: Ethereum, feeAssetId: "ETH" },
  { assetId: "LTC", name: "Litecoin", precision: 8, chain: Litecoin, feeAssetId: "LTC" },
  { assetId: "SOL", name: "Solana", precision: 9, chain: Solana, feeAssetId: "SOL" }
]

const ASSET_ID = /^[A-Z0-9]{2,15}$/
// Money keeps 100 significant digits and allows 40 integer digits; 36 places keeps every amount exact.
const MAX_PRECISION = 36

const validate = (asset: Asset): void => {
  if (!ASSET_ID.test(asset.assetId)) {
    throw new Error(`asset id ${JSON.stringify(asset.assetId)} must be 2 to 15 upper-case letters or digits`)
  }
  if (!Number.isInteger(asset.precision) || asset.precision < 0 || asset.precision > MAX_PRECISION) {
    throw new Error(
      `asset ${asset.assetId}: precision must be an integer from 0 to ${MAX_PRECISION}, got ${asset.precision}`
    )
  }
}

/**
 * Builds the registry from a list of assets. A later asset with the same id replaces an earlier one, keeping
 * the earlier one's position in `all`. Throws on an invalid asset id, an invalid precision, or a fee asset
 * that is not in the registry.
 */
export const makeAssets = (assets: Iterable<Asset>): Assets["Service"] => {
  const byId = new Map<string, Asset>()
  for (const asset of assets) {
    validate(asset)
    byId.set(asset.assetId, asset)
  }
  for (const asset of byId.values()) {
    if (!byId.has(asset.feeAssetId)) {
      throw new Error(`asset ${asset.assetId}: fee asset ${JSON.stringify(asset.feeAssetId)} is not registered`)
    }
  }
  const all: ReadonlyArray<Asset> = Array.from(byId.values())
  return {
    all,
    get: (assetId) => Option.fromNullishOr(byId.get(assetId))
  }
}

export class Assets extends Context.Service<Assets, {
  readonly all: ReadonlyArray<Asset>
  get(assetId: string): Option.Option<Asset>
}>()("@custody-relay/core/Asset/Assets") {
  /** The built-in assets only. */
  static readonly layer: Layer.Layer<Assets> = Layer.succeed(Assets, makeAssets(builtInAssets))

  /**
   * The built-in assets plus an embedder's own; an extra asset with a built-in id replaces the built-in.
   * Validates eagerly, so a bad configuration throws where the layer is wired.
   */
  static layerWith(extra: ReadonlyArray<Asset>): Layer.Layer<Assets> {
    return Layer.succeed(Assets, makeAssets([...builtInAssets, ...extra]))
  }
}

/** The supported asset with this id, or UnsupportedAsset (a 400 at the edge). */
export const requireAsset = (assetId: string): Effect.Effect<Asset, UnsupportedAsset, Assets> =>
  Assets.use((assets) =>
    Effect.fromOption(assets.get(assetId)).pipe(Effect.mapError(() => new UnsupportedAsset({ assetId })))
  )
