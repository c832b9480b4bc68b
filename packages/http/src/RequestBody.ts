/**
 * Reading and decoding a request body: at most `limitBytes` bytes are read, however the body arrives (PayloadTooLarge
 * otherwise, 413); the bytes must be UTF-8 JSON (MalformedJson, 400, GEN-JSON-1) sent as application/json
 * (UnsupportedMediaType, 415); the JSON is then decoded with the core's Schema for the route, every issue listed
 * with its path (InvalidRequest, 400). Keys such as `__proto__` are harmless: JSON.parse makes them own properties
 * and the Schema decoder copies only the fields it declares.
 */
import { RelayError } from "@custody-relay/core"
import { Effect, Result, Schema, SchemaIssue } from "effect"
import { MalformedJson, PayloadTooLarge, UnsupportedMediaType } from "./HttpError.js"
import type { Incoming } from "./Incoming.js"

const decoder = new TextDecoder("utf-8", { fatal: true })

/** The body as text, read with the size limit; empty when the request has none. */
export const readText = (request: Incoming, limitBytes: number): Effect.Effect<string, PayloadTooLarge | MalformedJson> => {
  const declared = request.header("content-length")
  if (declared !== null && Number(declared) > limitBytes) return Effect.fail(new PayloadTooLarge({ limitBytes }))
  const reading = request.body(limitBytes)
  if (reading === null) return Effect.succeed("")
  return Effect.flatMap(
    Effect.tryPromise({
      try: () => reading,
      catch: () => new MalformedJson({ message: "the request body could not be read" })
    }),
    (bytes): Effect.Effect<string, PayloadTooLarge | MalformedJson> => {
      if (bytes instanceof PayloadTooLarge) return Effect.fail(bytes)
      try {
        return Effect.succeed(decoder.decode(bytes))
      } catch {
        return Effect.fail(new MalformedJson({ message: "the request body is not valid UTF-8" }))
      }
    }
  )
}

const JSON_MEDIA_TYPE = /^application\/(?:[a-z0-9.+-]+\+)?json\s*(?:;.*)?$/i

/**
 * Parses a JSON body. An empty body is `undefined` (the route's schema then says whether that is acceptable); a
 * non-empty body must be declared application/json.
 */
export const parseJson = (
  text: string,
  contentType: string | null
): Result.Result<unknown, MalformedJson | UnsupportedMediaType> => {
  if (text.length === 0) return Result.succeed(undefined)
  if (contentType === null || !JSON_MEDIA_TYPE.test(contentType)) {
    return Result.fail(new UnsupportedMediaType({ contentType: (contentType ?? "").slice(0, 100) }))
  }
  try {
    return Result.succeed(JSON.parse(text) as unknown)
  } catch {
    return Result.fail(new MalformedJson({ message: "the request body is not valid JSON" }))
  }
}

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()
const MAX_ISSUE_MESSAGE = 200

const truncate = (message: string): string =>
  message.length > MAX_ISSUE_MESSAGE ? `${message.slice(0, MAX_ISSUE_MESSAGE)}...` : message

/** A Schema failure as the InvalidRequest the error table knows, with one `details` entry per field issue. */
export const invalidRequest = (issue: SchemaIssue.Issue): RelayError.InvalidRequest => {
  const issues = formatter(issue).issues.map((i) => ({
    path: (i.path ?? []).map((segment) => {
      const key = typeof segment === "object" && segment !== null ? segment.key : segment
      return typeof key === "number" ? key : String(key)
    }),
    message: truncate(i.message)
  }))
  const message = issues.length === 0
    ? "the request body is invalid"
    : issues.map((i) => (i.path.length > 0 ? `${i.path.join(".")}: ${i.message}` : i.message)).join("; ")
  return new RelayError.InvalidRequest({ message: truncate(message), issues })
}

/** Decodes a parsed JSON body with a core Schema, reporting every issue. */
export const decodeWith = <S extends Schema.ConstraintDecoder<unknown>>(schema: S) => {
  const decode = Schema.decodeUnknownResult(schema, { errors: "all" })
  return (input: unknown): Result.Result<S["Type"], RelayError.InvalidRequest> => {
    if (typeof input !== "object" || input === null || Array.isArray(input)) {
      return Result.fail(RelayError.InvalidRequest.field("body", "must be a JSON object"))
    }
    return Result.mapError(decode(input), (error) => invalidRequest(error.issue))
  }
}
