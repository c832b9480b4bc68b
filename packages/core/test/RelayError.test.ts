import { assert, describe, it } from "vitest"
import { RelayError } from "@custody-relay/core"

/** One instance of every error of the union; the record's type makes a new error fail to compile until listed. */
const examples: { readonly [Tag in RelayError.RelayErrorTag]: Extract<RelayError.RelayError, { _tag: Tag }> } = {
  Unauthenticated: new RelayError.Unauthenticated({ reason: "wrong_secret" }),
  PermissionDenied: RelayError.PermissionDenied.of("View custody account"),
  CredentialNotClientScoped: new RelayError.CredentialNotClientScoped(),
  InvalidRequest: RelayError.InvalidRequest.field("name", "is required"),
  UnsupportedAsset: new RelayError.UnsupportedAsset({ assetId: "DOGE" }),
  InvalidAmount: RelayError.InvalidAmount.of({ reason: "exponent", message: "amount must be a plain decimal" }),
  InvalidAddress: new RelayError.InvalidAddress({ assetType: "BTC" }),
  AssetMismatch: new RelayError.AssetMismatch({ accountAssetId: "BTC", requestedAssetType: "ETH" }),
  InsufficientFunds: new RelayError.InsufficientFunds({ available: "1", required: "2", assetId: "BTC" }),
  SourceAccountNotActive: new RelayError.SourceAccountNotActive({ accountId: "a", status: "approved" }),
  SourceAccountInaccessible: new RelayError.SourceAccountInaccessible({ accountId: "a" }),
  DestinationNotFound: new RelayError.DestinationNotFound({ destinationId: "d", destinationType: "internal" }),
  SameSourceAndDestination: new RelayError.SameSourceAndDestination({ accountId: "a" }),
  FeeEstimationUnsupported: new RelayError.FeeEstimationUnsupported({ assetId: "SOL" }),
  CustodyProviderFailed: new RelayError.CustodyProviderFailed({ operation: "estimateFee", detail: "upstream 502 at 10.0.0.3" }),
  NotFound: new RelayError.NotFound({ resource: "whitelisted_address", id: "x" }),
  DuplicateAccount: new RelayError.DuplicateAccount({ existingAccountId: "a" }),
  DuplicateWhitelistedAddress: new RelayError.DuplicateWhitelistedAddress({ existingId: "w" }),
  TransitionNotAllowed: new RelayError.TransitionNotAllowed({ entity: "account", id: "a", status: "approved", action: "approve" }),
  InitiatorCannotApprove: new RelayError.InitiatorCannotApprove({ transactionId: "t" }),
  AlreadyDecided: new RelayError.AlreadyDecided({ transactionId: "t" }),
  IdempotencyKeyReused: new RelayError.IdempotencyKeyReused({ key: "k" })
}

describe("RelayError", () => {
  it("every error has a clear message and its own tag", () => {
    for (const [tag, error] of Object.entries(examples)) {
      assert.strictEqual(error._tag, tag)
      assert.instanceOf(error, Error)
      assert.isAbove(error.message.length, 10, tag)
    }
  })

  it("AUTH-PERM-1: the permission message is the interface's sentence", () => {
    assert.strictEqual(examples.PermissionDenied.message, "Missing required API scope: View custody account")
  })

  it("messages that reach callers do not carry internal detail or say which credential half failed", () => {
    assert.notInclude(examples.CustodyProviderFailed.message, "10.0.0.3")
    assert.strictEqual(examples.Unauthenticated.message, new RelayError.Unauthenticated({ reason: "unknown_key" }).message)
    assert.strictEqual(examples.NotFound.message, "no whitelisted address x")
    assert.include(new RelayError.DestinationNotFound({ destinationId: "d", destinationType: "external" }).message, "whitelisted")
  })
})
