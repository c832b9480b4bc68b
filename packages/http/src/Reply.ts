/**
 * A reply before it goes out: status, JSON text and headers. The pipeline passes replies around (the idempotency
 * store keeps one, rate-limit headers are added to one) and finishes exactly one at the end, which becomes a
 * `Response` or is written straight to node's ServerResponse. `failure` is the one place an error becomes a reply:
 * the error table gives status and code; the 403 for a missing permission has the interface's exact body; every
 * other error body is `{message, code, requestId}` with `details` on validation errors, and never a stack trace,
 * a SQL fragment or a secret (ERR-BODY-1, AUTH-SEC-1).
 */
import type { Money } from "@custody-relay/core"
import {
  type AnyError,
  defectMapping,
  defectMessage,
  errorTable,
  UNAVAILABLE_RETRY_AFTER_SECONDS,
  unavailableMapping,
  unavailableMessage
} from "./ErrorTable.js"

export interface Reply {
  readonly status: number
  readonly body: string
  readonly headers: Readonly<Record<string, string>>
}

// ES2025's JSON.rawJSON (Node 21 and later); TypeScript's ES2024 library does not declare it yet.
const rawJSON = (JSON as unknown as { readonly rawJSON: (text: string) => unknown }).rawJSON

/**
 * A decimal written into the JSON text as a number with exactly its digits: JSON numbers have no precision limit,
 * and a JS number would round past about 15 significant digits. For `estimatedFee` (TXN-FEE-2, GEN-DEC-1).
 */
export const exactJsonNumber = (decimal: Money.DecimalString): unknown => rawJSON(decimal)

export const json = (status: number, value: unknown, headers: Readonly<Record<string, string>> = {}): Reply => ({
  status,
  body: JSON.stringify(value),
  headers
})

/** The error body's shape (ERR-BODY-1, our profile). */
export interface ErrorBody {
  readonly message: string
  readonly code: string
  readonly requestId: string
  readonly details?: ReadonlyArray<{ readonly path: ReadonlyArray<string | number>; readonly message: string }>
}

export const failure = (error: AnyError, requestId: string): Reply => {
  const mapping = errorTable[error._tag]
  // AUTH-PERM-1: this body is the interface's, to the letter, and carries nothing else.
  if (error._tag === "PermissionDenied") return json(mapping.status, { message: error.message })
  const body: ErrorBody = error._tag === "InvalidRequest"
    ? { message: error.message, code: mapping.code, requestId, details: error.issues }
    : { message: error.message, code: mapping.code, requestId }
  switch (error._tag) {
    case "MethodNotAllowed":
      return json(mapping.status, body, { allow: error.allow.join(", ") })
    case "RateLimited":
      return json(mapping.status, body, { "retry-after": String(error.retryAfterSeconds) })
    default:
      return json(mapping.status, body)
  }
}

export const defect = (requestId: string): Reply =>
  json(defectMapping.status, { message: defectMessage, code: defectMapping.code, requestId } satisfies ErrorBody)

export const unavailable = (requestId: string): Reply =>
  json(
    unavailableMapping.status,
    { message: unavailableMessage, code: unavailableMapping.code, requestId } satisfies ErrorBody,
    { "retry-after": String(UNAVAILABLE_RETRY_AFTER_SECONDS) }
  )

/**
 * The reply as it goes out: the headers every answer carries (JSON content type, no caching, the request id)
 * added to its own. Both the Web handler (`toResponse`) and the node adapter write exactly this.
 */
export const finish = (reply: Reply, requestId: string, headers: Readonly<Record<string, string>>): Reply => ({
  status: reply.status,
  body: reply.body,
  headers: {
    ...reply.headers,
    ...headers,
    "content-type": "application/json; charset=utf-8",
    "cache-control": "no-store",
    "x-request-id": requestId
  }
})

/** The finished answer to a request that failed before or outside the pipeline (a defect). */
export const finishedDefect = (requestId: string): Reply => finish(defect(requestId), requestId, {})

/** The reply as a Web `Response`; to a HEAD request, without its body (the headers say what GET would send). */
export const toResponse = (reply: Reply, method = "GET"): Response =>
  // A 204 (a CORS preflight) carries no body; HEAD answers GET's headers without one.
  new Response(method === "HEAD" || reply.status === 204 ? null : reply.body, { status: reply.status, headers: reply.headers })
