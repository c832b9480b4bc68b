import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Accounts, CustodyProvider, Ids, OutboxWorker, Permission, Reconciliation, Relay, Transactions, WhitelistedAddresses } from "@custody-relay/core"
import { failureOf, failureTag } from "./Failure.js"
import { activeAccount, approvedWhitelistEntry, layer, newClient, principalOf, validAddress } from "./TestWorld.js"

const transfer = (sourceAccountId: string, destinationId: string, amount: string, assetType = "BTC", destinationType: "internal" | "external" = "internal") => ({
  sourceAccountId,
  destinationId,
  destinationType,
  amount,
  assetType
})

const approverPermissions: ReadonlyArray<Permission.Permission> = ["Approve transaction", "View custody transaction detail"]

describe("Transactions", () => {
  it.effect("TXN-INIT-1 TXN-INIT-2: initiate answers lower-case awaiting_signature and reserves amount plus fee", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const source = yield* activeAccount(p, "BTC", "1")
      const destination = yield* activeAccount(p, "BTC")
      const initiated = yield* Transactions.initiate(p, transfer(source, destination, "0.1"))
      assert.deepStrictEqual(Object.keys(initiated).sort(), [
        "amount", "assetType", "createdAt", "destinationId", "destinationType", "id", "sourceAccountId", "status"
      ])
      assert.strictEqual(initiated.status, "awaiting_signature")
      assert.strictEqual(initiated.destinationType, "internal")
      const detail = yield* Transactions.get(p, initiated.id)
      assert.strictEqual(detail.status, "AWAITING_SIGNATURE")
      assert.strictEqual(detail.destinationType, "internal_wallet")
      assert.strictEqual(detail.transactionType, "WITHDRAWAL")
      assert.strictEqual(detail.direction, "OUT")
      // BTC fee: 0.00002 + 0.1 * 0.0001 = 0.00003, paid in BTC so reserved with the amount.
      assert.strictEqual(detail.networkFee, "0.00003")
      assert.strictEqual((yield* Accounts.get(p, source)).availableBalance, "0.89997")
      assert.isTrue((yield* Reconciliation.reconcileAccount(source)).consistent)
    }).pipe(Effect.provide(layer())))

  it.effect("TXN-SHAPE-2 TXN-SHAPE-3 TXN-SHAPE-4: detail, approvals and status records", () =>
    Effect.gen(function*() {
      const client = yield* newClient
      const p = yield* principalOf(client, undefined, "alice")
      const bob = yield* principalOf(client, approverPermissions, "bob")
      const source = yield* activeAccount(p, "ETH", "10")
      const destination = yield* approvedWhitelistEntry(p, "ETH")
      const { id } = yield* Transactions.initiate(p, transfer(source, destination, "1.000000000000000001", "ETH", "external"))
      const before = yield* Transactions.get(p, id)
      assert.deepStrictEqual(before.approvals, {
        createdBy: "alice", createdAt: before.createdAt, signedBy: null, signedAt: null, approvedBy: null,
        approvedAt: null, providerApprovedAt: null, rejectedBy: null, rejectedAt: null
      })
      assert.strictEqual(before.providerTransactionId, null)
      assert.strictEqual(before.amount, "1.000000000000000001")
      const after = yield* Transactions.approve(bob, id)
      assert.strictEqual(after.status, "PENDING_PROVIDER_APPROVAL")
      assert.strictEqual(after.approvals.signedBy, "bob")
      assert.strictEqual(after.approvals.approvedBy, "bob")
      // The provider is called after commit, by the outbox worker: the provider's id arrives with it.
      assert.strictEqual(after.providerTransactionId, null)
      yield* OutboxWorker.drain()
      assert.isString((yield* Transactions.get(p, id)).providerTransactionId)
      assert.deepStrictEqual(yield* Transactions.status(p, id), {
        id, status: "PENDING_PROVIDER_APPROVAL", subStatus: "PENDING_PROVIDER_POLICY", updatedAt: (yield* Transactions.get(p, id)).updatedAt
      })
      const done = yield* Transactions.advanceTo(id, "completed")
      assert.strictEqual(done.status, "COMPLETED")
      const status = yield* Transactions.status(p, id)
      assert.deepStrictEqual([status.status, status.subStatus], ["COMPLETED", "CONFIRMED"])
      assert.isString((yield* Transactions.get(p, id)).approvals.providerApprovedAt)
    }).pipe(Effect.provide(layer())))

  it.effect("TXN-FEE-1 TXN-FEE-2: calculate-fee validates like initiate, answers a JSON number and stores nothing", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const source = yield* activeAccount(p, "USDC", "100")
      const destination = yield* approvedWhitelistEntry(p, "USDC")
      const estimate = yield* Transactions.calculateFee(p, transfer(source, destination, "12.5", "USDC", "external"))
      assert.deepStrictEqual(estimate, { assetType: "USDC", amount: "12.5", estimatedFee: 0.00042, feeAssetType: "ETH" })
      // The quote keeps the fee exact, past what a JS number holds: 0.00002 + 0.01% of the amount, rounded down
      // to BTC's 8 places, is 24 significant digits.
      const btc = yield* activeAccount(p, "BTC")
      const huge = transfer(btc, yield* approvedWhitelistEntry(p, "BTC"), "12345678901234567890.12345678", "BTC", "external")
      assert.deepStrictEqual(yield* Transactions.quoteFee(p, huge), {
        assetType: "BTC",
        amount: "12345678901234567890.12345678",
        fee: "1234567890123456.78903234",
        feeAssetType: "BTC"
      })
      assert.strictEqual((yield* Transactions.calculateFee(p, huge)).estimatedFee, 1234567890123456.8)
      assert.strictEqual((yield* Transactions.list(p, {}, { page: 1, limit: 20 })).total, 0)
      assert.strictEqual((yield* Accounts.get(p, source)).availableBalance, "100")
      const bad = transfer(source, destination, "1.0000001", "USDC", "external")
      assert.strictEqual(failureTag(yield* Effect.exit(Transactions.calculateFee(p, bad))), "InvalidAmount")
      assert.strictEqual(failureTag(yield* Effect.exit(Transactions.initiate(p, bad))), "InvalidAmount")
      // A token's fee is paid in ETH, so only the amount is reserved from the USDC account.
      yield* Transactions.initiate(p, transfer(source, destination, "100", "USDC", "external"))
      assert.strictEqual((yield* Accounts.get(p, source)).availableBalance, "0")
    }).pipe(Effect.provide(layer())))

  it.effect("TXN-FEE-3: an asset without fee estimation is refused; a provider outage is a provider failure", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const source = yield* activeAccount(p, "SOL", "5")
      const destination = yield* activeAccount(p, "SOL")
      const controls = yield* CustodyProvider.SimulatedProviderControls
      yield* controls.setFeeEstimation("SOL", false)
      const input = transfer(source, destination, "1", "SOL")
      assert.strictEqual(failureTag(yield* Effect.exit(Transactions.calculateFee(p, input))), "FeeEstimationUnsupported")
      yield* controls.setFeeEstimation("SOL", true)
      yield* controls.setFailing(true)
      assert.strictEqual(failureTag(yield* Effect.exit(Transactions.calculateFee(p, input))), "CustodyProviderFailed")
      assert.strictEqual(failureTag(yield* Effect.exit(Transactions.initiate(p, input))), "CustodyProviderFailed")
      yield* controls.setFailing(false)
      assert.strictEqual((yield* Accounts.get(p, source)).availableBalance, "5")
    }).pipe(Effect.provide(layer())))

  it.effect("TXN-VAL-2 TXN-VAL-3 TXN-DEST-1 TXN-DEST-2 TXN-PREC-1 AUTH-ORDER-1: refusals in the documented order, each decided before the provider is asked", () =>
    Effect.gen(function*() {
      const client = yield* newClient
      const p = yield* principalOf(client)
      const stranger = yield* principalOf(yield* newClient)
      const source = yield* activeAccount(p, "BTC", "1")
      const destination = yield* activeAccount(p, "BTC")
      const ethAccount = yield* activeAccount(p, "ETH", "1")
      const pending = yield* Accounts.create(p, { name: "Not yet", workspace: "custody", assetId: "BTC" })
      const foreign = yield* activeAccount(stranger, "BTC", "1")
      const pendingWhitelist = yield* WhitelistedAddresses.create(p, { name: "Pending", address: validAddress("BTC"), assetType: "BTC" })
      const foreignWhitelist = yield* approvedWhitelistEntry(stranger, "BTC")
      const ethWhitelist = yield* approvedWhitelistEntry(p, "ETH")
      const cases: ReadonlyArray<readonly [string, ReturnType<typeof transfer>]> = [
        ["UnsupportedAsset", transfer(source, destination, "1", "XRP")],
        ["InvalidAmount", transfer(source, destination, "1e-8")],
        ["InvalidAmount", transfer(source, destination, "0")],
        ["InvalidAmount", transfer(source, destination, "-1")],
        ["InvalidAmount", transfer(source, destination, "0.000000001")],
        ["SourceAccountInaccessible", transfer(foreign, destination, "0.1")],
        ["SourceAccountInaccessible", transfer("00000000-0000-7000-8000-00000000ffff", destination, "0.1")],
        ["AssetMismatch", transfer(ethAccount, destination, "0.1")],
        ["SourceAccountNotActive", transfer(pending.id, destination, "0.1")],
        ["SameSourceAndDestination", transfer(source, source, "0.1")],
        ["DestinationNotFound", transfer(source, pending.id, "0.1")],
        ["DestinationNotFound", transfer(source, foreign, "0.1")],
        ["DestinationNotFound", transfer(source, ethAccount, "0.1")],
        ["DestinationNotFound", transfer(source, pendingWhitelist.id, "0.1", "BTC", "external")],
        ["DestinationNotFound", transfer(source, foreignWhitelist, "0.1", "BTC", "external")],
        ["DestinationNotFound", transfer(source, ethWhitelist, "0.1", "BTC", "external")],
        ["DestinationNotFound", transfer(source, destination, "0.1", "BTC", "external")],
        ["InsufficientFunds", transfer(source, destination, "1")]
      ]
      for (const [expected, input] of cases) {
        assert.strictEqual(failureTag(yield* Effect.exit(Transactions.initiate(p, input))), expected, JSON.stringify(input))
        if (expected !== "InsufficientFunds") {
          assert.strictEqual(failureTag(yield* Effect.exit(Transactions.calculateFee(p, input))), expected)
        }
      }
      // A request the relay refuses never reaches the provider: with the provider failing every call, each refusal
      // is still the same refusal, not a provider failure. Only the funds' check needs the fee, so it comes after.
      const controls = yield* CustodyProvider.SimulatedProviderControls
      yield* controls.setFailing(true)
      for (const [expected, input] of cases) {
        const refused = expected === "InsufficientFunds" ? "CustodyProviderFailed" : expected
        assert.strictEqual(failureTag(yield* Effect.exit(Transactions.initiate(p, input))), refused, JSON.stringify(input))
        assert.strictEqual(failureTag(yield* Effect.exit(Transactions.calculateFee(p, input))), refused, JSON.stringify(input))
      }
      yield* controls.setFailing(false)
      assert.strictEqual((yield* Transactions.list(p, {}, { page: 1, limit: 20 })).total, 0)
      assert.strictEqual((yield* Accounts.get(p, source)).availableBalance, "1")
      const insufficient = failureOf(yield* Effect.exit(Transactions.initiate(p, transfer(source, destination, "1"))))
      assert.include(String(insufficient?.message), "does not cover 1.00012 BTC")
      // Archived and rejected whitelist entries are not destinations either (TXN-DEST-1).
      const archived = yield* approvedWhitelistEntry(p, "BTC")
      yield* WhitelistedAddresses.archive(archived)
      assert.strictEqual(
        failureTag(yield* Effect.exit(Transactions.initiate(p, transfer(source, archived, "0.1", "BTC", "external")))),
        "DestinationNotFound"
      )
    }).pipe(Effect.provide(layer())))

  it.effect("quorum: the initiator never counts, each approver once, one rejection ends it and releases funds", () =>
    Effect.gen(function*() {
      const client = yield* newClient
      const initiator = yield* principalOf(client)
      const [a, b, c] = yield* Effect.all([1, 2, 3].map((i) => principalOf(client, approverPermissions, `approver-${i}`)))
      const viewer = yield* principalOf(client, ["View custody transaction detail"])
      const source = yield* activeAccount(initiator, "LTC", "10", 2)
      const destination = yield* activeAccount(initiator, "LTC")
      const { id } = yield* Transactions.initiate(initiator, transfer(source, destination, "1", "LTC"))
      assert.strictEqual(failureTag(yield* Effect.exit(Transactions.approve(initiator, id))), "InitiatorCannotApprove")
      assert.strictEqual(failureTag(yield* Effect.exit(Transactions.approve(viewer, id))), "PermissionDenied")
      assert.strictEqual((yield* Transactions.approve(a!, id)).status, "AWAITING_SIGNATURE")
      assert.strictEqual(failureTag(yield* Effect.exit(Transactions.approve(a!, id))), "AlreadyDecided")
      const quorum = yield* Transactions.approve(b!, id)
      assert.strictEqual(quorum.status, "PENDING_PROVIDER_APPROVAL")
      assert.deepStrictEqual([quorum.approvals.signedBy, quorum.approvals.approvedBy], ["approver-1", "approver-2"])
      assert.strictEqual(failureTag(yield* Effect.exit(Transactions.reject(c!, id))), "TransitionNotAllowed")

      const second = yield* Transactions.initiate(initiator, transfer(source, destination, "2", "LTC"))
      const balanceBefore = (yield* Accounts.get(initiator, source)).availableBalance
      const rejected = yield* Transactions.reject(c!, second.id)
      assert.deepStrictEqual([rejected.status, rejected.subStatus, rejected.approvals.rejectedBy], ["REJECTED", "REJECTED_BY_APPROVER", "approver-3"])
      assert.notStrictEqual((yield* Accounts.get(initiator, source)).availableBalance, balanceBefore)
      assert.strictEqual(failureTag(yield* Effect.exit(Transactions.approve(a!, second.id))), "TransitionNotAllowed")
      assert.isTrue((yield* Reconciliation.reconcileAccount(source)).consistent)
    }).pipe(Effect.provide(layer())))

  it.effect("TXN-INIT-2: a policy of 0 approvals sends the transaction to the provider at once", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const source = yield* activeAccount(p, "BTC", "1", 0)
      const destination = yield* activeAccount(p, "BTC")
      assert.strictEqual((yield* Transactions.initiate(p, transfer(source, destination, "0.5"))).status, "pending_provider_approval")
    }).pipe(Effect.provide(layer())))

  it.effect("provider steps: completion settles and credits an internal destination; failure and cancel release", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const source = yield* activeAccount(p, "BTC", "1", 0)
      const destination = yield* activeAccount(p, "BTC")
      const { id } = yield* Transactions.initiate(p, transfer(source, destination, "0.5"))
      assert.strictEqual((yield* Transactions.applyProviderEvent(id, "providerApprove")).status, "BROADCASTING")
      assert.strictEqual((yield* Transactions.applyProviderEvent(id, "broadcast")).subStatus, "PENDING_BLOCKCHAIN_CONFIRMATIONS")
      assert.strictEqual((yield* Transactions.applyProviderEvent(id, "confirm")).status, "COMPLETED")
      assert.strictEqual((yield* Accounts.get(p, destination)).availableBalance, "0.5")
      assert.strictEqual((yield* Accounts.get(p, source)).availableBalance, "0.49993")
      assert.strictEqual(failureTag(yield* Effect.exit(Transactions.applyProviderEvent(id, "fail"))), "TransitionNotAllowed")
      assert.strictEqual(failureTag(yield* Effect.exit(Transactions.advanceTo(id, "failed"))), "TransitionNotAllowed")

      const failing = yield* Transactions.initiate(p, transfer(source, destination, "0.1"))
      const failed = yield* Transactions.applyProviderEvent(failing.id, "fail", "TIMED_OUT")
      assert.deepStrictEqual([failed.status, failed.subStatus], ["FAILED", "TIMED_OUT"])
      assert.strictEqual(
        failureTag(yield* Effect.exit(Transactions.applyProviderEvent(failing.id, "fail", "NOPE"))),
        "InvalidRequest"
      )
      // Awaiting its approvals (the policy raised to 1 for it), a transfer is withdrawn and its funds released.
      yield* Accounts.setApprovalPolicy(source, 1)
      const cancelled = yield* Transactions.initiate(p, transfer(source, destination, "0.1"))
      yield* Accounts.setApprovalPolicy(source, 0)
      assert.strictEqual((yield* Transactions.cancel(cancelled.id)).status, "CANCELLED")
      const rejected = yield* Transactions.initiate(p, transfer(source, destination, "0.1"))
      assert.strictEqual((yield* Transactions.applyProviderEvent(rejected.id, "providerReject")).status, "REJECTED")
      const viaControl = yield* Transactions.initiate(p, transfer(source, destination, "0.1"))
      assert.strictEqual((yield* Transactions.advanceTo(viaControl.id, "failed")).status, "FAILED")
      assert.strictEqual((yield* Accounts.get(p, source)).availableBalance, "0.49993")
      for (const account of [source, destination]) assert.isTrue((yield* Reconciliation.reconcileAccount(account)).consistent)
      assert.strictEqual((yield* Transactions.inspect(id)).status, "COMPLETED")
    }).pipe(Effect.provide(layer())))

  it.effect("TXN-FLOW-1: a provider's report never stands in for an approver's decision, and an advance names its target; a refusal changes nothing", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const source = yield* activeAccount(p, "BTC", "1", 2)
      const destination = yield* activeAccount(p, "BTC")
      const { id } = yield* Transactions.initiate(p, transfer(source, destination, "0.5"))
      const before = yield* Transactions.inspect(id)
      const balance = (yield* Accounts.get(p, source)).availableBalance
      // What an untyped caller (the Promise facade, a provider's callback receiver in JavaScript) may pass; the types
      // forbid each one. Taken, "quorumReached" sent the transfer to the provider with none of its two approvals, and
      // "fail" as an advance's target (for "failed") completed it.
      const refused: ReadonlyArray<readonly [Effect.Effect<unknown, { readonly _tag: string }, Relay.RelayServices>, string]> = [
        [Transactions.applyProviderEvent(id, "quorumReached" as never), "event"],
        [Transactions.applyProviderEvent(id, "cancel" as never), "event"],
        [Transactions.applyProviderEvent(id, "reject" as never), "event"],
        [Transactions.applyProviderEvent(id, "toString" as never), "event"],
        [Transactions.applyProviderEvent(id, "fail", "x".repeat(10_000)), "subStatus"],
        [Transactions.applyProviderEvent(id, "fail", 5 as never), "subStatus"],
        [Transactions.applyProviderEvent(id, "providerReject", "BLOCKED_BY_A_FRIEND"), "subStatus"],
        [Transactions.advanceTo(id, "fail" as never), "to"],
        [Transactions.advanceTo(id, "complete" as never), "to"],
        [Transactions.advanceTo(id, undefined as never), "to"]
      ]
      for (const [attempt, field] of refused) {
        const exit = yield* Effect.exit(attempt)
        assert.strictEqual(failureTag(exit), "InvalidRequest", field)
        assert.include(JSON.stringify(failureOf(exit)), `"${field}"`)
      }
      assert.deepStrictEqual(yield* Transactions.inspect(id), before)
      assert.strictEqual((yield* Accounts.get(p, source)).availableBalance, balance)
      assert.strictEqual(yield* OutboxWorker.drain(), 0)
      // The provider's own steps still take their words: a failure says why, in the interface's words.
      const failed = yield* Transactions.applyProviderEvent(id, "fail", "DROPPED_BY_NETWORK")
      assert.deepStrictEqual([failed.status, failed.subStatus], ["FAILED", "DROPPED_BY_NETWORK"])
    }).pipe(Effect.provide(layer())))

  it.effect("TXN-FLOW-1: a transfer whose quorum is reached is the provider's: a cancel is refused and its funds stay reserved until the provider's word", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const source = yield* activeAccount(p, "BTC", "1", 0)
      const destination = yield* approvedWhitelistEntry(p, "BTC")
      // Awaiting its approvals, it is still the relay's to withdraw.
      const withdrawn = yield* Transactions.initiate(p, transfer(source, destination, "0.1", "BTC", "external"))
      yield* Accounts.setApprovalPolicy(source, 1)
      const waiting = yield* Transactions.initiate(p, transfer(source, destination, "0.1", "BTC", "external"))
      assert.strictEqual((yield* Transactions.cancel(waiting.id)).status, "CANCELLED")
      assert.strictEqual(withdrawn.status, "pending_provider_approval")
      // Its quorum reached (a policy of 0), the order is handed to the provider, which will carry it out.
      yield* OutboxWorker.runDue()
      const submitted = yield* Transactions.inspect(withdrawn.id)
      assert.isNotNull(submitted.providerTransactionId)
      const balance = (yield* Accounts.inspect(source)).availableBalance
      assert.strictEqual(failureTag(yield* Effect.exit(Transactions.cancel(withdrawn.id))), "TransitionNotAllowed")
      assert.strictEqual((yield* Accounts.inspect(source)).availableBalance, balance, "no funds released for an order the provider holds")
      // The provider completes it; the relay follows it to the end, the reservation settled once.
      yield* OutboxWorker.drain()
      assert.strictEqual((yield* Transactions.inspect(withdrawn.id)).status, "COMPLETED")
      assert.strictEqual((yield* Accounts.inspect(source)).availableBalance, balance)
      assert.isTrue((yield* Reconciliation.reconcileAccount(source)).consistent)
    }).pipe(Effect.provide(Relay.layerMemory({
      ids: Ids.Ids.layerSequential,
      provider: CustodyProvider.layerSimulated({ lifecycle: { policyMillis: 0, broadcastMillis: 0, confirmationMillis: 0, addressReviewMillis: 0, failureShare: 0 } })
    }))))

  it.effect("TXN-LIST-1 TXN-LIST-2 SCOPE-3: filters by account, asset and status group", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const btc = yield* activeAccount(p, "BTC", "5", 0)
      const btcTo = yield* activeAccount(p, "BTC")
      const eth = yield* activeAccount(p, "ETH", "5", 0)
      const ethTo = yield* activeAccount(p, "ETH")
      const done = yield* Transactions.initiate(p, transfer(btc, btcTo, "1"))
      yield* Transactions.advanceTo(done.id, "completed")
      const failed = yield* Transactions.initiate(p, transfer(eth, ethTo, "1", "ETH"))
      yield* Transactions.advanceTo(failed.id, "failed")
      yield* Transactions.initiate(p, transfer(eth, ethTo, "1", "ETH"))
      const page = { page: 1, limit: 20 }
      assert.strictEqual((yield* Transactions.list(p, {}, page)).total, 3)
      assert.deepStrictEqual((yield* Transactions.list(p, { group: "completed" }, page)).items.map((t) => t.id), [done.id])
      assert.deepStrictEqual((yield* Transactions.list(p, { group: "failed" }, page)).items.map((t) => t.id), [failed.id])
      assert.strictEqual((yield* Transactions.list(p, { group: "pending" }, page)).total, 1)
      assert.strictEqual((yield* Transactions.list(p, { assetType: "ETH" }, page)).total, 2)
      assert.strictEqual((yield* Transactions.list(p, { accountId: btc }, page)).total, 1)
      const empty = yield* Transactions.list(p, { accountId: "00000000-0000-7000-8000-00000000abcd" }, page)
      assert.deepStrictEqual([empty.total, empty.items.length, empty.totalPages], [0, 0, 0])
      const item = (yield* Transactions.list(p, { group: "completed" }, page)).items[0]!
      assert.deepStrictEqual(Object.keys(item).sort(), [
        "amount", "assetType", "createdAt", "destinationId", "destinationType", "direction", "id", "networkFee",
        "sourceAccountId", "status", "updatedAt"
      ])
    }).pipe(Effect.provide(layer())))

  it.effect("SCOPE-1 TXN-GET-1: another client's transaction is NotFound; a malformed id is invalid", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const stranger = yield* principalOf(yield* newClient)
      const source = yield* activeAccount(p, "BTC", "1")
      const destination = yield* activeAccount(p, "BTC")
      const { id } = yield* Transactions.initiate(p, transfer(source, destination, "0.1"))
      for (const op of [Transactions.get, Transactions.status, Transactions.approve, Transactions.reject]) {
        assert.strictEqual(failureTag(yield* Effect.exit(op(stranger, id))), "NotFound")
        assert.strictEqual(failureTag(yield* Effect.exit(op(p, "123"))), "InvalidRequest")
      }
      assert.strictEqual((yield* Transactions.list(stranger, {}, { page: 1, limit: 20 })).total, 0)
    }).pipe(Effect.provide(layer())))
})
