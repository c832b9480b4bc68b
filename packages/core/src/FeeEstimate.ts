/**
 * The answer of calculate-fee (TXN-FEE-2). `estimatedFee` is the one amount on the wire that is a JSON number
 * (GEN-DEC-1): it is converted from the exact decimal only here, at the edge.
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

export const make = (assetType: string, amount: Money.DecimalString, fee: Money.DecimalString, feeAssetType: string): FeeEstimate => ({
  assetType,
  amount,
  estimatedFee: Money.toJsonNumber(fee),
  feeAssetType
})
