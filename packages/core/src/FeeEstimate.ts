/**
 * The answer of calculate-fee (TXN-FEE-2). `estimatedFee` is the one amount on the wire that is a JSON number
 * (GEN-DEC-1). The core keeps the fee exact, as a decimal string (`FeeQuote`); `FeeEstimate` is the interface's
 * record for JavaScript callers, whose number is the nearest double, lossy beyond about 15 significant digits. The
 * HTTP adapter writes the quote's exact digits as the JSON number instead, so no precision is lost on the wire.
 */
import { Schema } from "effect"
import * as Money from "./Money.js"

export const FeeEstimate = Schema.Struct({
  assetType: Schema.String,
  amount: Schema.String,
  // Finite: a fee is always a real number, and the OpenAPI document must not allow "NaN" or "Infinity" strings.
  estimatedFee: Schema.Finite,
  feeAssetType: Schema.String
})
export type FeeEstimate = typeof FeeEstimate.Type

/** A fee estimate with the fee exact. */
export const FeeQuote = Schema.Struct({
  assetType: Schema.String,
  amount: Money.DecimalString,
  fee: Money.DecimalString,
  feeAssetType: Schema.String
})
export type FeeQuote = typeof FeeQuote.Type

export const quote = (assetType: string, amount: Money.DecimalString, fee: Money.DecimalString, feeAssetType: string): FeeQuote => ({
  assetType,
  amount,
  fee,
  feeAssetType
})

/** The interface's record for a JavaScript caller: the fee as the nearest JS number. */
export const fromQuote = (q: FeeQuote): FeeEstimate => ({
  assetType: q.assetType,
  amount: q.amount,
  estimatedFee: Money.toJsonNumber(q.fee),
  feeAssetType: q.feeAssetType
})
