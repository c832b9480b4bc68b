/**
 * Every expected failure of the custody domain, one tagged class each. An error carries what an adapter needs to
 * answer the caller (its class says which kind of refusal it is; its fields and message say why) and never a
 * secret. The domain knows no HTTP status: the HTTP adapter's single error table maps each `_tag` to one.
 * Infrastructure failures (storage down, a bug) are not here: they are defects.
 */
import { Effect, Option, Schema } from "effect"
import type { AmountRejection } from "./Money.js"
import type { Permission } from "./Permission.js"
import { TaggedRefusal } from "./Refusal.js"

/** Missing, malformed, unknown, revoked or wrong credentials (AUTH-401-1). The reason is for logs only: callers
 * get one message whatever went wrong, so the answer does not tell a guesser which half was right. */
export class Unauthenticated extends TaggedRefusal<Unauthenticated>()("Unauthenticated", {
  reason: Schema.Literals(["missing", "malformed", "unknown_key", "wrong_secret", "revoked"])
}) {
  override get message() {
    return "Missing, invalid or revoked API credentials"
  }
}

/** The credential lacks the permission the operation needs (AUTH-PERM-1). */
export class PermissionDenied extends TaggedRefusal<PermissionDenied>()("PermissionDenied", {
  permission: Schema.String
}) {
  override get message() {
    return `Missing required API scope: ${this.permission}`
  }
  static of(permission: Permission) {
    return new PermissionDenied({ permission })
  }
}

/** The credential belongs to no client, so it can see no client data (AUTH-SCOPE-1). */
export class CredentialNotClientScoped extends TaggedRefusal<CredentialNotClientScoped>()(
  "CredentialNotClientScoped",
  {}
) {
  override get message() {
    return "This API credential is not scoped to a client"
  }
}

export interface FieldIssue {
  readonly path: ReadonlyArray<string | number>
  readonly message: string
}

/** The request's shape is wrong: a missing field, a wrong type, a value out of range. */
export class InvalidRequest extends TaggedRefusal<InvalidRequest>()("InvalidRequest", {
  message: Schema.String,
  issues: Schema.Array(Schema.Struct({ path: Schema.Array(Schema.Union([Schema.String, Schema.Number])), message: Schema.String }))
}) {
  /** One field is wrong. */
  static field(field: string, message: string) {
    return new InvalidRequest({ message: `${field}: ${message}`, issues: [{ path: [field], message }] })
  }
}

export class UnsupportedAsset extends TaggedRefusal<UnsupportedAsset>()("UnsupportedAsset", {
  assetId: Schema.String
}) {
  override get message() {
    return `Asset ${JSON.stringify(this.assetId)} is not supported`
  }
}

/** An amount that is not a plain positive decimal within the asset's precision (TXN-PREC-1, TXN-PREC-2). */
export class InvalidAmount extends TaggedRefusal<InvalidAmount>()("InvalidAmount", {
  reason: Schema.String,
  message: Schema.String
}) {
  static of(rejection: AmountRejection) {
    return new InvalidAmount({ reason: rejection.reason, message: rejection.message })
  }
}

export class InvalidAddress extends TaggedRefusal<InvalidAddress>()("InvalidAddress", {
  assetType: Schema.String
}) {
  override get message() {
    return `address is not a valid ${this.assetType} address`
  }
}

/** The request's asset is not the asset the source account holds (TXN-VAL-2). */
export class AssetMismatch extends TaggedRefusal<AssetMismatch>()("AssetMismatch", {
  accountAssetId: Schema.String,
  requestedAssetType: Schema.String
}) {
  override get message() {
    return `assetType ${this.requestedAssetType} does not match the source account's asset ${this.accountAssetId}`
  }
}

export class InsufficientFunds extends TaggedRefusal<InsufficientFunds>()("InsufficientFunds", {
  available: Schema.String,
  required: Schema.String,
  assetId: Schema.String
}) {
  override get message() {
    return `available balance ${this.available} ${this.assetId} does not cover ${this.required} ${this.assetId} (amount plus network fee)`
  }
}

/** The source account is the client's but not active, so it cannot send (TXN-VAL-3). */
export class SourceAccountNotActive extends TaggedRefusal<SourceAccountNotActive>()("SourceAccountNotActive", {
  accountId: Schema.String,
  status: Schema.String
}) {
  override get message() {
    return `source account ${this.accountId} is ${this.status}, not active`
  }
}

/** The source account does not exist or belongs to another client; the two are not told apart (TXN-VAL-3). */
export class SourceAccountInaccessible extends TaggedRefusal<SourceAccountInaccessible>()(
  "SourceAccountInaccessible",
  { accountId: Schema.String }
) {
  override get message() {
    return `source account ${this.accountId} is not accessible to this credential`
  }
}

/** The destination is unknown, another client's, or not eligible (not approved, not active) (TXN-DEST-1/2). */
export class DestinationNotFound extends TaggedRefusal<DestinationNotFound>()("DestinationNotFound", {
  destinationId: Schema.String,
  destinationType: Schema.String
}) {
  override get message() {
    return this.destinationType === "external"
      ? `no approved whitelisted address ${this.destinationId} for this client`
      : `no active custody account ${this.destinationId} for this client`
  }
}

export class SameSourceAndDestination extends TaggedRefusal<SameSourceAndDestination>()(
  "SameSourceAndDestination",
  { accountId: Schema.String }
) {
  override get message() {
    return "the destination account is the source account"
  }
}

/** The custody provider cannot estimate fees for this asset or network (TXN-FEE-3: a 400 case). */
export class FeeEstimationUnsupported extends TaggedRefusal<FeeEstimationUnsupported>()(
  "FeeEstimationUnsupported",
  { assetId: Schema.String }
) {
  override get message() {
    return `the custody provider does not estimate fees for ${this.assetId}`
  }
}

/**
 * The custody provider failed or is unreachable (TXN-FEE-3: a 500 case). `refused`, set by a provider adapter: the
 * provider answered that it will not carry out this call and holds nothing under its request id (an order it finds
 * invalid, an asset or an address it does not serve), so a repeat cannot succeed and nothing it does later comes of
 * the call. Absent, the outcome is unknown (no answer, a timeout, a server error): the provider may have carried the
 * call out, or may yet.
 */
export class CustodyProviderFailed extends TaggedRefusal<CustodyProviderFailed>()("CustodyProviderFailed", {
  operation: Schema.String,
  detail: Schema.String,
  refused: Schema.optionalKey(Schema.Boolean)
}) {
  override get message() {
    return `the custody provider failed during ${this.operation}`
  }
}

/** No record with this id within the caller's client: absent and foreign look the same (SCOPE-1). */
export class NotFound extends TaggedRefusal<NotFound>()("NotFound", {
  resource: Schema.Literals(["account", "transaction", "whitelisted_address", "client", "api_user", "webhook_subscription", "event"]),
  id: Schema.String
}) {
  override get message() {
    return `no ${this.resource.replaceAll("_", " ")} ${this.id}`
  }
  /** The found record, or NotFound naming what was looked for. */
  static unlessFound<A>(resource: NotFound["resource"], id: string) {
    return (found: Option.Option<A>): Effect.Effect<A, NotFound> =>
      Option.isSome(found) ? Effect.succeed(found.value) : Effect.fail(new NotFound({ resource, id }))
  }
}

/** An account with the same name, workspace, asset and role already exists for the client (ACC-CREATE-3). */
export class DuplicateAccount extends TaggedRefusal<DuplicateAccount>()("DuplicateAccount", {
  existingAccountId: Schema.String
}) {
  override get message() {
    return `an account with identical parameters already exists: ${this.existingAccountId}`
  }
}

export class DuplicateWhitelistedAddress extends TaggedRefusal<DuplicateWhitelistedAddress>()(
  "DuplicateWhitelistedAddress",
  { existingId: Schema.String }
) {
  override get message() {
    return `this address is already whitelisted for the asset: ${this.existingId}`
  }
}

/** The record's state table has no row for this action from its current state (ACC-APPR-2 and kin). */
export class TransitionNotAllowed extends TaggedRefusal<TransitionNotAllowed>()("TransitionNotAllowed", {
  entity: Schema.String,
  id: Schema.String,
  status: Schema.String,
  action: Schema.String
}) {
  override get message() {
    return `${this.entity} ${this.id} is ${this.status}; ${this.action} is not allowed`
  }
}

/** The initiator of a transaction never counts toward its own quorum. */
export class InitiatorCannotApprove extends TaggedRefusal<InitiatorCannotApprove>()("InitiatorCannotApprove", {
  transactionId: Schema.String
}) {
  override get message() {
    return "the initiator of a transaction cannot approve or reject it; another approver must"
  }
}

export class AlreadyDecided extends TaggedRefusal<AlreadyDecided>()("AlreadyDecided", {
  transactionId: Schema.String
}) {
  override get message() {
    return "this API user has already approved this transaction"
  }
}

/** The idempotency key was used before with a different request (another body, path or operation). */
export class IdempotencyKeyReused extends TaggedRefusal<IdempotencyKeyReused>()("IdempotencyKeyReused", {
  key: Schema.String
}) {
  override get message() {
    return "this Idempotency-Key was already used with a different request"
  }
}

/** Every expected failure; the HTTP adapter's error table must map each of these tags. */
export type RelayError =
  | Unauthenticated
  | PermissionDenied
  | CredentialNotClientScoped
  | InvalidRequest
  | UnsupportedAsset
  | InvalidAmount
  | InvalidAddress
  | AssetMismatch
  | InsufficientFunds
  | SourceAccountNotActive
  | SourceAccountInaccessible
  | DestinationNotFound
  | SameSourceAndDestination
  | FeeEstimationUnsupported
  | CustodyProviderFailed
  | NotFound
  | DuplicateAccount
  | DuplicateWhitelistedAddress
  | TransitionNotAllowed
  | InitiatorCannotApprove
  | AlreadyDecided
  | IdempotencyKeyReused

export type RelayErrorTag = RelayError["_tag"]
