/**
 * Query parameters as data: each one knows how to decode its raw values and how to describe itself in the
 * OpenAPI document, so the decoder and the document cannot disagree. A route declares a record of parameters and
 * receives the decoded record, typed. Single-valued parameters given twice, non-integer or out-of-range pages
 * (PAGE-3) and values outside an enumeration are 400 with the parameter named in `details`.
 */
import { Ids, Input, Page, RelayError, Timestamp } from "@custody-relay/core"
import { Result } from "effect"

export interface QueryParameter<A> {
  readonly description: string
  /** Several values accepted, given by repeating the parameter (and, for convenience, comma-separated). */
  readonly multi: boolean
  /** JSON Schema of one value, for the OpenAPI document. */
  readonly schema: Readonly<Record<string, unknown>>
  readonly decode: (values: ReadonlyArray<string>) => Result.Result<A, string>
}

export type QueryParameters = Readonly<Record<string, QueryParameter<unknown>>>

export type Decoded<Q extends QueryParameters> = {
  readonly [K in keyof Q]: Q[K] extends QueryParameter<infer A> ? A : never
}

const single = <A>(decode: (value: string) => Result.Result<A, string>, fallback: A) =>
(values: ReadonlyArray<string>): Result.Result<A, string> => {
  if (values.length === 0) return Result.succeed(fallback)
  if (values.length > 1) return Result.fail("must be given at most once")
  return decode(values[0] ?? "")
}

const DIGITS = /^[0-9]{1,10}$/

/** A positive integer from `minimum` to `maximum` written in plain digits: "1.0", "1e2", "+1", "" are refused. */
export const integer = (options: {
  readonly description: string
  readonly minimum: number
  readonly maximum: number
  readonly default: number
}): QueryParameter<number> => ({
  description: options.description,
  multi: false,
  schema: { type: "integer", minimum: options.minimum, maximum: options.maximum, default: options.default },
  decode: single((value) => {
    const n = DIGITS.test(value) ? Number(value) : Number.NaN
    return Number.isInteger(n) && n >= options.minimum && n <= options.maximum
      ? Result.succeed(n)
      : Result.fail(`must be an integer from ${options.minimum} to ${options.maximum}`)
  }, options.default)
})

export const page = integer({ description: "Page number, from 1", minimum: 1, maximum: 1_000_000_000, default: Page.DEFAULT_PAGE })
export const limit = integer({ description: "Page size, from 1 to 100", minimum: 1, maximum: Page.MAX_LIMIT, default: Page.DEFAULT_LIMIT })

export const text = (description: string, maxLength: number): QueryParameter<string | undefined> => ({
  description,
  multi: false,
  schema: { type: "string", maxLength },
  decode: single(
    (value) => (value.length <= maxLength && value.isWellFormed() ? Result.succeed(value) : Result.fail(`must be text of at most ${maxLength} characters`)),
    undefined
  )
})

export const uuid = (description: string): QueryParameter<string | undefined> => ({
  description,
  multi: false,
  schema: { type: "string", format: "uuid" },
  decode: single((value) => (Ids.isUuid(value) ? Result.succeed(Ids.canonicalUuid(value)) : Result.fail("must be a UUID")), undefined)
})

/** An instant in UTC, ISO 8601 (GEN-TIME-1's form; milliseconds optional), compared as the stored timestamps are. */
export const timestamp = (description: string): QueryParameter<string | undefined> => ({
  description,
  multi: false,
  schema: { type: "string", format: "date-time" },
  decode: single((value) => {
    const instant = Timestamp.parse(value)
    return instant === undefined ? Result.fail(Timestamp.WRITTEN_HINT) : Result.succeed(instant)
  }, undefined)
})

const normalise = (value: string, caseInsensitive: "upper" | "lower" | false): string =>
  caseInsensitive === "upper" ? value.toUpperCase() : caseInsensitive === "lower" ? value.toLowerCase() : value

/** One value of an enumeration; `caseInsensitive` folds the input to the enumeration's case first. */
export const oneOf = <const V extends string>(options: {
  readonly description: string
  readonly values: ReadonlyArray<V>
  readonly caseInsensitive?: "upper" | "lower"
}): QueryParameter<V | undefined> => ({
  description: options.description,
  multi: false,
  schema: { type: "string", enum: options.values },
  decode: single((raw) => {
    const value = normalise(raw, options.caseInsensitive ?? false)
    const found = options.values.find((v) => v === value)
    return found === undefined ? Result.fail(`must be one of ${options.values.join(", ")}`) : Result.succeed(found)
  }, undefined)
})

const MAX_VALUES = Input.MAX_FILTER_VALUES

const splitValues = (values: ReadonlyArray<string>): ReadonlyArray<string> =>
  values.flatMap((v) => v.split(",")).map((v) => v.trim()).filter((v) => v.length > 0)

/** Several values of an enumeration (ACC-LIST-1 `role`, WL-LIST-1 `status`); undefined when none is given. */
export const manyOf = <const V extends string>(options: {
  readonly description: string
  readonly values: ReadonlyArray<V>
  readonly caseInsensitive?: "upper" | "lower"
}): QueryParameter<ReadonlyArray<V> | undefined> => ({
  description: options.description,
  multi: true,
  schema: { type: "string", enum: options.values },
  decode: (raw) => {
    const values = splitValues(raw)
    if (values.length === 0) return Result.succeed(undefined)
    if (values.length > MAX_VALUES) return Result.fail(`at most ${MAX_VALUES} values`)
    const decoded: Array<V> = []
    for (const v of values) {
      const folded = normalise(v, options.caseInsensitive ?? false)
      const found = options.values.find((candidate) => candidate === folded)
      if (found === undefined) return Result.fail(`each value must be one of ${options.values.join(", ")}`)
      decoded.push(found)
    }
    return Result.succeed(decoded)
  }
})

/** Several free-text values (WL-LIST-1 `assetType`). */
export const manyText = (description: string, maxLength: number): QueryParameter<ReadonlyArray<string> | undefined> => ({
  description,
  multi: true,
  schema: { type: "string", maxLength },
  decode: (raw) => {
    const values = splitValues(raw)
    if (values.length === 0) return Result.succeed(undefined)
    if (values.length > MAX_VALUES) return Result.fail(`at most ${MAX_VALUES} values`)
    return values.every((v) => v.length <= maxLength && v.isWellFormed())
      ? Result.succeed(values)
      : Result.fail(`each value must be text of at most ${maxLength} characters`)
  }
})

/** Decodes every declared parameter; unknown parameters are ignored. All problems are reported together. */
export const decodeAll = <Q extends QueryParameters>(
  parameters: Q,
  search: URLSearchParams
): Result.Result<Decoded<Q>, RelayError.InvalidRequest> => {
  const decoded: Record<string, unknown> = {}
  const issues: Array<{ path: Array<string>; message: string }> = []
  for (const name of Object.keys(parameters)) {
    const parameter = parameters[name]
    if (parameter === undefined) continue
    const result = parameter.decode(search.getAll(name))
    if (Result.isSuccess(result)) decoded[name] = result.success
    else issues.push({ path: [name], message: result.failure })
  }
  if (issues.length > 0) {
    const message = issues.map((i) => `${i.path[0]}: ${i.message}`).join("; ")
    return Result.fail(new RelayError.InvalidRequest({ message, issues }))
  }
  // Every declared key was decoded by its own parameter, so the record has the declared shape.
  return Result.succeed(decoded as Decoded<Q>)
}
