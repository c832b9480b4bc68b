/**
 * The one map from refusals to HTTP answers: every tag of the core's `RelayError` and of the adapter's own
 * `HttpError` has exactly one status and one stable machine-readable code. The table's type is a mapped type over
 * the union of tags, so a new error added to the core does not compile until it is mapped here (ERR-CODE-1).
 * docs/http.md's table is checked against this one by a test.
 */
import type { RelayError } from "@custody-relay/core"
import type { HttpError, HttpErrorTag } from "./HttpError.js"

export type ErrorTag = RelayError.RelayErrorTag | HttpErrorTag
export type AnyError = RelayError.RelayError | HttpError

export interface ErrorMapping {
  readonly status: number
  readonly code: string
}

export const errorTable: { readonly [Tag in ErrorTag]: ErrorMapping } = {
  Unauthenticated: { status: 401, code: "UNAUTHENTICATED" },
  PermissionDenied: { status: 403, code: "PERMISSION_DENIED" },
  CredentialNotClientScoped: { status: 403, code: "CREDENTIAL_NOT_CLIENT_SCOPED" },
  InvalidRequest: { status: 400, code: "INVALID_REQUEST" },
  UnsupportedAsset: { status: 400, code: "UNSUPPORTED_ASSET" },
  InvalidAmount: { status: 400, code: "INVALID_AMOUNT" },
  InvalidAddress: { status: 400, code: "INVALID_ADDRESS" },
  AssetMismatch: { status: 400, code: "ASSET_MISMATCH" },
  InsufficientFunds: { status: 400, code: "INSUFFICIENT_FUNDS" },
  SourceAccountNotActive: { status: 400, code: "SOURCE_ACCOUNT_NOT_ACTIVE" },
  SameSourceAndDestination: { status: 400, code: "SAME_SOURCE_AND_DESTINATION" },
  FeeEstimationUnsupported: { status: 400, code: "FEE_ESTIMATION_UNSUPPORTED" },
  SourceAccountInaccessible: { status: 403, code: "SOURCE_ACCOUNT_INACCESSIBLE" },
  DestinationNotFound: { status: 404, code: "DESTINATION_NOT_FOUND" },
  NotFound: { status: 404, code: "NOT_FOUND" },
  DuplicateAccount: { status: 409, code: "DUPLICATE_ACCOUNT" },
  DuplicateWhitelistedAddress: { status: 409, code: "DUPLICATE_WHITELISTED_ADDRESS" },
  TransitionNotAllowed: { status: 409, code: "TRANSITION_NOT_ALLOWED" },
  AlreadyDecided: { status: 409, code: "ALREADY_DECIDED" },
  InitiatorCannotApprove: { status: 403, code: "INITIATOR_CANNOT_APPROVE" },
  CustodyProviderFailed: { status: 500, code: "CUSTODY_PROVIDER_FAILED" },
  MalformedJson: { status: 400, code: "MALFORMED_JSON" },
  UnsupportedMediaType: { status: 415, code: "UNSUPPORTED_MEDIA_TYPE" },
  PayloadTooLarge: { status: 413, code: "PAYLOAD_TOO_LARGE" },
  RouteNotFound: { status: 404, code: "ROUTE_NOT_FOUND" },
  MethodNotAllowed: { status: 405, code: "METHOD_NOT_ALLOWED" },
  RateLimited: { status: 429, code: "RATE_LIMITED" },
  IdempotencyKeyReused: { status: 409, code: "IDEMPOTENCY_KEY_REUSED" },
  ControlUnauthorized: { status: 401, code: "CONTROL_UNAUTHORIZED" },
  ControlCallUnsupported: { status: 501, code: "CONTROL_CALL_UNSUPPORTED" }
}

/** What a defect (a bug, storage down) answers: nothing about its cause reaches the caller. */
export const defectMapping: ErrorMapping = { status: 500, code: "INTERNAL_ERROR" }
export const defectMessage = "An unexpected error occurred; quote the requestId when reporting it"

/**
 * What a request answers when the database could not be reached, the connection was lost, or a lock stayed held,
 * and re-running its unit did not help: 503 with Retry-After, so a client retries (with its Idempotency-Key: a lost commit leaves
 * the outcome unknown, and the key makes the retry safe).
 */
export const unavailableMapping: ErrorMapping = { status: 503, code: "STORAGE_UNAVAILABLE" }
export const unavailableMessage = "The database is unavailable or busy; retry after the time in Retry-After"
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 1

/** The table as Markdown rows, in table order, closed by the defect row: docs/http.md holds exactly this text. */
export const toMarkdown = (): string =>
  [
    "| error | status | code |",
    "|---|---|---|",
    ...Object.entries(errorTable).map(([tag, mapping]) => `| ${tag} | ${mapping.status} | ${mapping.code} |`),
    `| (the database unavailable or busy, after the re-runs that can help; with Retry-After) | ${unavailableMapping.status} | ${unavailableMapping.code} |`,
    `| (defect: an unexpected failure) | ${defectMapping.status} | ${defectMapping.code} |`
  ].join("\n")
