/**
 * The Rates port: the price of one unit of an asset in Canadian dollars, as an exact decimal, behind
 * `availableBalanceCad`. `layerStatic` serves a fixed table (the embedded default); a deployment plugs in its own
 * price source. An asset with no price shows a CAD value of 0.00 rather than failing a whole list.
 */
import { Context, Effect, Layer, Option } from "effect"
import * as Money from "./Money.js"

export class Rates extends Context.Service<Rates, {
  readonly priceInCad: (assetId: string) => Effect.Effect<Option.Option<Money.DecimalString>>
}>()("@custody-relay/core/Rates") {}

export const defaultPricesCad: Readonly<Record<string, string>> = {
  BTC: "131250.55",
  ETH: "4380.12",
  USDC: "1.38",
  USDT: "1.38",
  LTC: "121.40",
  SOL: "243.75"
}

export const layerStatic = (prices: Readonly<Record<string, string>> = defaultPricesCad): Layer.Layer<Rates> => {
  const table = new Map(Object.entries(prices).map(([assetId, price]) => [assetId, Money.canonical(price)]))
  return Layer.succeed(Rates, Rates.of({ priceInCad: (assetId) => Effect.succeed(Option.fromNullishOr(table.get(assetId))) }))
}

/** The CAD value of a balance, rounded to cents (ROUND_HALF_UP, exactly two places). */
export const valueInCad = Effect.fnUntraced(function*(assetId: string, balance: Money.DecimalString) {
  const rates = yield* Rates
  const price = yield* rates.priceInCad(assetId)
  return Money.toCad(balance, Option.getOrElse(price, () => Money.ZERO))
})
