/**
 * Operations on custody transactions: the interface's list, get, status, calculate-fee and initiate; approve and
 * reject by the quorum of approvers (our extension); and the provider's progress reports. `applyEvent` is the one
 * place where a transaction changes state and where balances follow: initiation reserves, a failed-group ending
 * releases, completion settles and credits an internal destination. No balance can go negative.
 */
import { Effect, Option } from "effect"
import * as Account from "./Account.js"
import { findOwned as findOwnedAccount, requireUuid } from "./Accounts.js"
import { type Asset, requireAsset } from "./Asset.js"
import { CustodyProvider } from "./CustodyProvider.js"
import * as FeeEstimate from "./FeeEstimate.js"
import { AccountId, Ids, LedgerEntryId, TransactionId, WhitelistedAddressId } from "./Ids.js"
import * as Money from "./Money.js"
import { operation } from "./Operation.js"
import * as Page from "./Page.js"
import { authorize, type ClientPrincipal, owns, type Principal, requireOwned } from "./Principal.js"
import {
  AlreadyDecided,
  AssetMismatch,
  DestinationNotFound,
  InitiatorCannotApprove,
  InsufficientFunds,
  InvalidAmount,
  InvalidRequest,
  NotFound,
  SameSourceAndDestination,
  SourceAccountInaccessible,
  SourceAccountNotActive,
  TransitionNotAllowed
} from "./RelayError.js"
import * as StateMachine from "./StateMachine.js"
import * as Storage from "./Storage.js"
import * as Timestamp from "./Timestamp.js"
import * as Transaction from "./Transaction.js"
import * as WhitelistedAddress from "./WhitelistedAddress.js"

const findOwned = (unit: Storage.StorageUnit, principal: ClientPrincipal, id: string) =>
  Effect.flatMap(unit.getTransaction(TransactionId.make(id)), requireOwned(principal, "transaction", id))

const findAny = (unit: Storage.StorageUnit, id: string) =>
  Effect.flatMap(unit.getTransaction(TransactionId.make(id)), NotFound.unlessFound("transaction", id))

const getAccountOrDie = (unit: Storage.StorageUnit, id: string) =>
  Effect.flatMap(unit.getAccount(AccountId.make(id)), (found) =>
    Option.isSome(found)
      ? Effect.succeed(found.value)
      // A transaction's accounts are never deleted: a missing one is corrupted storage, not a request error.
      : Effect.die(new Error(`account ${id} referenced by a transaction is missing`)))

interface ValidatedTransfer {
  readonly asset: Asset
  readonly amount: Money.DecimalString
  readonly source: Account.Account
  /** The destination's id in canonical form (see Ids). */
  readonly destinationId: string
  readonly destinationAddress: string
}

/**
 * The validation calculate-fee and initiate share (TXN-FEE-1), in the order of AUTH-ORDER-1: the request's own
 * values first (400), then the source's access (403), its asset and state (400), then the destination (404).
 */
const validateTransfer = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  caller: ClientPrincipal,
  input: Transaction.TransferInput
) {
  // Decoding already checked and lowered both ids; a caller of the Effect API may not have decoded.
  const sourceAccountId = yield* requireUuid("sourceAccountId", input.sourceAccountId)
  const destinationId = yield* requireUuid("destinationId", input.destinationId)
  const asset = yield* requireAsset(input.assetType)
  const amount = yield* Effect.fromResult(Money.parseAmount(input.amount, asset.precision, asset.assetId)).pipe(
    Effect.mapError(InvalidAmount.of)
  )
  const source = yield* findOwnedAccount(unit, caller, sourceAccountId).pipe(
    Effect.mapError(() => new SourceAccountInaccessible({ accountId: sourceAccountId }))
  )
  if (source.assetId !== asset.assetId) {
    return yield* new AssetMismatch({ accountAssetId: source.assetId, requestedAssetType: input.assetType })
  }
  if (!Account.isActive(source)) return yield* new SourceAccountNotActive({ accountId: source.id, status: source.status })
  let destinationAddress: string | null
  if (input.destinationType === "internal") {
    if (destinationId === source.id) return yield* new SameSourceAndDestination({ accountId: source.id })
    const found = yield* unit.getAccount(AccountId.make(destinationId))
    const eligible = Option.filter(found, (d) => owns(caller, d) && Account.isActive(d) && d.assetId === source.assetId)
    destinationAddress = Option.isSome(eligible) ? eligible.value.address : null
  } else {
    const found = yield* unit.getWhitelistedAddress(WhitelistedAddressId.make(destinationId))
    const eligible = Option.filter(
      found,
      (e) => owns(caller, e) && WhitelistedAddress.isUsableDestination(e) && e.assetType === source.assetId
    )
    destinationAddress = Option.isSome(eligible) ? eligible.value.address : null
  }
  if (destinationAddress === null) {
    return yield* new DestinationNotFound({ destinationId, destinationType: input.destinationType })
  }
  return { asset, amount, source, destinationId, destinationAddress } satisfies ValidatedTransfer
})

const step = (tx: Transaction.Transaction, event: Transaction.TransactionEvent, action: string = event) =>
  StateMachine.transition(Transaction.machine, tx.status, event).pipe(
    Effect.fromResult,
    Effect.mapError(() => new TransitionNotAllowed({ entity: "transaction", id: tx.id, status: tx.status, action }))
  )

const ledgerEntry = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  account: Account.Account,
  kind: "transfer_in" | "settlement",
  amount: Money.DecimalString,
  transactionId: string,
  now: Timestamp.Timestamp
) {
  yield* unit.insertLedgerEntry({
    id: LedgerEntryId.make(yield* (yield* Ids).next),
    clientId: account.clientId,
    accountId: account.id,
    kind,
    direction: kind === "transfer_in" ? "credit" : "debit",
    amount,
    transactionId,
    createdAt: now
  })
})

/**
 * Applies one event of the transaction table and its effects on balances, and returns the new record; the
 * caller stores it. The reservation made at initiation is released when the transaction ends in the failed
 * group and settled when it completes, so it is open exactly while the status is pending.
 */
const applyEvent = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  tx: Transaction.Transaction,
  event: Transaction.TransactionEvent,
  now: Timestamp.Timestamp,
  subStatus?: string
) {
  const status = yield* step(tx, event)
  let next: Transaction.Transaction = {
    ...tx,
    status,
    subStatus: subStatus ?? Transaction.subStatusAfter[event],
    updatedAt: now
  }
  if (event === "quorumReached") {
    const asset = yield* requireAsset(tx.assetType)
    const { providerTransactionId } = yield* (yield* CustodyProvider).submitTransfer({
      transactionId: tx.id,
      asset,
      amount: tx.amount,
      sourceAccountId: tx.sourceAccountId,
      destinationAddress: tx.destinationAddress
    })
    next = { ...next, approvedAt: now, providerTransactionId }
  }
  if (event === "providerApprove") next = { ...next, providerApprovedAt: now }
  if (Transaction.groupOf[status] === "failed") {
    const source = yield* getAccountOrDie(unit, tx.sourceAccountId)
    yield* unit.updateAccount({ ...source, availableBalance: Money.add(source.availableBalance, tx.reserved), updatedAt: now })
  }
  if (status === "COMPLETED") {
    const source = yield* getAccountOrDie(unit, tx.sourceAccountId)
    yield* ledgerEntry(unit, source, "settlement", tx.reserved, tx.id, now)
    if (tx.destinationType === "internal") {
      const destination = yield* getAccountOrDie(unit, tx.destinationId)
      yield* unit.updateAccount({
        ...destination,
        availableBalance: Money.add(destination.availableBalance, tx.amount),
        updatedAt: now
      })
      yield* ledgerEntry(unit, destination, "transfer_in", tx.amount, tx.id, now)
    }
  }
  return next
})

export const list = operation("Transactions.list")(function*(
  principal: Principal,
  filter: Transaction.TransactionFilter,
  page: Page.PageRequest
) {
  const caller = yield* authorize(principal, "transactions.list")
  if (filter.accountId !== undefined) filter = { ...filter, accountId: yield* requireUuid("accountId", filter.accountId) }
  const found = yield* Storage.run("read", (unit) => unit.listTransactions(caller.clientId, filter, page))
  return Page.envelope({ items: found.items.map(Transaction.toListItem), total: found.total }, page)
})

export const get = operation("Transactions.get")(function*(principal: Principal, id: string) {
  const caller = yield* authorize(principal, "transactions.get")
  id = yield* requireUuid("id", id)
  return Transaction.toDetail(yield* Storage.run("read", (unit) => findOwned(unit, caller, id)))
})

export const status = operation("Transactions.status")(function*(principal: Principal, id: string) {
  const caller = yield* authorize(principal, "transactions.status")
  id = yield* requireUuid("id", id)
  return Transaction.toStatusView(yield* Storage.run("read", (unit) => findOwned(unit, caller, id)))
})

/**
 * Estimates the network fee after exactly initiate's validation; stores nothing (TXN-FEE-1, TXN-FEE-2). The fee
 * is exact (see FeeEstimate); `calculateFee` gives the interface's record with the fee as a JS number.
 */
export const quoteFee = operation("Transactions.quoteFee")(function*(
  principal: Principal,
  input: Transaction.TransferInput
) {
  const caller = yield* authorize(principal, "transactions.calculateFee")
  const transfer = yield* Storage.run("read", (unit) => validateTransfer(unit, caller, input))
  const quote = yield* (yield* CustodyProvider).estimateFee(transfer.asset, transfer.amount)
  return FeeEstimate.quote(transfer.asset.assetId, transfer.amount, quote.fee, quote.feeAssetId)
})

export const calculateFee = (principal: Principal, input: Transaction.TransferInput) =>
  Effect.map(quoteFee(principal, input), FeeEstimate.fromQuote)

/**
 * Initiates a transaction: validates, prices the fee, reserves amount (plus fee when paid in the same asset) from
 * the source and stores the transaction, all in one unit of work, so concurrent initiations can never spend one
 * balance twice. It enters the source's approval workflow (TXN-INIT-2).
 */
export const initiate = operation("Transactions.initiate")(function*(
  principal: Principal,
  input: Transaction.TransferInput
) {
  const caller = yield* authorize(principal, "transactions.initiate")
  const provider = yield* CustodyProvider
  const id = TransactionId.make(yield* (yield* Ids).next)
  const now = yield* Timestamp.now
  return yield* Storage.run("write", (unit) =>
    Effect.gen(function*() {
      const transfer = yield* validateTransfer(unit, caller, input)
      const quote = yield* provider.estimateFee(transfer.asset, transfer.amount)
      const reserved = quote.feeAssetId === transfer.asset.assetId ? Money.add(transfer.amount, quote.fee) : transfer.amount
      if (Money.compare(transfer.source.availableBalance, reserved) < 0) {
        return yield* new InsufficientFunds({
          available: transfer.source.availableBalance,
          required: reserved,
          assetId: transfer.asset.assetId
        })
      }
      yield* unit.updateAccount({
        ...transfer.source,
        availableBalance: Money.subtract(transfer.source.availableBalance, reserved),
        updatedAt: now
      })
      const created: Transaction.Transaction = {
        id,
        clientId: caller.clientId,
        sourceAccountId: transfer.source.id,
        destinationId: transfer.destinationId,
        destinationType: input.destinationType,
        destinationAddress: transfer.destinationAddress,
        amount: transfer.amount,
        assetType: transfer.asset.assetId,
        networkFee: quote.fee,
        feeAssetId: quote.feeAssetId,
        reserved,
        status: Transaction.machine.initial,
        subStatus: null,
        requiredApprovals: transfer.source.requiredApprovals,
        createdBy: { apiUserId: caller.apiUserId, name: caller.name },
        decisions: [],
        providerTransactionId: null,
        approvedAt: null,
        providerApprovedAt: null,
        createdAt: now,
        updatedAt: now
      }
      const stored = created.requiredApprovals === 0 ? yield* applyEvent(unit, created, "quorumReached", now) : created
      yield* unit.insertTransaction(stored)
      return Transaction.toInitiated(stored)
    }))
})

/**
 * One approver's decision on a transaction awaiting its quorum. Approvers are distinct API users holding
 * "Approve transaction"; the initiator never counts toward its own quorum; one rejection ends it.
 */
const decide = (decision: "approve" | "reject") =>
  operation(`Transactions.${decision}`)(function*(principal: Principal, id: string) {
    const caller = yield* authorize(principal, decision === "approve" ? "transactions.approve" : "transactions.reject")
    id = yield* requireUuid("id", id)
    const now = yield* Timestamp.now
    return yield* Storage.run("write", (unit) =>
      Effect.gen(function*() {
        const tx = yield* findOwned(unit, caller, id)
        if (tx.status !== "AWAITING_SIGNATURE") {
          return yield* new TransitionNotAllowed({ entity: "transaction", id, status: tx.status, action: decision })
        }
        if (tx.createdBy.apiUserId === caller.apiUserId) return yield* new InitiatorCannotApprove({ transactionId: id })
        if (tx.decisions.some((d) => d.apiUserId === caller.apiUserId)) return yield* new AlreadyDecided({ transactionId: id })
        const decided: Transaction.Transaction = {
          ...tx,
          decisions: [...tx.decisions, { apiUserId: caller.apiUserId, name: caller.name, decision, at: now }],
          updatedAt: now
        }
        const approvals = decided.decisions.filter((d) => d.decision === "approve").length
        const next = decision === "reject"
          ? yield* applyEvent(unit, decided, "reject", now)
          : approvals >= decided.requiredApprovals
          ? yield* applyEvent(unit, decided, "quorumReached", now)
          : decided
        yield* unit.updateTransaction(next)
        return Transaction.toDetail(next)
      }))
  })

export const approve = decide("approve")
export const reject = decide("reject")

export type ProviderEvent = "providerApprove" | "providerReject" | "broadcast" | "confirm" | "fail"

/** The custody provider reports progress on a transaction it was given (or fails one it holds). */
export const applyProviderEvent = operation("Transactions.applyProviderEvent")(function*(
  id: string,
  event: ProviderEvent,
  subStatus?: string
) {
  id = yield* requireUuid("id", id)
  if (subStatus !== undefined && event === "fail" && !(Transaction.failureSubStatuses as ReadonlyArray<string>).includes(subStatus)) {
    return yield* InvalidRequest.field("subStatus", `must be one of ${Transaction.failureSubStatuses.join(", ")}`)
  }
  const now = yield* Timestamp.now
  return yield* Storage.run("write", (unit) =>
    Effect.gen(function*() {
      const next = yield* applyEvent(unit, yield* findAny(unit, id), event, now, subStatus)
      yield* unit.updateTransaction(next)
      return next
    }))
})

/** Withdraws a transaction before broadcast (administration); its reservation is released. */
export const cancel = operation("Transactions.cancel")(function*(id: string) {
  id = yield* requireUuid("id", id)
  const now = yield* Timestamp.now
  return yield* Storage.run("write", (unit) =>
    Effect.gen(function*() {
      const next = yield* applyEvent(unit, yield* findAny(unit, id), "cancel", now)
      yield* unit.updateTransaction(next)
      return next
    }))
})

/** The events that carry a pending transaction one step toward completion, by status. */
const towardCompletion: Partial<Record<Transaction.TransactionStatus, Transaction.TransactionEvent>> = {
  AWAITING_SIGNATURE: "quorumReached",
  PENDING_PROVIDER_APPROVAL: "providerApprove",
  BROADCASTING: "broadcast",
  CONFIRMING: "confirm"
}

/**
 * Moves a pending transaction all the way to COMPLETED (an operator override of any approvals still missing,
 * then the provider's steps) or to FAILED, in one unit of work. For simulations and the test control protocol.
 * A transaction that is no longer pending is refused (TransitionNotAllowed).
 */
export const advanceTo = operation("Transactions.advanceTo")(function*(id: string, target: "completed" | "failed") {
  id = yield* requireUuid("id", id)
  const now = yield* Timestamp.now
  return yield* Storage.run("write", (unit) =>
    Effect.gen(function*() {
      let tx = yield* findAny(unit, id)
      if (!Transaction.isOpen(tx.status)) {
        return yield* new TransitionNotAllowed({ entity: "transaction", id, status: tx.status, action: `advance to ${target}` })
      }
      if (target === "failed") {
        tx = yield* applyEvent(unit, tx, "fail", now)
      } else {
        for (let event = towardCompletion[tx.status]; event !== undefined; event = towardCompletion[tx.status]) {
          tx = yield* applyEvent(unit, tx, event, now)
        }
      }
      yield* unit.updateTransaction(tx)
      return tx
    }))
})

/** The transaction as stored, for administration and tests: no client scope. */
export const inspect = operation("Transactions.inspect")(function*(id: string) {
  id = yield* requireUuid("id", id)
  return yield* Storage.run("read", (unit) => findAny(unit, id))
})
