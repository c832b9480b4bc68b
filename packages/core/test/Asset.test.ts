import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Option, Result } from "effect"
import { Assets, builtInAssets, makeAssets } from "../src/Asset.js"
import type { Asset } from "../src/Asset.js"
import { Bitcoin, Ethereum } from "../src/Chain.js"
import * as Money from "../src/Money.js"

const precisionOf = (assets: Assets["Service"], assetId: string) =>
  assets.get(assetId).pipe(Option.map((asset) => asset.precision))

layer(Assets.layer)("Assets.layer", (it) => {
  it.effect("TXN-PREC-2: BTC has 8 decimal places, ETH 18, USDC 6", () =>
    Effect.gen(function*() {
      const assets = yield* Assets
      expect(precisionOf(assets, "BTC")).toEqual(Option.some(8))
      expect(precisionOf(assets, "ETH")).toEqual(Option.some(18))
      expect(precisionOf(assets, "USDC")).toEqual(Option.some(6))
    }))

  it.effect("TXN-PREC-2: other assets declare their own precision (USDT 6, LTC 8, SOL 9)", () =>
    Effect.gen(function*() {
      const assets = yield* Assets
      expect(precisionOf(assets, "USDT")).toEqual(Option.some(6))
      expect(precisionOf(assets, "LTC")).toEqual(Option.some(8))
      expect(precisionOf(assets, "SOL")).toEqual(Option.some(9))
    }))

  it.effect("TXN-PREC-2: for every asset exactly the maximum places passes and one more is refused", () =>
    Effect.gen(function*() {
      const assets = yield* Assets
      for (const asset of assets.all) {
        const smallest = asset.precision === 0 ? "1" : `0.${"0".repeat(asset.precision - 1)}1`
        expect(Result.isSuccess(Money.parseAmount(smallest, asset.precision, asset.assetId)), asset.assetId).toBe(true)
        const tooFine = Money.parseAmount(`0.${"0".repeat(asset.precision)}1`, asset.precision, asset.assetId)
        expect(Result.isFailure(tooFine) ? tooFine.failure.reason : undefined).toBe("too_many_decimals")
      }
    }))

  it.effect("lists the built-in assets with their chains and fee assets", () =>
    Effect.gen(function*() {
      const assets = yield* Assets
      expect(assets.all.map((asset) => asset.assetId)).toEqual(["BTC", "ETH", "USDC", "USDT", "LTC", "SOL"])
      const chainOf = (assetId: string) => assets.get(assetId).pipe(Option.map((asset) => asset.chain.chainType))
      expect(chainOf("BTC")).toEqual(Option.some("BITCOIN"))
      expect(chainOf("USDC")).toEqual(Option.some("ETHEREUM"))
      expect(chainOf("LTC")).toEqual(Option.some("LITECOIN"))
      expect(chainOf("SOL")).toEqual(Option.some("SOLANA"))
      const feeOf = (assetId: string) => assets.get(assetId).pipe(Option.map((asset) => asset.feeAssetId))
      expect(feeOf("USDC")).toEqual(Option.some("ETH"))
      expect(feeOf("USDT")).toEqual(Option.some("ETH"))
      expect(feeOf("BTC")).toEqual(Option.some("BTC"))
    }))

  it.effect("matches asset ids exactly: lower case and unknown ids are not supported", () =>
    Effect.gen(function*() {
      const assets = yield* Assets
      expect(Option.isNone(assets.get("btc"))).toBe(true)
      expect(Option.isNone(assets.get("Btc"))).toBe(true)
      expect(Option.isNone(assets.get(" BTC"))).toBe(true)
      expect(Option.isNone(assets.get("DOGE"))).toBe(true)
    }))
})

const dai: Asset = { assetId: "DAI", name: "Dai", precision: 18, chain: Ethereum, feeAssetId: "ETH" }
const btc10: Asset = { assetId: "BTC", name: "Bitcoin (test)", precision: 10, chain: Bitcoin, feeAssetId: "BTC" }

layer(Assets.layerWith([dai, btc10]))("Assets.layerWith", (it) => {
  it.effect("adds embedder assets and replaces a built-in with the same id in place", () =>
    Effect.gen(function*() {
      const assets = yield* Assets
      expect(assets.get("DAI")).toEqual(Option.some(dai))
      expect(assets.get("BTC")).toEqual(Option.some(btc10))
      expect(assets.all.map((asset) => asset.assetId)).toEqual(["BTC", "ETH", "USDC", "USDT", "LTC", "SOL", "DAI"])
    }))
})

describe("makeAssets", () => {
  it("builds the same registry the built-in layer provides", () => {
    expect(makeAssets(builtInAssets).all).toEqual(builtInAssets)
  })

  it.each<readonly [string, Asset]>([
    ["lower-case id", { ...dai, assetId: "dai" }],
    ["one-character id", { ...dai, assetId: "D" }],
    ["16-character id", { ...dai, assetId: "ABCDEFGHIJKLMNOP" }],
    ["id with a dash", { ...dai, assetId: "DAI-E" }],
    ["negative precision", { ...dai, precision: -1 }],
    ["fractional precision", { ...dai, precision: 1.5 }],
    ["precision above 36", { ...dai, precision: 37 }],
    ["unregistered fee asset", { ...dai, feeAssetId: "MATIC" }]
  ])("throws on a bad embedder config: %s", (_, asset) => {
    expect(() => makeAssets([...builtInAssets, asset])).toThrow()
    expect(() => Assets.layerWith([asset])).toThrow()
  })

  it("accepts the edges of the allowed range", () => {
    const edges = makeAssets([
      { ...dai, assetId: "ETH", feeAssetId: "ETH" },
      { ...dai, assetId: "Z0", precision: 0, feeAssetId: "ETH" },
      { ...dai, assetId: "ABCDEFGHIJKLMNO", precision: 36, feeAssetId: "ETH" }
    ])
    expect(edges.all.map((asset) => asset.precision)).toEqual([18, 0, 36])
  })
})
