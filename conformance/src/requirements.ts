/**
 * The requirement catalogue of the Custody Relay interface, kept inside the kit so that it runs without the
 * shared spec folder. A kit test compares it with ../shared/spec/requirements.md whenever that file is present.
 */
export type RequirementLevel = "MUST" | "SHOULD" | "PROFILE"

export interface Requirement {
  readonly id: string
  readonly level: RequirementLevel
  readonly text: string
}

export const requirements: ReadonlyArray<Requirement> = [
  { id: "GEN-JSON-1", level: "MUST", text: "Request and response bodies are JSON; a body-carrying request sends `Content-Type: application/json`. A body that is not valid JSON, or not a JSON object where one is expected, is 400." },
  { id: "GEN-TIME-1", level: "MUST", text: "Every timestamp is an ISO 8601 string in UTC." },
  { id: "GEN-DEC-1", level: "MUST", text: "Amounts and balances are decimal strings; the only numeric amount is `estimatedFee`, a JSON number." },
  { id: "GEN-PATH-1", level: "MUST", text: "Every path begins with `/relay/v1`; the version lives in the path prefix." },
  { id: "GEN-5XX-1", level: "SHOULD", text: "No client input, however malformed, produces a 5xx (500 is reserved for server or custody-provider faults)." },
  { id: "AUTH-HDR-1", level: "MUST", text: "Every request carries `x-api-key` (key id) and `x-api-secret` (secret); no sessions or tokens." },
  { id: "AUTH-401-1", level: "MUST", text: "Missing, malformed, unknown or revoked credentials, or a wrong secret, give 401." },
  { id: "AUTH-KEY-1", level: "MUST", text: "A key id begins with a fixed service-specific prefix; it identifies but does not authenticate." },
  { id: "AUTH-SEC-1", level: "MUST", text: "A secret is shown once, at creation, and never logged or exposed (not in any response, log line or error)." },
  { id: "AUTH-PERM-1", level: "MUST", text: "Each endpoint requires the permission named in the endpoint table below; a credential lacking it gets 403 with body exactly `{\"message\": \"Missing required API scope: <permission name>\"}`." },
  { id: "AUTH-PERM-2", level: "MUST", text: "Permissions are fixed per API user but an admin may change them at any time; a change applies to the next request." },
  { id: "AUTH-SCOPE-1", level: "MUST", text: "A credential that is not client-scoped gets 403." },
  { id: "AUTH-ORDER-1", level: "SHOULD", text: "Checks run in the order authentication (401), permission (403), then request validation (400) and scope (404): a request with bad credentials and a bad body is 401; a request lacking permission with a bad body is 403." },
  { id: "SCOPE-1", level: "MUST", text: "All data is scoped to the client that owns the calling API user. A read by id of a resource of another client is 404, indistinguishable from an id that does not exist." },
  { id: "SCOPE-2", level: "MUST", text: "Lists return only the caller's client's records; `total` counts only those." },
  { id: "SCOPE-3", level: "MUST", text: "A transaction list filtered by an `accountId` that matches no account of the client is 200 with empty `items`." },
  { id: "PAGE-1", level: "MUST", text: "The envelope is `{items, total, page, limit, totalPages}` with integer `total`, `page`, `limit`, `totalPages`." },
  { id: "PAGE-2", level: "MUST", text: "`page` defaults to 1 and `limit` to 20; a valid requested `page` and `limit` are honoured and echoed in the envelope." },
  { id: "PAGE-3", level: "MUST", text: "`limit` is at most 100. A non-integer, zero or negative `page` or `limit` is 400. For `limit` above 100 either 400 or a page of at most 100 passes (SHOULD: 400)." },
  { id: "PAGE-4", level: "SHOULD", text: "`totalPages` is `ceil(total / limit)`; `items.length <= limit`; walking every page visits each matching record exactly once when nothing changes in between." },
  { id: "ACC-SHAPE-1", level: "MUST", text: "List and get records carry id (uuid), name, description, workspace, role, assetId, chainType, address (string or null), status, availableBalance (decimal string), availableBalanceCad (decimal string), createdAt, updatedAt." },
  { id: "ACC-SHAPE-2", level: "MUST", text: "The create response carries only id, name, workspace, assetId, role, address, description, status, createdAt." },
  { id: "ACC-CREATE-1", level: "MUST", text: "Create returns 201 with status `pending_approval` and `address` null." },
  { id: "ACC-CREATE-2", level: "MUST", text: "`name` is required, 3 to 50 characters; `workspace` is required, `custody` or `transactional`; `assetId` is required and must be a supported asset; `description` is optional, at most 255 characters; `role` is optional, `custody` (default) or `staking`. Any violation is 400." },
  { id: "ACC-CREATE-3", level: "MUST", text: "Creating an account whose parameters are identical to an existing account of the client is 409." },
  { id: "ACC-APPR-1", level: "MUST", text: "Approve of a `pending_approval` account answers `{accountId, status: \"approved\"}`; reject answers `{accountId, status: \"rejected\"}`." },
  { id: "ACC-APPR-2", level: "MUST", text: "Approving or rejecting an account that was already processed is 400 or 409, and changes nothing." },
  { id: "ACC-APPR-3", level: "MUST", text: "Approve or reject of an account outside the client scope, or of an unknown id, is refused (400 or 404) and changes nothing." },
  { id: "ACC-ADDR-1", level: "MUST", text: "`address` stays null until the account clears approval; a rejected account never gets one." },
  { id: "ACC-ACTIVE-1", level: "PROFILE", text: "How and when an approved account becomes `active` (and gets its deposit address) is the profile's; once active it stays a valid transaction source and destination." },
  { id: "ACC-GET-1", level: "MUST", text: "GET by id: 400 for a malformed id, 404 for no account within the client scope." },
  { id: "ACC-LIST-1", level: "MUST", text: "Filters: `search` matches name, asset id or deposit address; `assetId`; `workspace`; `role` (several values accepted); `status`. Each returned record satisfies every given filter." },
  { id: "ACC-LIST-2", level: "PROFILE", text: "Valid values of the `status` filter and the response to an invalid one." },
  { id: "TXN-SHAPE-1", level: "MUST", text: "List items carry id, sourceAccountId, destinationId, destinationType (`internal_wallet` or `external_wallet`), amount, assetType, networkFee, status (upper case), direction (`OUT`), createdAt, updatedAt." },
  { id: "TXN-SHAPE-2", level: "MUST", text: "The detail record carries id, providerTransactionId (string or null), sourceAccountId, destinationId, destinationType, amount, assetType, status, subStatus (string or null), approvals, direction, transactionType (`WITHDRAWAL`), networkFee, createdAt, updatedAt." },
  { id: "TXN-SHAPE-3", level: "MUST", text: "`approvals` has createdBy, createdAt, signedBy, signedAt, approvedBy, approvedAt, providerApprovedAt, rejectedBy, rejectedAt; each a string or null." },
  { id: "TXN-SHAPE-4", level: "MUST", text: "The status record is `{id, status, subStatus, updatedAt}`." },
  { id: "TXN-INIT-1", level: "MUST", text: "Initiate returns 201 with id, status (lower case, e.g. `awaiting_signature`), sourceAccountId, destinationId, destinationType (`internal` or `external`, as sent), amount, assetType, createdAt." },
  { id: "TXN-INIT-2", level: "MUST", text: "An initiated transaction enters the approval workflow of its source account; with approvals still required its status is `awaiting_signature`." },
  { id: "TXN-VAL-1", level: "MUST", text: "All five fields (sourceAccountId, destinationId, destinationType, amount, assetType) are required; `destinationType` is `internal` or `external`; a missing or malformed field is 400." },
  { id: "TXN-VAL-2", level: "MUST", text: "`assetType` differing from the source account's asset is 400." },
  { id: "TXN-VAL-3", level: "MUST", text: "The source account must belong to the client and be active. calculate-fee answers 403 for a source it cannot access; initiate answers 403 or 404. An inactive source of the client is refused with a 4xx." },
  { id: "TXN-DEST-1", level: "MUST", text: "`external`: destinationId must be an APPROVED, active whitelisted address owned by the client; a pending, rejected, archived, foreign or unknown one is 404." },
  { id: "TXN-DEST-2", level: "MUST", text: "`internal`: destinationId must be an active custody account of the client; otherwise 404." },
  { id: "TXN-PREC-1", level: "MUST", text: "`amount` is a plain decimal string greater than zero; zero, negative, scientific notation (`1e-8`), and non-decimal strings are 400." },
  { id: "TXN-PREC-2", level: "MUST", text: "More decimal places than the asset allows is 400: BTC 8, ETH 18, USDC 6; other assets use their own declared precision. Exactly the maximum passes." },
  { id: "TXN-FEE-1", level: "MUST", text: "calculate-fee applies the same validation as initiate and creates no transaction." },
  { id: "TXN-FEE-2", level: "MUST", text: "The estimate is `{assetType, amount, estimatedFee, feeAssetType}` with `estimatedFee` a JSON number." },
  { id: "TXN-FEE-3", level: "MUST", text: "An asset or network whose provider cannot estimate fees is 400; a provider fault is 500." },
  { id: "TXN-LIST-1", level: "MUST", text: "Filters: `accountId`, `assetType`, `status` in `all`, `completed`, `pending`, `failed` (case-insensitive, default `all`); any other status value is 400." },
  { id: "TXN-LIST-2", level: "PROFILE", text: "Which statuses fall in which filter group; the groups `completed`, `pending` and `failed` do not overlap and `all` is their union." },
  { id: "TXN-GET-1", level: "MUST", text: "GET detail and GET status: 400 for an id that is not a uuid; 404 for none within the client scope." },
  { id: "TXN-FLOW-1", level: "PROFILE", text: "The transaction state machine (statuses, sub-statuses, transitions, quorum rules) is the profile's; every status an implementation returns belongs to its declared enumeration, and the upper-case read status and lower-case initiate status name the same state." },
  { id: "WL-CREATE-1", level: "MUST", text: "Create takes `name` (required, at most 100), `address` (required, valid for `assetType`), `assetType` (required), `description` (optional, at most 500); any violation is 400." },
  { id: "WL-CREATE-2", level: "MUST", text: "The create response carries id, name, address, description, status (`PENDING`), assetType, and no providerId." },
  { id: "WL-SHAPE-1", level: "MUST", text: "List and get records carry id, providerId, name, address, description, status, assetType." },
  { id: "WL-LIST-1", level: "MUST", text: "Filters `assetType` and `status` each accept several values; an invalid status or pagination value is 400." },
  { id: "WL-GET-1", level: "MUST", text: "GET by id: 400 for a malformed id, 404 for none within the client scope." },
  { id: "WL-STATE-1", level: "MUST", text: "Status is one of PENDING, APPROVED, REJECTED, ARCHIVED; only APPROVED is usable as a destination." },
  { id: "WL-FLOW-1", level: "PROFILE", text: "Whitelist transitions (who approves, rejects, archives) are the profile's." },
  { id: "LIM-RATE-1", level: "MUST", text: "Rate limiting is per API key; past the limit the answer is 429 with `Retry-After` (seconds), `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (Unix timestamp)." },
  { id: "LIM-RATE-2", level: "PROFILE", text: "The numeric limit and window length." },
  { id: "LIM-RATE-3", level: "SHOULD", text: "One key's traffic never spends another key's budget." },
  { id: "LIM-SIZE-1", level: "MUST", text: "Field sizes: account name 3 to 50, account description at most 255, whitelist name at most 100, whitelist description at most 500." },
  { id: "ERR-CODE-1", level: "MUST", text: "Status codes keep the meanings of the errors table: 400 invalid request, 401 credentials, 403 permission or non-client-scoped credential, 404 absent or out of scope, 409 conflict, 429 rate limit, 500 unexpected fault." },
  { id: "ERR-BODY-1", level: "PROFILE", text: "The body shape of errors other than the 403 permission error." }
]

const byId = new Map(requirements.map((requirement) => [requirement.id, requirement]))

export const requirementById = (id: string): Requirement | undefined => byId.get(id)
