/**
 * Operations on custody transactions: the interface's list, get, status, calculate-fee and initiate; approve and
 * reject by the quorum of approvers (our extension); and the provider's progress reports. `applyEvent` is the one
 * place where a transaction changes state and where balances follow: initiation reserves, a failed-group ending
 * releases, completion settles and credits an internal destination. No balance can go negative.
 */
import { Effect, Option, Result, Schema } from "effect"
import * as Account from "./Account.js"
import { requireUuid } from "./Accounts.js"
import { type Asset, requireAsset } from "./Asset.js"
import { answeredInTime, CustodyProvider, type FeeQuote, type ProgressReporting, type TransferProgress } from "./CustodyProvider.js"
import * as DomainEvent from "./DomainEvent.js"
import * as FeeEstimate from "./FeeEstimate.js"
import * as Idempotency from "./Idempotency.js"
import { AccountId, Ids, LedgerEntryId, TransactionId, WhitelistedAddressId } from "./Ids.js"
import * as Money from "./Money.js"
import { operation } from "./Operation.js"
import * as Outbox from "./Outbox.js"
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
import { RelayConfig } from "./RelayConfig.js"
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
  input: Transaction.TransferInput,
  /** A read of the unit's own to issue with the source and the destination (in their round trip on PostgreSQL). */
  alongside: Effect.Effect<void, Storage.StorageError> = Effect.void
) {
  // Decoding already checked and lowered both ids; a caller of the Effect API may not have decoded.
  const sourceAccountId = yield* requireUuid("sourceAccountId", input.sourceAccountId)
  const destinationId = yield* requireUuid("destinationId", input.destinationId)
  const asset = yield* requireAsset(input.assetType)
  const amount = yield* Effect.fromResult(Money.parseAmount(input.amount, asset.precision, asset.assetId)).pipe(
    Effect.mapError(InvalidAmount.of)
  )
  // The source and the destination are read at once: one round trip where the store sends statements issued
  // together in one (PostgreSQL). Two accounts of one transfer are read (in a write unit: locked) in one global order,
  // ids ascending, so opposite transfers wait for each other instead of deadlocking. Both are judged afterwards, the
  // source first, so the refusals come in the same order as if they were read one by one.
  const readSource = unit.getAccount(AccountId.make(sourceAccountId))
  const readDestination = input.destinationType === "internal"
    ? Effect.map(unit.getAccount(AccountId.make(destinationId)), (found) => ({ internal: true as const, found }))
    : Effect.map(unit.getWhitelistedAddress(WhitelistedAddressId.make(destinationId)), (found) => ({ internal: false as const, found }))
  const [sourceFound, destination] = yield* (input.destinationType === "internal" && destinationId < sourceAccountId
    ? Effect.map(Effect.all([readDestination, readSource, alongside], { concurrency: 3 }), ([d, s]) => [s, d] as const)
    : Effect.map(Effect.all([readSource, readDestination, alongside], { concurrency: 3 }), ([s, d]) => [s, d] as const))
  // Only "absent or another client's" is the scope refusal; a storage failure (a lost race, a lost connection)
  // stays what it is, so the unit is re-run or the fault surfaces, never a 403 on the caller's own account.
  const source = yield* requireOwned<Account.Account>(caller, "account", sourceAccountId)(sourceFound).pipe(
    Effect.catchTag("NotFound", () => Effect.fail(new SourceAccountInaccessible({ accountId: sourceAccountId })))
  )
  if (source.assetId !== asset.assetId) {
    return yield* new AssetMismatch({ accountAssetId: source.assetId, requestedAssetType: input.assetType })
  }
  if (!Account.isActive(source)) return yield* new SourceAccountNotActive({ accountId: source.id, status: source.status })
  let destinationAddress: string | null
  if (destination.internal) {
    if (destinationId === source.id) return yield* new SameSourceAndDestination({ accountId: source.id })
    const eligible = Option.filter(destination.found, (d) => owns(caller, d) && Account.isActive(d) && d.assetId === source.assetId)
    destinationAddress = Option.isSome(eligible) ? eligible.value.address : null
  } else {
    const eligible = Option.filter(
      destination.found,
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
  now: Timestamp.Timestamp,
  actor: DomainEvent.Actor
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
  yield* DomainEvent.append(unit, {
    type: kind === "transfer_in" ? "funds.credited" : "funds.settled",
    clientId: account.clientId,
    entityId: account.id,
    actor,
    data: { accountId: account.id, amount, transactionId }
  })
})

/** The event each step of the transaction table records. */
const eventOf: Record<Transaction.TransactionEvent, DomainEvent.EventType> = {
  quorumReached: "transaction.quorum_reached",
  reject: "transaction.rejected",
  cancel: "transaction.cancelled",
  fail: "transaction.failed",
  providerApprove: "transaction.provider_approved",
  providerReject: "transaction.provider_rejected",
  broadcast: "transaction.broadcast",
  confirm: "transaction.completed"
}

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
  actor: DomainEvent.Actor,
  subStatus?: string
) {
  const status = yield* step(tx, event)
  let next: Transaction.Transaction = {
    ...tx,
    status,
    subStatus: subStatus ?? Transaction.subStatusAfter[event],
    updatedAt: now
  }
  yield* DomainEvent.append(unit, {
    type: eventOf[event] as "transaction.rejected",
    clientId: tx.clientId,
    entityId: tx.id,
    statusBefore: tx.status,
    statusAfter: status,
    actor,
    data: { subStatus: next.subStatus }
  })
  // The provider is called after commit, by the outbox worker: never inside this unit (see Outbox).
  if (event === "quorumReached") {
    next = { ...next, approvedAt: now }
    yield* Outbox.enqueue(unit, "submitTransfer", tx.clientId, tx.id)
  }
  if (event === "providerApprove") next = { ...next, providerApprovedAt: now }
  if (Transaction.groupOf[status] === "failed") {
    const source = yield* getAccountOrDie(unit, tx.sourceAccountId)
    yield* unit.updateAccount({ ...source, availableBalance: Money.add(source.availableBalance, tx.reserved), updatedAt: now })
    yield* DomainEvent.append(unit, {
      type: "funds.released",
      clientId: tx.clientId,
      entityId: source.id,
      actor,
      data: { accountId: source.id, amount: tx.reserved, transactionId: tx.id }
    })
  }
  if (status === "COMPLETED") {
    // The same global order as initiation (ids ascending) for the two accounts a completion credits and debits.
    if (tx.destinationType === "internal" && tx.destinationId < tx.sourceAccountId) yield* getAccountOrDie(unit, tx.destinationId)
    const source = yield* getAccountOrDie(unit, tx.sourceAccountId)
    yield* ledgerEntry(unit, source, "settlement", tx.reserved, tx.id, now, actor)
    if (tx.destinationType === "internal") {
      const destination = yield* getAccountOrDie(unit, tx.destinationId)
      yield* unit.updateAccount({
        ...destination,
        availableBalance: Money.add(destination.availableBalance, tx.amount),
        updatedAt: now
      })
      yield* ledgerEntry(unit, destination, "transfer_in", tx.amount, tx.id, now, actor)
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
  const found = yield* Storage.run(Storage.unitForPage(page), (unit) => unit.listTransactions(caller.clientId, filter, page))
  return Page.envelope({ items: found.items.map(Transaction.toListItem), total: found.total }, page)
})

export const get = operation("Transactions.get")(function*(principal: Principal, id: string) {
  const caller = yield* authorize(principal, "transactions.get")
  id = yield* requireUuid("id", id)
  return Transaction.toDetail(yield* Storage.run("lookup", (unit) => findOwned(unit, caller, id)))
})

export const status = operation("Transactions.status")(function*(principal: Principal, id: string) {
  const caller = yield* authorize(principal, "transactions.status")
  id = yield* requireUuid("id", id)
  return Transaction.toStatusView(yield* Storage.run("lookup", (unit) => findOwned(unit, caller, id)))
})

/**
 * The provider's fee for a validated transfer: the one provider call a request waits for. It runs outside any unit
 * of work, so no lock is held while the provider answers, and within `RelayConfig.providerCallTimeoutMillis`: a
 * provider that does not answer in time is a provider failure (the interface's 500), not a hung request.
 */
const feeFor = (asset: Asset, amount: Money.DecimalString) =>
  CustodyProvider.use((provider) => provider.estimateFee(asset, amount)).pipe(answeredInTime("estimateFee"))

/**
 * Estimates the network fee after exactly initiate's validation; stores nothing but, under an idempotency key,
 * the quote itself, so a retry gets the same quote (TXN-FEE-1, TXN-FEE-2). The fee is exact (see FeeEstimate);
 * `calculateFee` gives the interface's record with the fee as a JS number.
 */
export const quoteFee = operation("Transactions.quoteFee")(function*(
  principal: Principal,
  input: Transaction.TransferInput
) {
  const caller = yield* authorize(principal, "transactions.calculateFee")
  const replay = yield* Idempotency.earlyReplay(FeeEstimate.FeeQuote)
  if (Option.isSome(replay)) return replay.value
  const transfer = yield* Storage.run("lookup", (unit) => validateTransfer(unit, caller, input))
  const quote = yield* feeFor(transfer.asset, transfer.amount)
  return yield* Idempotency.remember(
    FeeEstimate.FeeQuote,
    FeeEstimate.quote(transfer.asset.assetId, transfer.amount, quote.fee, quote.feeAssetId)
  )
})

export const calculateFee = (principal: Principal, input: Transaction.TransferInput) =>
  Effect.map(quoteFee(principal, input), FeeEstimate.fromQuote)

/**
 * Initiates a transaction. The request is validated first, on what is committed, so a request the relay refuses
 * never reaches the provider and no provider failure hides its refusal; then priced (the provider's fee, outside any
 * unit of work); then one unit validates again against what it holds locked, reserves amount (plus fee when paid in
 * the same asset) from the source and stores the transaction, so concurrent initiations can never spend one balance
 * twice. It enters the source's approval workflow (TXN-INIT-2). Under an idempotency key it runs at most once.
 */
export const initiate = operation("Transactions.initiate")(function*(
  principal: Principal,
  input: Transaction.TransferInput
) {
  const caller = yield* authorize(principal, "transactions.initiate")
  const replay = yield* Idempotency.earlyReplay(Transaction.TransactionInitiated)
  if (Option.isSome(replay)) return replay.value
  const priced = yield* Storage.run("lookup", (unit) => validateTransfer(unit, caller, input))
  const quote = yield* feeFor(priced.asset, priced.amount)
  const id = TransactionId.make(yield* (yield* Ids).next)
  const now = yield* Timestamp.now
  return yield* Idempotency.write(Transaction.TransactionInitiated, (unit) => initiateIn(unit, caller, input, quote, id, now))
})

/** Initiation's unit of work: validated again against what it holds locked, then the reservation and the record. */
const initiateIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  caller: ClientPrincipal,
  input: Transaction.TransferInput,
  quote: FeeQuote,
  id: TransactionId,
  now: Timestamp.Timestamp
) {
  const actor = DomainEvent.apiUser(caller)
  // The events' subscriptions are read with the locked reads, in their round trip on PostgreSQL, rather than in one
  // of their own while the source is locked.
  const transfer = yield* validateTransfer(unit, caller, input, DomainEvent.readAheadAppend(unit, caller.clientId))
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
  yield* DomainEvent.append(unit, {
    type: "transaction.initiated",
    clientId: caller.clientId,
    entityId: id,
    statusAfter: created.status,
    actor,
    data: {
      sourceAccountId: created.sourceAccountId,
      destinationId: created.destinationId,
      destinationType: created.destinationType,
      amount: created.amount,
      assetType: created.assetType,
      networkFee: created.networkFee,
      requiredApprovals: created.requiredApprovals
    }
  })
  yield* DomainEvent.append(unit, {
    type: "funds.reserved",
    clientId: caller.clientId,
    entityId: transfer.source.id,
    actor,
    data: { accountId: transfer.source.id, amount: reserved, transactionId: id }
  })
  const stored = created.requiredApprovals === 0 ? yield* applyEvent(unit, created, "quorumReached", now, actor) : created
  yield* unit.insertTransaction(stored)
  return Transaction.toInitiated(stored)
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
    return yield* Idempotency.write(Transaction.TransactionDetail, (unit) => decideIn(unit, decision, caller, id, now))
  })

/** A decision's unit of work (see `decide`). */
const decideIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  decision: "approve" | "reject",
  caller: ClientPrincipal,
  id: string,
  now: Timestamp.Timestamp
) {
  const actor = DomainEvent.apiUser(caller)
  const tx = yield* DomainEvent.readingAhead(unit, caller.clientId, findOwned(unit, caller, id))
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
  if (decision === "approve") {
    yield* DomainEvent.append(unit, {
      type: "transaction.approved_by_approver",
      clientId: tx.clientId,
      entityId: tx.id,
      statusBefore: tx.status,
      statusAfter: tx.status,
      actor,
      data: { approvals, requiredApprovals: tx.requiredApprovals }
    })
  }
  const next = decision === "reject"
    ? yield* applyEvent(unit, decided, "reject", now, actor)
    : approvals >= decided.requiredApprovals
    ? yield* applyEvent(unit, decided, "quorumReached", now, actor)
    : decided
  yield* unit.updateTransaction(next)
  return Transaction.toDetail(next)
})

export const approve = decide("approve")
export const reject = decide("reject")

export type ProviderEvent = Transaction.ProviderEvent

const isProviderEvent = (event: unknown): event is ProviderEvent => (Transaction.providerEvents as ReadonlyArray<unknown>).includes(event)
const isFailureSubStatus = (subStatus: unknown) => (Transaction.failureSubStatuses as ReadonlyArray<unknown>).includes(subStatus)

/**
 * The custody provider reports progress on a transaction it was given (or fails one it holds): the entry point of
 * a receiver of the provider's own callbacks, and of the test control protocol.
 */
export const applyProviderEvent = operation("Transactions.applyProviderEvent")(function*(
  id: string,
  event: ProviderEvent,
  subStatus?: string
) {
  id = yield* requireUuid("id", id)
  if (!isProviderEvent(event)) {
    return yield* InvalidRequest.field("event", `must be one of ${Transaction.providerEvents.join(", ")}`)
  }
  // Only a failure says why, in words the interface lists; every other step shows its own (Transaction.subStatusAfter).
  if (subStatus !== undefined && !(event === "fail" && isFailureSubStatus(subStatus))) {
    return yield* InvalidRequest.field("subStatus", `is given only with fail, as one of ${Transaction.failureSubStatuses.join(", ")}`)
  }
  const now = yield* Timestamp.now
  return yield* Storage.run("write", (unit) => applyEventTo(unit, id, event, now, DomainEvent.provider, subStatus))
})

/** Applies `event` to the transaction with this id, in `unit`, and stores it. */
const applyEventTo = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  id: string,
  event: Transaction.TransactionEvent,
  now: Timestamp.Timestamp,
  actor: DomainEvent.Actor,
  subStatus?: string
) {
  const next = yield* applyEvent(unit, yield* findAny(unit, id), event, now, actor, subStatus)
  yield* unit.updateTransaction(next)
  return next
})

/**
 * Withdraws a transaction still awaiting its approvals (administration); its reservation is released. From its
 * quorum on it is the provider's (see Transaction.machine), and a cancel is refused as TransitionNotAllowed.
 */
export const cancel = operation("Transactions.cancel")(function*(id: string) {
  id = yield* requireUuid("id", id)
  const now = yield* Timestamp.now
  return yield* Storage.run("write", (unit) => applyEventTo(unit, id, "cancel", now, DomainEvent.operator))
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
const isAdvanceTarget = Schema.is(Transaction.AdvanceTarget)

export const advanceTo = operation("Transactions.advanceTo")(function*(id: string, target: Transaction.AdvanceTarget) {
  id = yield* requireUuid("id", id)
  if (!isAdvanceTarget(target)) {
    return yield* InvalidRequest.field("to", `must be one of ${Transaction.AdvanceTarget.literals.join(", ")}`)
  }
  const now = yield* Timestamp.now
  return yield* Storage.run("write", (unit) => advanceIn(unit, id, target, now))
})

const advanceIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  id: string,
  target: Transaction.AdvanceTarget,
  now: Timestamp.Timestamp
) {
  let tx = yield* findAny(unit, id)
  if (!Transaction.isOpen(tx.status)) {
    return yield* new TransitionNotAllowed({ entity: "transaction", id, status: tx.status, action: `advance to ${target}` })
  }
  if (target === "failed") {
    tx = yield* applyEvent(unit, tx, "fail", now, DomainEvent.operator)
  } else {
    for (let event = towardCompletion[tx.status]; event !== undefined; event = towardCompletion[tx.status]) {
      tx = yield* applyEvent(unit, tx, event, now, DomainEvent.operator)
    }
  }
  yield* unit.updateTransaction(tx)
  return tx
})

/** The transaction as stored, for administration and tests: no client scope. */
export const inspect = operation("Transactions.inspect")(function*(id: string) {
  id = yield* requireUuid("id", id)
  return yield* Storage.run("read", (unit) => findAny(unit, id))
})

/** The status each stage at the provider corresponds to, for a transfer that goes on toward completion. */
const statusAtStage: Record<"pending_policy" | "signed" | "broadcast" | "completed", Transaction.TransactionStatus> = {
  pending_policy: "PENDING_PROVIDER_APPROVAL",
  signed: "BROADCASTING",
  broadcast: "CONFIRMING",
  completed: "COMPLETED"
}
const order = Transaction.statuses

/**
 * The events that bring a transaction at `status` up to what the provider reports, one step of the table each, in
 * order: none for a report behind it, or for a transaction no longer pending or not yet handed to the provider.
 * A unit applies them to what it holds locked (`catchUp`); a look before the unit uses them to know whether the
 * unit will append events, and so should read what the events need with its first read.
 */
const stepsToward = (
  status: Transaction.TransactionStatus,
  progress: TransferProgress
): ReadonlyArray<Transaction.TransactionEvent> => {
  if (!Transaction.isOpen(status) || status === "AWAITING_SIGNATURE") return []
  if (progress.stage === "rejected" || progress.stage === "failed") {
    return [progress.stage === "rejected" && status === "PENDING_PROVIDER_APPROVAL" ? "providerReject" : "fail"]
  }
  const target = order.indexOf(statusAtStage[progress.stage])
  const events: Array<Transaction.TransactionEvent> = []
  for (let at: Transaction.TransactionStatus | undefined = status; at !== undefined && order.indexOf(at) < target;) {
    const event: Transaction.TransactionEvent | undefined = towardCompletion[at]
    if (event === undefined) break
    events.push(event)
    at = Result.getOrUndefined(StateMachine.transition(Transaction.machine, at, event))
  }
  return events
}

/** Brings a transaction up to what the provider reports (`stepsToward`), in `unit`, each step its own event. */
const catchUp = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  tx: Transaction.Transaction,
  progress: TransferProgress,
  now: Timestamp.Timestamp
) {
  const subStatus = progress.stage === "rejected" || progress.stage === "failed" ? progress.subStatus : undefined
  let next = tx
  for (const event of stepsToward(tx.status, progress)) {
    next = yield* applyEvent(unit, next, event, now, DomainEvent.provider, subStatus)
  }
  return next
})

/**
 * The provider reports where a transfer it holds stands (a pushed callback, see ProviderReports): the transaction
 * is caught up to it, one step of the table at a time, each step an event. A report behind the transaction
 * changes nothing.
 */
export const applyProviderProgress = operation("Transactions.applyProviderProgress")(function*(
  id: string,
  progress: TransferProgress
) {
  id = yield* requireUuid("id", id)
  const now = yield* Timestamp.now
  return yield* Storage.run("write", (unit) => catchUpTo(unit, findAny(unit, id), progress, now))
})

/**
 * A pushed report about the transfer `submission` (the outbox entry that handed it to the provider) applied as
 * `applyProviderProgress` does. The entry names the client, so the transaction is read with the look at the
 * client's webhook subscriptions its events need: a provider pushes a report when the transfer moved.
 */
export const applyReportedProgress = operation("Transactions.applyReportedProgress")(function*(
  submission: Outbox.OutboxEntry,
  progress: TransferProgress
) {
  const now = yield* Timestamp.now
  return yield* Storage.run("write", (unit) =>
    catchUpTo(unit, DomainEvent.readingAhead(unit, submission.clientId, findAny(unit, submission.subjectId)), progress, now))
})

/** Catches the transaction `read` finds up to `progress`, in `unit`, and stores it if that changed it. */
const catchUpTo = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  read: Effect.Effect<Transaction.Transaction, NotFound | Storage.StorageError>,
  progress: TransferProgress,
  now: Timestamp.Timestamp
) {
  const current = yield* read
  const next = yield* catchUp(unit, current, progress, now)
  if (next !== current) yield* unit.updateTransaction(next)
  return next
})

/**
 * An outbox effect's look at its transaction before it calls the provider: a lookup (no transaction of its own),
 * since the unit after the call reads the transaction again, locked, and decides on that.
 */
const lookBefore = (entry: Outbox.OutboxEntry) =>
  Storage.run("lookup", (unit) => findAny(unit, entry.subjectId)).pipe(Effect.orDie)

const followEvery = (config: { readonly providerPollMillis: number }, now: number) =>
  Timestamp.fromMillis(now + config.providerPollMillis)

/**
 * Outbox effect: hands an approved transfer to the provider (request id: the entry's id), then, in one unit,
 * records the provider's id and starts following it. A transaction cancelled or failed meanwhile is not sent.
 */
export const submitToProvider = Effect.fnUntraced(function*(entry: Outbox.OutboxEntry) {
  const tx = yield* lookBefore(entry)
  if (tx.status !== "PENDING_PROVIDER_APPROVAL" || tx.providerTransactionId !== null) {
    return yield* Storage.run("write", (unit) => Outbox.settle(unit, entry, Outbox.done))
  }
  const provider = yield* CustodyProvider
  const asset = yield* requireAsset(tx.assetType).pipe(Effect.orDie)
  const { providerTransactionId } = yield* provider.submitTransfer({
    requestId: entry.id,
    transactionId: tx.id,
    asset,
    amount: tx.amount,
    sourceAccountId: tx.sourceAccountId,
    destinationAddress: tx.destinationAddress
  })
  const now = yield* Timestamp.now
  yield* Storage.run("write", (unit) => recordSubmission(unit, entry, tx.id, providerTransactionId, provider.progressReporting, now))
})

/**
 * In one unit: the provider's id on a transaction still open, the start of following it, the entry settled. The
 * transaction is read with the look at its client's webhook subscriptions its event needs (the entry names the
 * client), as a client's command reads.
 */
const recordSubmission = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  entry: Outbox.OutboxEntry,
  transactionId: string,
  providerTransactionId: string,
  progressReporting: ProgressReporting,
  now: Timestamp.Timestamp
) {
  const current = yield* DomainEvent.readingAhead(unit, entry.clientId, findAny(unit, transactionId)).pipe(Effect.orDie)
  if (current.providerTransactionId === null && Transaction.isOpen(current.status)) {
    yield* unit.updateTransaction({ ...current, providerTransactionId, updatedAt: now })
    yield* DomainEvent.append(unit, {
      type: "transaction.submitted",
      clientId: current.clientId,
      entityId: current.id,
      statusBefore: current.status,
      statusAfter: current.status,
      actor: DomainEvent.system,
      data: { providerTransactionId }
    })
    if (progressReporting === "polled") yield* Outbox.enqueue(unit, "followTransfer", current.clientId, current.id)
  } else if (current.providerTransactionId === null) {
    // Closed while the call was out (an operator failed it): its funds were released, yet the provider took the order.
    yield* Effect.logError("the provider accepted a transfer the relay had already closed; settle it with the provider").pipe(
      Effect.annotateLogs({ transaction: current.id, status: current.status, providerTransactionId, request: entry.id })
    )
  }
  yield* Outbox.settle(unit, entry, Outbox.done)
})

/** Outbox effect: asks the provider where a submitted transfer stands and catches the transaction up. */
export const followAtProvider = Effect.fnUntraced(function*(entry: Outbox.OutboxEntry) {
  const tx = yield* lookBefore(entry)
  if (!Transaction.isOpen(tx.status) || tx.providerTransactionId === null) {
    return yield* Storage.run("write", (unit) => Outbox.settle(unit, entry, Outbox.done))
  }
  const progress = yield* (yield* CustodyProvider).transferProgress(tx.providerTransactionId)
  const config = yield* RelayConfig
  const nowMillis = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
  const now = Timestamp.fromMillis(nowMillis)
  const followAgainAt = followEvery(config, nowMillis)
  // Read ahead only when the report moves the transaction as it stood at the look: most polls move nothing.
  const moves = stepsToward(tx.status, progress).length > 0
  yield* Storage.run("write", (unit) => recordProgress(unit, entry, tx.id, progress, now, followAgainAt, moves))
})

/** In one unit: the transaction caught up to the provider's progress, the entry settled or due again if still open. */
const recordProgress = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  entry: Outbox.OutboxEntry,
  transactionId: string,
  progress: TransferProgress,
  now: Timestamp.Timestamp,
  followAgainAt: Timestamp.Timestamp,
  /** The report moves the transaction as the look found it: read the client's subscriptions with it. */
  moves: boolean
) {
  const read = findAny(unit, transactionId)
  const next = yield* catchUpTo(unit, moves ? DomainEvent.readingAhead(unit, entry.clientId, read) : read, progress, now).pipe(Effect.orDie)
  yield* Outbox.settle(unit, entry, Transaction.isOpen(next.status) ? Outbox.again(followAgainAt) : Outbox.done)
})

/**
 * What follows when the provider refuses a transfer's submission (the outbox gives it up at once; a submission
 * whose outcome is unknown is retried until answered, see OutboxWorker): the transfer fails (PROVIDER_ERROR) and
 * its reservation is released, so funds are never held by a transfer that will not happen, and never released for
 * an order the provider may hold.
 */
export const failUnsubmitted = Effect.fnUntraced(function*(unit: Storage.StorageUnit, transactionId: string) {
  const tx = yield* findAny(unit, transactionId)
  if (!Transaction.isOpen(tx.status) || tx.providerTransactionId !== null) return
  const now = yield* Timestamp.now
  yield* unit.updateTransaction(yield* applyEvent(unit, tx, "fail", now, DomainEvent.system, "PROVIDER_ERROR"))
})
