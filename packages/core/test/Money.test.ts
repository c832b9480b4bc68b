import { describe, expect, it } from "@effect/vitest"
import { Decimal } from "decimal.js"
import { Result, Schema } from "effect"
import fc from "fast-check"
import * as Money from "../src/Money.js"
import type { AmountRejection, DecimalString } from "../src/Money.js"

// Oracles built from strings and bigints only, so no float can make a wrong result look right.

const digit = fc.constantFrom("0", "1", "2", "3", "4", "5", "6", "7", "8", "9")
const nonZeroDigit = fc.constantFrom("1", "2", "3", "4", "5", "6", "7", "8", "9")
const digits = (maxLength: number) => fc.array(digit, { maxLength }).map((ds) => ds.join(""))

const integerPart = fc.oneof(
  fc.constant("0"),
  fc.tuple(nonZeroDigit, digits(Money.MAX_INTEGER_DIGITS - 1)).map(([head, tail]) => head + tail)
)

/** A positive plain decimal with at most `places` written decimal places, trailing zeros allowed. */
const positiveDecimal = (places: number) =>
  fc
    .tuple(integerPart, digits(places))
    .map(([int, frac]) => (frac === "" ? int : `${int}.${frac}`))
    .filter((s) => /[1-9]/.test(s))

/** The canonical spelling of a plain decimal, by string surgery. */
const expectedCanonical = (plain: string): string => {
  const [int = "", frac = ""] = plain.split(".")
  const trimmed = frac.replace(/0+$/, "")
  return trimmed === "" ? int : `${int}.${trimmed}`
}

/** The canonical decimal string of `n / 10^scale`. */
const fromScaled = (n: bigint, scale: number): string => {
  const negative = n < 0n
  const abs = (negative ? -n : n).toString().padStart(scale + 1, "0")
  const plain = scale === 0 ? abs : `${abs.slice(0, -scale)}.${abs.slice(-scale)}`
  const result = expectedCanonical(plain)
  return negative && result !== "0" ? `-${result}` : result
}

const rejection = (result: Result.Result<DecimalString, AmountRejection>): AmountRejection | undefined =>
  Result.isFailure(result) ? result.failure : undefined

const reasonOf = (input: unknown, precision: number) => rejection(Money.parseAmount(input, precision))?.reason

const accepted = (input: unknown, precision: number): string | undefined => {
  const result = Money.parseAmount(input, precision)
  return Result.isSuccess(result) ? result.success : undefined
}

const precisions = Array.from({ length: 19 }, (_, p) => p)

describe("Money.parseAmount", () => {
  describe.each(precisions)("precision %i", (p) => {
    it(`TXN-PREC-1 TXN-PREC-2: every positive decimal with at most ${p} places is accepted and round-trips`, () => {
      fc.assert(
        fc.property(positiveDecimal(p), (input) => {
          const value = accepted(input, p)
          expect(value).toBe(expectedCanonical(input))
          expect(Money.canonical(input)).toBe(value)
          expect(Money.canonical(value ?? "")).toBe(value)
          expect(Schema.is(Money.DecimalString)(value)).toBe(true)
        })
      )
    })

    it(`TXN-PREC-2: ${p + 1} places with a non-zero last digit is refused as too_many_decimals`, () => {
      fc.assert(
        fc.property(integerPart, digits(p), nonZeroDigit, (int, frac, last) => {
          const input = `${int}.${frac.padEnd(p, "0")}${last}`
          expect(reasonOf(input, p)).toBe("too_many_decimals")
        })
      )
    })
  })

  it("TXN-PREC-2: exactly the maximum places passes (BTC 8, ETH 18, USDC 6)", () => {
    expect(accepted("0.00000001", 8)).toBe("0.00000001")
    expect(accepted("0.000000000000000001", 18)).toBe("0.000000000000000001")
    expect(accepted("123.123456789012345678", 18)).toBe("123.123456789012345678")
    expect(accepted("0.000001", 6)).toBe("0.000001")
    expect(reasonOf("0.000000001", 8)).toBe("too_many_decimals")
    expect(reasonOf("0.0000000000000000001", 18)).toBe("too_many_decimals")
    expect(reasonOf("0.0000001", 6)).toBe("too_many_decimals")
  })

  it("TXN-PREC-2: written places count, so trailing zeros beyond the precision are refused", () => {
    expect(reasonOf("1.000000000", 8)).toBe("too_many_decimals")
    expect(accepted("1.00000000", 8)).toBe("1")
    expect(reasonOf("5.0", 0)).toBe("too_many_decimals")
    expect(accepted("5", 0)).toBe("5")
  })

  it("TXN-PREC-2: the message names the places, the asset and its limit", () => {
    expect(rejection(Money.parseAmount("0.000000001", 8, "BTC"))?.message).toBe(
      "amount has 9 decimal places; BTC allows at most 8"
    )
    expect(rejection(Money.parseAmount("0.5", 0))?.message).toBe("amount has 1 decimal place; at most 0 allowed")
  })

  it("TXN-PREC-1: exponent forms are refused as exponent", () => {
    for (const input of ["1e-8", "1E5", "1.5e+3", "1e8", "0.1E-2", ".5e1", "-1e5", "+2E3", "1.e4"]) {
      expect(reasonOf(input, 18), input).toBe("exponent")
    }
    fc.assert(
      fc.property(
        fc.tuple(positiveDecimal(6), fc.constantFrom("e", "E"), fc.constantFrom("", "+", "-"), fc.nat(400)),
        ([mantissa, e, sign, exponent]) => {
          expect(reasonOf(`${mantissa}${e}${sign}${exponent}`, 18)).toBe("exponent")
        }
      )
    )
  })

  it("TXN-PREC-1: exponent is reported exactly for the strings /^[+-]?\\d*\\.?\\d*[eE][+-]?\\d+$/ matches", () => {
    const exponentForm = /^[+-]?\d*\.?\d*[eE][+-]?\d+$/
    fc.assert(
      fc.property(fc.stringMatching(/^[-+.eE0-9]{0,10}$/), (input) => {
        expect(reasonOf(input, 18) === "exponent").toBe(exponentForm.test(input))
      }),
      { numRuns: 2000 }
    )
  })

  // That parsing takes linear time is proven, not timed: every pattern it runs is checked by
  // test/LinearPatterns.test.ts, and the rest is a pass or two over the string.
  it("TXN-PREC-1: hostile megabyte inputs get their reason", () => {
    const mega = 1_000_000
    const nines = "9".repeat(mega)
    const hostile: ReadonlyArray<readonly [string, AmountRejection["reason"]]> = [
      [nines, "too_large"], [`${nines}e`, "malformed"], [`${nines}.`, "malformed"], [`-${nines}x`, "malformed"],
      [`0.${"0".repeat(mega)}`, "not_positive"], [`1.${"5".repeat(mega)}`, "too_many_decimals"]
    ]
    for (const [input, reason] of hostile) expect(reasonOf(input, 18), reason).toBe(reason)
  })

  it("TXN-PREC-1: zero in every spelling is refused as not_positive", () => {
    for (const input of ["0", "0.0", "0.00000000", "-0", "-0.0"]) {
      expect(reasonOf(input, 8), input).toBe("not_positive")
    }
  })

  it("TXN-PREC-1: negative amounts are refused as not_positive", () => {
    fc.assert(
      fc.property(positiveDecimal(8), (input) => {
        expect(reasonOf(`-${input}`, 8)).toBe("not_positive")
      })
    )
  })

  it("TXN-PREC-1: non-decimal spellings are refused as malformed", () => {
    const malformed = [
      "", " ", "1 ", " 1", "1 000", "01", "00.5", ".5", "5.", "+5", "0x1F", "1_000", "1,5", "1.2.3", "abc",
      "NaN", "Infinity", "-Infinity", "١٢٣", "１２", "½", "1\n", "--1", "- 1", "-.5", "-01"
    ]
    for (const input of malformed) {
      expect(reasonOf(input, 18), JSON.stringify(input)).toBe("malformed")
    }
  })

  it("TXN-PREC-1: arbitrary strings that are not plain decimals are refused", () => {
    const plain = /^(0|[1-9][0-9]*)(\.[0-9]+)?$/
    fc.assert(
      fc.property(
        fc.oneof(fc.string(), fc.string({ unit: "binary" }), fc.stringMatching(/^[-+.eE0-9x ]{1,12}$/)),
        (input) => {
          fc.pre(!plain.test(input))
          expect(["malformed", "exponent", "not_positive"]).toContain(reasonOf(input, 18))
        }
      )
    )
  })

  it("TXN-PREC-1: non-strings are refused as not_a_string", () => {
    fc.assert(
      fc.property(
        fc.anything().filter((value) => typeof value !== "string"),
        (input) => {
          expect(reasonOf(input, 18)).toBe("not_a_string")
        }
      )
    )
    for (const input of [1, 0.5, 1n, null, undefined, ["1"], { amount: "1" }]) {
      expect(reasonOf(input, 18)).toBe("not_a_string")
    }
  })

  it("TXN-PREC-1: at most 40 integer digits, anything longer is too_large", () => {
    const forty = `1${"0".repeat(39)}`
    expect(accepted(forty, 0)).toBe(forty)
    expect(accepted(`${"9".repeat(40)}.5`, 1)).toBe(`${"9".repeat(40)}.5`)
    expect(reasonOf(`1${"0".repeat(40)}`, 0)).toBe("too_large")
    expect(reasonOf("9".repeat(100_000), 0)).toBe("too_large")
  })

  it("throws on a precision that is not a non-negative integer (programming error)", () => {
    expect(() => Money.parseAmount("1", -1)).toThrow(RangeError)
    expect(() => Money.parseAmount("1", 1.5)).toThrow(RangeError)
  })
})

describe("Money.canonical", () => {
  it("normalises trusted values to one spelling, never exponent notation", () => {
    expect(Money.canonical("100.500000")).toBe("100.5")
    expect(Money.canonical("0.0")).toBe("0")
    expect(Money.canonical("-0.0")).toBe("0")
    expect(Money.canonical("007")).toBe("7")
    expect(Money.canonical("1e-18")).toBe("0.000000000000000001")
    expect(Money.canonical(new Decimal("1e-18"))).toBe("0.000000000000000001")
    expect(Money.canonical(new Decimal(10).pow(40))).toBe(`1${"0".repeat(40)}`)
    expect(Money.canonical("-12.3400")).toBe("-12.34")
  })

  it("any plain decimal, canonical or not, signed, with leading or trailing zeros, comes back as its one spelling", () => {
    fc.assert(
      fc.property(fc.boolean(), digits(45), digits(40), (negative, int, frac) => {
        const written = `${negative ? "-" : ""}${int === "" ? "0" : int}${frac === "" ? "" : `.${frac}`}`
        const scaled = BigInt(`${negative ? "-" : ""}${int === "" ? "0" : int}${frac}`)
        expect(Money.canonical(written)).toBe(fromScaled(scaled, frac.length))
      }),
      { numRuns: 2000 }
    )
  })

  it("throws on values that are not finite decimals", () => {
    expect(() => Money.canonical("NaN")).toThrow()
    expect(() => Money.canonical("Infinity")).toThrow()
    expect(() => Money.canonical("abc")).toThrow()
  })

  it("is unaffected by the global decimal.js configuration", () => {
    const saved = { precision: Decimal.precision, rounding: Decimal.rounding, toExpNeg: Decimal.toExpNeg }
    Decimal.set({ precision: 3, rounding: Decimal.ROUND_UP, toExpNeg: -2 })
    try {
      expect(Money.canonical("0.000000000000000001")).toBe("0.000000000000000001")
      expect(Money.add(Money.canonical("1.23456"), Money.canonical("0.00001"))).toBe("1.23457")
    } finally {
      Decimal.set(saved)
    }
  })
})

describe("Money.DecimalString schema", () => {
  it("accepts canonical spellings and refuses every other spelling", () => {
    const is = Schema.is(Money.DecimalString)
    for (const good of ["0", "1", "100.5", "-0.25", "0.000000000000000001"]) expect(is(good), good).toBe(true)
    for (const bad of ["", "-0", "1.50", "01", "1e5", ".5", "5.", "+1", " 1", "1.0", "-"]) {
      expect(is(bad), bad).toBe(false)
    }
  })

  // The schemas' patterns are written without lookahead so that test/LinearPatterns.test.ts can prove them linear;
  // these oracles say by string surgery which spellings each must accept.
  const spelling = fc.oneof(
    fc.string({ unit: fc.constantFrom("-", "0", "1", "9", "."), maxLength: 8 }),
    positiveDecimal(3),
    positiveDecimal(3).map((s) => `-${s}`),
    fc.constantFrom("0", "-0", "0.00", "-0.00", "-0.01", "-0.10", "-0.1", "0.0", "-0.0")
  )
  const unsignedParts = (s: string) => {
    const [int = "", frac] = (s.startsWith("-") ? s.slice(1) : s).split(".")
    return { int, frac, negativeZero: s.startsWith("-") && /^0*$/.test(int + (frac ?? "")) }
  }

  it("GEN-DEC-1: DecimalString accepts exactly the canonical spellings", () => {
    const is = Schema.is(Money.DecimalString)
    const canonicalByHand = (s: string): boolean => {
      if (!/^-?[0-9]+(\.[0-9]+)?$/.test(s)) return false
      const { int, frac, negativeZero } = unsignedParts(s)
      return !(int.length > 1 && int.startsWith("0")) && !(frac?.endsWith("0") ?? false) && !negativeZero
    }
    fc.assert(fc.property(spelling, (s) => { expect(is(s), s).toBe(canonicalByHand(s)) }), { numRuns: 5000 })
  })

  it("GEN-DEC-1: CadString accepts exactly two-place spellings without a leading zero or a negative zero", () => {
    const is = Schema.is(Money.CadString)
    const cadByHand = (s: string): boolean => {
      if (!/^-?[0-9]+\.[0-9]{2}$/.test(s)) return false
      const { int, negativeZero } = unsignedParts(s)
      return !(int.length > 1 && int.startsWith("0")) && !negativeZero
    }
    const twoPlaces = fc.tuple(fc.constantFrom("", "-"), fc.constantFrom("0", "00", "1", "10", "01"), digits(2), digits(2))
      .map(([sign, int, a, b]) => `${sign}${int}.${(a + b).slice(0, 2).padEnd(2, "0")}`)
    fc.assert(fc.property(fc.oneof(spelling, twoPlaces), (s) => { expect(is(s), s).toBe(cadByHand(s)) }), { numRuns: 5000 })
  })
})

describe("Money arithmetic", () => {
  const scale = 18
  const eighteenPlaces = fc.bigInt({ min: -(10n ** 36n), max: 10n ** 36n })
  const nearTenToThirty = fc.bigInt({ min: 10n ** 48n - 10n ** 20n, max: 10n ** 48n + 10n ** 20n })
  const amount = fc.oneof(eighteenPlaces, nearTenToThirty, nearTenToThirty.map((n) => -n))
  const money = (n: bigint) => Money.canonical(fromScaled(n, scale))

  it("GEN-DEC-1: add and subtract are exact for 18-decimal values and values near 10^30", () => {
    fc.assert(
      fc.property(amount, amount, (a, b) => {
        const x = money(a)
        const y = money(b)
        expect(Money.add(x, y)).toBe(fromScaled(a + b, scale))
        expect(Money.subtract(x, y)).toBe(fromScaled(a - b, scale))
        expect(Money.subtract(Money.add(x, y), y)).toBe(x)
      })
    )
  })

  it("GEN-DEC-1: compare, isNegative and isZero agree with bigint arithmetic", () => {
    fc.assert(
      fc.property(amount, amount, (a, b) => {
        expect(Money.compare(money(a), money(b))).toBe(a < b ? -1 : a > b ? 1 : 0)
        expect(Money.isNegative(money(a))).toBe(a < 0n)
        expect(Money.isZero(money(a))).toBe(a === 0n)
      })
    )
    expect(Money.isZero(Money.ZERO)).toBe(true)
    expect(Money.isNegative(Money.ZERO)).toBe(false)
  })

  it("GEN-DEC-1: sum is exact and is ZERO for no values", () => {
    fc.assert(
      fc.property(fc.array(amount, { maxLength: 20 }), (values) => {
        const total = values.reduce((acc, n) => acc + n, 0n)
        expect(Money.sum(values.map(money))).toBe(fromScaled(total, scale))
      })
    )
    expect(Money.sum([])).toBe("0")
  })

  it("GEN-DEC-1: multiply is exact", () => {
    fc.assert(
      fc.property(amount, fc.bigInt({ min: -(10n ** 12n), max: 10n ** 12n }), (a, rate) => {
        expect(Money.multiply(money(a), Money.canonical(fromScaled(rate, 6)))).toBe(fromScaled(a * rate, scale + 6))
      })
    )
  })

  it("TXN-PREC-2: roundDown cuts to the given places toward zero", () => {
    fc.assert(
      fc.property(amount, fc.integer({ min: 0, max: 18 }), (a, places) => {
        const unit = 10n ** BigInt(scale - places)
        // bigint division truncates toward zero, which is what roundDown promises.
        expect(Money.roundDown(money(a), places)).toBe(fromScaled((a / unit) * unit, scale))
      })
    )
    expect(Money.roundDown(Money.canonical("0.123456789"), 8)).toBe("0.12345678")
    expect(Money.roundDown(Money.canonical("-0.999"), 2)).toBe("-0.99")
    expect(Money.roundDown(Money.canonical("-0.001"), 2)).toBe("0")
    expect(Money.roundDown(Money.canonical("5"), 0)).toBe("5")
    expect(() => Money.roundDown(Money.ZERO, -1)).toThrow(RangeError)
  })

  it("throws rather than rounding when a result would need more than 100 significant digits", () => {
    const huge = Money.canonical(`1${"0".repeat(60)}`)
    const tiny = Money.canonical(`0.${"0".repeat(40)}1`)
    expect(() => Money.add(huge, tiny)).toThrow(RangeError)
    expect(() => Money.subtract(huge, tiny)).toThrow(RangeError)
    const sevens = Money.canonical("7".repeat(51))
    expect(() => Money.multiply(sevens, Money.canonical("3".repeat(50)))).toThrow(RangeError)
  })
})

describe("Money.toCad", () => {
  it("rounds half up to two places and keeps both places", () => {
    const cad = (balance: string, price: string) => Money.toCad(Money.canonical(balance), Money.canonical(price))
    expect(cad("1.23", "10")).toBe("12.30")
    expect(cad("0", "65000.12")).toBe("0.00")
    expect(cad("0.005", "1")).toBe("0.01")
    expect(cad("0.0049999999", "1")).toBe("0.00")
    expect(cad("0.00000001", "95000")).toBe("0.00")
    expect(cad("0.5", "95000.01")).toBe("47500.01")
    expect(cad("1.000000000000000001", "3000")).toBe("3000.00")
    expect(cad("-0.001", "1")).toBe("0.00")
    expect(cad("-0.015", "1")).toBe("-0.02")
    expect(Schema.is(Money.CadString)(cad("1.23", "10"))).toBe(true)
  })

  it("matches a bigint oracle for 8-decimal balances and 2-decimal prices", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 20n }), fc.bigInt({ min: 0n, max: 10n ** 9n }), (balance, price) => {
        // balance·10^-8 × price·10^-2 in cents is balance·price / 10^8, rounded half up.
        const product = balance * price
        const cents = (product + 5n * 10n ** 7n) / 10n ** 8n
        expect(Money.toCad(Money.canonical(fromScaled(balance, 8)), Money.canonical(fromScaled(price, 2)))).toBe(
          `${cents / 100n}.${(cents % 100n).toString().padStart(2, "0")}`
        )
      })
    )
  })
})

describe("Money.toCad against decimal.js", () => {
  // The arithmetic toCad had before it was done in integers: an exact product (200 digits hold any two amounts
  // here), rounded half up (away from zero) to cents.
  const Exact = Decimal.clone({ precision: 200, rounding: Decimal.ROUND_HALF_UP, toExpNeg: -1000, toExpPos: 1000 })
  const reference = (balance: string, price: string): string => {
    const cents = new Exact(balance).times(price).toDecimalPlaces(2, Decimal.ROUND_HALF_UP)
    return cents.isZero() ? "0.00" : cents.toFixed(2)
  }
  const signed = (places: number) =>
    fc.tuple(fc.boolean(), positiveDecimal(places)).map(([negative, plain]) => (negative ? "-" : "") + expectedCanonical(plain))

  it("gives decimal.js's exact product rounded half up to cents, for any balance and price, signed or not", () => {
    fc.assert(
      fc.property(signed(36), signed(12), (balance, price) => {
        expect(Money.toCad(balance as DecimalString, price as DecimalString)).toBe(reference(balance, price))
      }),
      { numRuns: 2000 }
    )
  })

  it("reads a value written otherwise by its canonical spelling (a price from a port: trailing zeros, an exponent)", () => {
    expect(Money.toCad("2.50" as DecimalString, "1.380" as DecimalString)).toBe("3.45")
    expect(Money.toCad("0.5" as DecimalString, "1e3" as DecimalString)).toBe("500.00")
    expect(() => Money.toCad("0.5" as DecimalString, "NaN" as DecimalString)).toThrow()
  })
})

describe("Money.toJsonNumber", () => {
  it("GEN-DEC-1: converts to the nearest JS number, for estimatedFee only", () => {
    expect(Money.toJsonNumber(Money.canonical("0.00021"))).toBe(0.00021)
    expect(Money.toJsonNumber(Money.canonical("12.5"))).toBe(12.5)
    expect(Money.toJsonNumber(Money.ZERO)).toBe(0)
  })
})

describe("Money.decimalPlaces", () => {
  it("counts written places", () => {
    expect(Money.decimalPlaces("1")).toBe(0)
    expect(Money.decimalPlaces("1.50")).toBe(2)
    expect(Money.decimalPlaces("0.000000001")).toBe(9)
  })
})
