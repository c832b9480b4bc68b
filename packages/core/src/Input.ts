/**
 * Decoding of untrusted input into the core's typed inputs: every adapter (HTTP, the Promise facade) decodes
 * through here, so a bad request is the same `InvalidRequest`, with the same field issues, wherever it enters.
 */
import { Effect, Result, Schema, SchemaIssue } from "effect"
import { InvalidRequest } from "./RelayError.js"

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

export const toInvalidRequest = (error: Schema.SchemaError): InvalidRequest => {
  const issues = formatIssues(error.issue).issues.map((issue) => ({
    path: (issue.path ?? []).map((segment) =>
      typeof segment === "object" && segment !== null && "key" in segment ? String(segment.key) : typeof segment === "number" ? segment : String(segment)
    ),
    message: issue.message
  }))
  const first = issues[0]
  const message = first === undefined
    ? "invalid request"
    : first.path.length === 0
    ? first.message
    : `${first.path.join(".")}: ${first.message}`
  return new InvalidRequest({ message, issues })
}

/**
 * The most values one list filter takes, a repeated query parameter or an array an embedder passes: a statement's
 * `IN` list stays far below what a database binds.
 */
export const MAX_FILTER_VALUES = 50

const isWellFormed = Schema.makeFilter<string>((s) => (s.isWellFormed() ? undefined : "must be well-formed text"))

/** Text a list filter compares: at most `maxLength` UTF-16 units, as HTTP counts a query value, and well formed. */
export const FilterText = (maxLength: number) => Schema.String.check(Schema.isMaxLength(maxLength), isWellFormed)

/** Several values of one list filter, at most MAX_FILTER_VALUES. */
export const FilterValues = <S extends Schema.Top>(item: S) => Schema.Array(item).check(Schema.isMaxLength(MAX_FILTER_VALUES))

/** A decoder for `schema` that reports every issue and fails with InvalidRequest. */
export const decoder = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) => {
  const decode = Schema.decodeUnknownResult(schema)
  return (input: unknown): Effect.Effect<S["Type"], InvalidRequest> => {
    const result = decode(input, { errors: "all", onExcessProperty: "ignore" })
    return Result.isSuccess(result) ? Effect.succeed(result.success) : Effect.fail(toInvalidRequest(result.failure))
  }
}
