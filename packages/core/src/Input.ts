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

/** A decoder for `schema` that reports every issue and fails with InvalidRequest. */
export const decoder = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) => {
  const decode = Schema.decodeUnknownResult(schema)
  return (input: unknown): Effect.Effect<S["Type"], InvalidRequest> => {
    const result = decode(input, { errors: "all", onExcessProperty: "ignore" })
    return Result.isSuccess(result) ? Effect.succeed(result.success) : Effect.fail(toInvalidRequest(result.failure))
  }
}
