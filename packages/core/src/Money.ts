/**
 * Money: the one place amounts are parsed, compared, added and formatted.
 *
 * Amounts travel through the domain as canonical decimal strings (`DecimalString`): plain notation, no
 * exponent, no trailing fractional zeros, no leading zeros, no "-0". Every operation here is exact decimal
 * arithmetic on a private decimal.js constructor, so no caller's global `Decimal.set(...)` can change a result,
 * and a JS `number` never carries an amount (GEN-DEC-1). The only conversion to a number is
 * {@link toJsonNumber}, kept for `estimatedFee` at the wire edge.
 *
 * Guarantees:
 * - {@link parseAmount} accepts exactly the amounts TXN-PREC-1 and TXN-PREC-2 allow and returns them canonical.
 * - {@link add}, {@link subtract}, {@link sum}, {@link multiply} and {@link toCad} are exact or throw a
 *   `RangeError`; nothing rounds silently, and {@link roundDown} and {@link toCad} round only where asked.
 *   Amounts parsed here have at most 40 integer digits and at most 36 decimal places, far
 *   inside the 100 significant digits the private constructor works with.
 */
import { Decimal } from "decimal.js"
import { Result, Schema } from "effect"

/**
 * Significant digits the private constructor keeps. Operations check their operands against it before they
 * run, because decimal.js rounds (here: truncates) silently once a result needs more.
 */
const PRECISION = 100

const D = Decimal.clone({
  precision: PRECISION,
  rounding: Decimal.ROUND_DOWN,
  toExpNeg: -1000,
  toExpPos: 1000
})

/**
 * Longest integer part {@link parseAmount} accepts. No asset has a supply near 10^40 units, and the bound keeps
 * hostile inputs from costing arbitrary work downstream.
 */
export const MAX_INTEGER_DIGITS = 40

// Zero, or a nonzero integer part with an optional fraction, or "0." and a fraction: every branch is exact, with no
// lookahead, so test/LinearPatterns.test.ts can prove the pattern linear (as every pattern we ship).
const CANONICAL_DECIMAL = /^(?:0|-?[1-9][0-9]*(?:\.[0-9]*[1-9])?|-?0\.[0-9]*[1-9])$/u

/**
 * A canonical decimal string: `"100.5"`, `"-0.25"`, `"0"`; never `"100.50"`, `"1e-8"`, `"01"` or `"-0"`.
 * Canonical means one spelling per value, so two equal amounts are equal strings and can be compared,
 * stored and indexed as such.
 */
export const DecimalString = Schema.String.pipe(
  Schema.check(
    Schema.isPattern(CANONICAL_DECIMAL, {
      identifier: "DecimalString",
      message: "expected a canonical decimal string such as \"100.5\" (plain notation, no trailing zeros)"
    })
  ),
  Schema.brand("DecimalString")
)

export type DecimalString = typeof DecimalString.Type

// "-0.00" is refused by spelling the negative amounts below one out, for the same reason as above.
const CAD_AMOUNT = /^(?:-?[1-9][0-9]*\.[0-9]{2}|0\.[0-9]{2}|-0\.(?:0[1-9]|[1-9][0-9]))$/u

/**
 * A CAD value with exactly two decimal places, e.g. `"12.30"`. A separate brand from {@link DecimalString}
 * because it keeps its trailing zeros: it is a display value (`availableBalanceCad`), not an amount to
 * compute with.
 */
export const CadString = Schema.String.pipe(
  Schema.check(
    Schema.isPattern(CAD_AMOUNT, {
      identifier: "CadString",
      message: "expected a CAD amount with exactly two decimal places such as \"12.30\""
    })
  ),
  Schema.brand("CadString")
)

export type CadString = typeof CadString.Type

/**
 * Why {@link parseAmount} refused an input. A plain record rather than an error class: the caller decides
 * which domain error it becomes (for example `AmountExceedsPrecision`).
 */
export interface AmountRejection {
  readonly reason: "not_a_string" | "malformed" | "exponent" | "not_positive" | "too_many_decimals" | "too_large"
  readonly message: string
}

const PLAIN_DECIMAL = /^(0|[1-9][0-9]*)(\.[0-9]+)?$/
/**
 * Scientific notation: the language of `/^[+-]?\d*\.?\d*[eE][+-]?\d+$/`, written so that no two quantifiers
 * compete for the same digits. The shorter spelling backtracks quadratically on a long run of digits, which
 * turned a 100 kB request body into seconds of CPU.
 */
const EXPONENT_FORM = /^[+-]?(?:\d+(?:\.\d*)?|\.\d*)?[eE][+-]?\d+$/
const ZERO_FORM = /^0(\.0+)?$/

const reject = (reason: AmountRejection["reason"], message: string): Result.Result<never, AmountRejection> =>
  Result.fail({ reason, message })

const places = (n: number): string => (n === 1 ? "1 decimal place" : `${n} decimal places`)

/**
 * Decimal places as written: `"1.50"` has 2, `"1"` has 0. Trailing zeros count, because the precision rule
 * is about what the client sent (see {@link parseAmount}).
 */
export const decimalPlaces = (value: string): number => {
  const dot = value.indexOf(".")
  return dot === -1 ? 0 : value.length - dot - 1
}

/**
 * Parses a client-supplied amount (TXN-PREC-1, TXN-PREC-2).
 *
 * Accepts only a JS string in plain decimal notation (`^(0|[1-9][0-9]*)(\.[0-9]+)?$`): no sign, exponent,
 * whitespace, leading zeros, bare `.5` or `5.`, hex or non-ASCII digits. The value must be greater than zero,
 * have at most {@link MAX_INTEGER_DIGITS} integer digits, and at most `precision` decimal places.
 *
 * Decimal places are counted as written, not after normalisation: `"1.000000000"` has 9 places and is refused
 * for BTC (precision 8) although its value is 1. Counting written places makes the rule a property of the
 * request text, so clients, the conformance kit and this code agree without reasoning about trailing zeros.
 *
 * On success the amount comes back canonical (`"1.50"` becomes `"1.5"`).
 *
 * @param precision - decimal places the asset allows; a negative or fractional value is a programming error
 *   and throws.
 * @param assetId - only used to name the asset in the rejection message.
 */
export const parseAmount = (
  input: unknown,
  precision: number,
  assetId?: string
): Result.Result<DecimalString, AmountRejection> => {
  if (!Number.isInteger(precision) || precision < 0) {
    throw new RangeError(`precision must be a non-negative integer, got ${precision}`)
  }
  if (typeof input !== "string") {
    return reject(
      "not_a_string",
      `amount must be a decimal string such as "0.5", got ${describeType(input)}`
    )
  }
  if (EXPONENT_FORM.test(input)) {
    return reject(
      "exponent",
      "amount must be a plain decimal string; scientific notation such as \"1e-8\" is not accepted"
    )
  }
  if (input.startsWith("-") && PLAIN_DECIMAL.test(input.slice(1))) {
    return reject("not_positive", "amount must be greater than zero")
  }
  const match = PLAIN_DECIMAL.exec(input)
  if (match === null) {
    return reject(
      "malformed",
      "amount must be a plain decimal string of digits with an optional fraction, such as \"0.5\""
    )
  }
  const integerPart = match[1] ?? ""
  if (integerPart.length > MAX_INTEGER_DIGITS) {
    return reject(
      "too_large",
      `amount has ${integerPart.length} integer digits; at most ${MAX_INTEGER_DIGITS} are accepted`
    )
  }
  if (ZERO_FORM.test(input)) {
    return reject("not_positive", "amount must be greater than zero")
  }
  const written = decimalPlaces(input)
  if (written > precision) {
    const allowed = assetId === undefined ? `at most ${precision} allowed` : `${assetId} allows at most ${precision}`
    return reject("too_many_decimals", `amount has ${places(written)}; ${allowed}`)
  }
  return Result.succeed(canonical(input))
}

const describeType = (input: unknown): string =>
  input === null ? "null" : Array.isArray(input) ? "array" : typeof input

/**
 * The canonical spelling of a trusted value, e.g. one read back from storage or produced by decimal.js:
 * `"100.500000"` becomes `"100.5"`, `"0.0"` becomes `"0"`, `1e-18` becomes `"0.000000000000000001"`.
 * Never exponent notation. Throws on a value that is not a finite number, because trusted input that is not
 * one means corrupted data, not a client mistake.
 */
export const canonical = (value: string | Decimal): DecimalString =>
  // What storage gives back is already canonical (it only ever stores canonical amounts): a pattern test is a
  // tenth of the cost of parsing and printing it again, on every amount of every row read.
  typeof value === "string" && CANONICAL_DECIMAL.test(value) ? value as DecimalString : format(new D(value))

const format = (value: Decimal): DecimalString => {
  if (!value.isFinite()) {
    throw new RangeError(`not a finite decimal: ${value.toString()}`)
  }
  // decimal.js keeps the sign of zero, and "-0" has no place in a canonical spelling.
  // toFixed() without an argument is the unrounded value in plain notation.
  return (value.isZero() ? "0" : value.toFixed()) as DecimalString
}

export const ZERO: DecimalString = "0" as DecimalString

const integerDigits = (value: Decimal): number => (value.isZero() ? 0 : Math.max(0, value.e + 1))

/** Throws unless `a × b` fits: the exact product has at most as many significant digits as both factors. */
const ensureExactProduct = (a: Decimal, b: Decimal): void => {
  const digits = a.precision() + b.precision()
  if (digits > PRECISION) {
    throw new RangeError(`decimal product needs ${digits} significant digits; at most ${PRECISION} are exact`)
  }
}

/**
 * Throws unless `a ± b` fits in the private constructor's precision. The exact result has at most one more
 * integer digit than the larger operand and no more decimal places than the longer one.
 */
const ensureExactSum = (a: Decimal, b: Decimal): void => {
  const digits = Math.max(integerDigits(a), integerDigits(b)) + 1 + Math.max(a.decimalPlaces(), b.decimalPlaces())
  if (digits > PRECISION) {
    throw new RangeError(`decimal sum needs ${digits} significant digits; at most ${PRECISION} are exact`)
  }
}

/** Exact `a + b`. */
export const add = (a: DecimalString, b: DecimalString): DecimalString => {
  const x = new D(a)
  const y = new D(b)
  ensureExactSum(x, y)
  return format(x.plus(y))
}

/** Exact `a - b`; the result may be negative. */
export const subtract = (a: DecimalString, b: DecimalString): DecimalString => {
  const x = new D(a)
  const y = new D(b)
  ensureExactSum(x, y)
  return format(x.minus(y))
}

/**
 * Exact `a × b`, e.g. an amount times a fee rate. Round the product to the asset's precision with
 * {@link roundDown} before it becomes an amount.
 */
export const multiply = (a: DecimalString, b: DecimalString): DecimalString => {
  const x = new D(a)
  const y = new D(b)
  ensureExactProduct(x, y)
  return format(x.times(y))
}

/**
 * `value` cut to at most `places` decimal places, rounding toward zero, so that a computed amount (a fee, a
 * share) never exceeds what it was computed from and always fits the asset's precision (TXN-PREC-2).
 */
export const roundDown = (value: DecimalString, places: number): DecimalString => {
  if (!Number.isInteger(places) || places < 0) {
    throw new RangeError(`places must be a non-negative integer, got ${places}`)
  }
  return format(new D(value).toDecimalPlaces(places, Decimal.ROUND_DOWN))
}

/** Exact sum of any number of amounts; {@link ZERO} for none. */
export const sum = (values: Iterable<DecimalString>): DecimalString => {
  let total = ZERO
  for (const value of values) {
    total = add(total, value)
  }
  return total
}

export const compare = (a: DecimalString, b: DecimalString): -1 | 0 | 1 => {
  const order = new D(a).comparedTo(b)
  return order < 0 ? -1 : order > 0 ? 1 : 0
}

export const isNegative = (value: DecimalString): boolean => new D(value).lessThan(0)

export const isZero = (value: DecimalString): boolean => new D(value).isZero()

/**
 * The CAD value of a balance: `balance × priceCad`, rounded half-up to cents and written with exactly two
 * places (`"12.30"`). The product is computed exactly before the single rounding step, so there is no double
 * rounding.
 */
export const toCad = (balance: DecimalString, priceCad: DecimalString): CadString => {
  // In integers, because every account of every read carries one: a decimal.js product at 100 digits and its
  // rounding cost 3.85 µs, this 1.5 (docs/benchmarks.md, "the CAD value in integers"). A balance of p places times
  // a price of q places is an integer of p + q places; it is rounded once, half away from zero, to two.
  const [x, xPlaces] = scaledOf(balance)
  const [y, yPlaces] = scaledOf(priceCad)
  const product = x * y
  const surplus = xPlaces + yPlaces - 2
  let cents: bigint
  if (surplus <= 0) {
    cents = product * 10n ** BigInt(-surplus)
  } else {
    const unit = 10n ** BigInt(surplus)
    const rounded = ((product < 0n ? -product : product) + unit / 2n) / unit
    cents = product < 0n ? -rounded : rounded
  }
  if (cents === 0n) return "0.00" as CadString
  const written = (cents < 0n ? -cents : cents).toString().padStart(3, "0")
  return `${cents < 0n ? "-" : ""}${written.slice(0, -2)}.${written.slice(-2)}` as CadString
}

const SIGNED_PLAIN_DECIMAL = /^-?[0-9]+(?:\.[0-9]+)?$/u

/** A decimal as an integer and its count of decimal places: "-12.05" is [-1205n, 2]. */
const scaledOf = (value: DecimalString): readonly [bigint, number] => {
  // A port's value (a price) may be written otherwise ("1e3"); its canonical spelling is plain.
  const plain: string = SIGNED_PLAIN_DECIMAL.test(value) ? value : canonical(value)
  const dot = plain.indexOf(".")
  return dot < 0 ? [BigInt(plain), 0] : [BigInt(plain.slice(0, dot) + plain.slice(dot + 1)), plain.length - dot - 1]
}

/**
 * The nearest JS number to an amount. Lossy beyond about 15 significant digits, which is why it exists only
 * for `estimatedFee`, the one amount the interface sends as a JSON number (GEN-DEC-1, TXN-FEE-2). Call it at
 * the wire edge and nowhere else.
 */
export const toJsonNumber = (value: DecimalString): number => new D(value).toNumber()
