/**
 * Outgoing custody transactions and their lifecycle, our profile of TXN-FLOW-1, modelled on how custody providers
 * report theirs: a transaction waits for its quorum of approvers (AWAITING_SIGNATURE), then for the custody
 * provider's own policy (PENDING_PROVIDER_APPROVAL), is broadcast (BROADCASTING), waits for confirmations
 * (CONFIRMING) and ends COMPLETED, or ends REJECTED (an approver or the provider said no), CANCELLED (withdrawn
 * while it awaited its approvals) or FAILED (the provider or the network failed it). Once the quorum is reached the
 * transfer is the provider's to carry out or refuse: the relay cannot call it back (the provider port has no cancel),
 * so a cancel from then on would release funds the provider may still send. Reads show the status in upper case; the
 * initiate response shows the same state in lower case (TXN-INIT-1). Every status belongs to exactly one list
 * group (TXN-LIST-2), and the reservation of funds is open exactly while the status is in the pending group.
 */
import { Schema, Struct } from "effect"
import { AccountId, ApiUserId, ClientId, TransactionId, UuidInput } from "./Ids.js"
import { FilterText } from "./Input.js"
import { DecimalString } from "./Money.js"
import * as StateMachine from "./StateMachine.js"
import { Timestamp } from "./Timestamp.js"

export const statuses = [
  "AWAITING_SIGNATURE",
  "PENDING_PROVIDER_APPROVAL",
  "BROADCASTING",
  "CONFIRMING",
  "COMPLETED",
  "REJECTED",
  "CANCELLED",
  "FAILED"
] as const
export const TransactionStatus = Schema.Literals(statuses)
export type TransactionStatus = typeof TransactionStatus.Type

export const statusGroups = ["completed", "pending", "failed"] as const
export type StatusGroup = (typeof statusGroups)[number]

/** The list-filter group of each status: one table, read by the list filter, the profile and the docs. */
export const groupOf: Record<TransactionStatus, StatusGroup> = {
  AWAITING_SIGNATURE: "pending",
  PENDING_PROVIDER_APPROVAL: "pending",
  BROADCASTING: "pending",
  CONFIRMING: "pending",
  COMPLETED: "completed",
  REJECTED: "failed",
  CANCELLED: "failed",
  FAILED: "failed"
}

export const statusesIn = (group: StatusGroup): ReadonlyArray<TransactionStatus> =>
  statuses.filter((s) => groupOf[s] === group)

/** A transaction holds a reservation on its source's balance exactly while it is pending. */
export const isOpen = (status: TransactionStatus): boolean => groupOf[status] === "pending"

export const machine = StateMachine.make({
  entity: "transaction",
  states: statuses,
  initial: "AWAITING_SIGNATURE",
  transitions: [
    { from: "AWAITING_SIGNATURE", event: "quorumReached", to: "PENDING_PROVIDER_APPROVAL" },
    { from: "AWAITING_SIGNATURE", event: "reject", to: "REJECTED" },
    { from: "AWAITING_SIGNATURE", event: "cancel", to: "CANCELLED" },
    { from: "AWAITING_SIGNATURE", event: "fail", to: "FAILED" },
    { from: "PENDING_PROVIDER_APPROVAL", event: "providerApprove", to: "BROADCASTING" },
    { from: "PENDING_PROVIDER_APPROVAL", event: "providerReject", to: "REJECTED" },
    { from: "PENDING_PROVIDER_APPROVAL", event: "fail", to: "FAILED" },
    { from: "BROADCASTING", event: "broadcast", to: "CONFIRMING" },
    { from: "BROADCASTING", event: "fail", to: "FAILED" },
    { from: "CONFIRMING", event: "confirm", to: "COMPLETED" },
    { from: "CONFIRMING", event: "fail", to: "FAILED" }
  ]
} as const)
export type TransactionEvent = (typeof machine.transitions)[number]["event"]

/** The sub-status a transaction shows after each event (null: nothing more to say). */
export const subStatusAfter: Record<TransactionEvent, string | null> = {
  quorumReached: "PENDING_PROVIDER_POLICY",
  reject: "REJECTED_BY_APPROVER",
  cancel: "CANCELLED_BY_USER",
  fail: "PROVIDER_ERROR",
  providerApprove: "SIGNED",
  providerReject: "BLOCKED_BY_PROVIDER_POLICY",
  broadcast: "PENDING_BLOCKCHAIN_CONFIRMATIONS",
  confirm: "CONFIRMED"
}

/** Sub-statuses a failure may name, for providers that say why. */
export const failureSubStatuses = ["PROVIDER_ERROR", "TIMED_OUT", "INSUFFICIENT_FUNDS_AT_PROVIDER", "DROPPED_BY_NETWORK"] as const

/**
 * The events a custody provider reports on a transfer it holds (`Transactions.applyProviderEvent`). The client's and
 * the approvers' own events (quorumReached, reject, cancel) are not among them: a report never stands in for a
 * decision.
 */
export const providerEvents = ["providerApprove", "providerReject", "broadcast", "confirm", "fail"] as const satisfies ReadonlyArray<TransactionEvent>
export type ProviderEvent = (typeof providerEvents)[number]

/** Where an operator may move a pending transaction at once (`Transactions.advanceTo`, the control protocol's advance). */
export const AdvanceTarget = Schema.Literals(["completed", "failed"])
export type AdvanceTarget = typeof AdvanceTarget.Type

export const DestinationType = Schema.Literals(["internal", "external"])
export type DestinationType = typeof DestinationType.Type

/** Reads name the destination kind differently from the initiate request and response (TXN-SHAPE-1). */
export const readDestinationType = { internal: "internal_wallet", external: "external_wallet" } as const

export const Actor = Schema.Struct({ apiUserId: ApiUserId, name: Schema.String })
export type Actor = typeof Actor.Type

export const Decision = Schema.Struct({
  apiUserId: ApiUserId,
  name: Schema.String,
  decision: Schema.Literals(["approve", "reject"]),
  at: Timestamp
})
export type Decision = typeof Decision.Type

export const Transaction = Schema.Struct({
  id: TransactionId,
  clientId: ClientId,
  sourceAccountId: AccountId,
  destinationId: Schema.String,
  destinationType: DestinationType,
  /** The address the funds go to, fixed at initiation. */
  destinationAddress: Schema.String,
  amount: DecimalString,
  assetType: Schema.String,
  networkFee: DecimalString,
  feeAssetId: Schema.String,
  /** Taken from the source's available balance at initiation: the amount, plus the fee when paid in the same asset. */
  reserved: DecimalString,
  status: TransactionStatus,
  subStatus: Schema.NullOr(Schema.String),
  requiredApprovals: Schema.Int,
  createdBy: Actor,
  decisions: Schema.Array(Decision),
  providerTransactionId: Schema.NullOr(Schema.String),
  approvedAt: Schema.NullOr(Timestamp),
  providerApprovedAt: Schema.NullOr(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type Transaction = typeof Transaction.Type

/** Body of calculate-fee and initiate (TXN-VAL-1); the amount stays a string until the asset's precision is known. */
export const TransferInput = Schema.Struct({
  sourceAccountId: UuidInput,
  destinationId: UuidInput,
  destinationType: DestinationType,
  amount: Schema.String.check(Schema.isMaxLength(128)),
  assetType: Schema.String.check(Schema.isMaxLength(64))
}).annotate({
  // The demo's Treasury BTC account to its whitelisted address (ids as `pnpm start` prints them).
  examples: [{
    sourceAccountId: "01a20be5-059d-75f7-9d81-50df97d6f492",
    destinationId: "01a20be5-05a9-746b-8ca3-fe06c87e075f",
    destinationType: "external",
    amount: "0.1",
    assetType: "BTC"
  }]
})
export type TransferInput = typeof TransferInput.Type

const ReadDestinationType = Schema.Literals(["internal_wallet", "external_wallet"])

/** The fields a list record shows as stored (TXN-SHAPE-1); the destination type is shown in its read form. */
const listedFields = [
  "id", "sourceAccountId", "destinationId", "amount", "assetType", "networkFee", "status", "createdAt", "updatedAt"
] as const

const summaryFields = [...listedFields, "destinationType"] as const

/**
 * What a list of transactions needs of each: the list record's fields, and the destination type as stored. A
 * store's list reads only these (`Storage.TransactionStore.listTransactions`).
 */
export type TransactionSummary = Pick<Transaction, (typeof summaryFields)[number]>

export const summaryOf = (tx: Transaction): TransactionSummary => Struct.pick(tx, summaryFields)

/** List record (TXN-SHAPE-1). */
export const TransactionListItem = Transaction.mapFields(Struct.pick(listedFields)).mapFields(
  Struct.assign({ destinationType: ReadDestinationType, direction: Schema.Literal("OUT") })
)
export type TransactionListItem = typeof TransactionListItem.Type

export const Approvals = Schema.Struct({
  createdBy: Schema.NullOr(Schema.String),
  createdAt: Schema.NullOr(Schema.String),
  signedBy: Schema.NullOr(Schema.String),
  signedAt: Schema.NullOr(Schema.String),
  approvedBy: Schema.NullOr(Schema.String),
  approvedAt: Schema.NullOr(Schema.String),
  providerApprovedAt: Schema.NullOr(Schema.String),
  rejectedBy: Schema.NullOr(Schema.String),
  rejectedAt: Schema.NullOr(Schema.String)
})
export type Approvals = typeof Approvals.Type

/** Detail record (TXN-SHAPE-2). */
export const TransactionDetail = TransactionListItem.mapFields(Struct.omit(["destinationType", "direction"])).mapFields(
  Struct.assign({
    providerTransactionId: Schema.NullOr(Schema.String),
    destinationType: ReadDestinationType,
    subStatus: Schema.NullOr(Schema.String),
    approvals: Approvals,
    direction: Schema.Literal("OUT"),
    transactionType: Schema.Literal("WITHDRAWAL")
  })
)
export type TransactionDetail = typeof TransactionDetail.Type

/** Status record (TXN-SHAPE-4). */
export const TransactionStatusView = Transaction.mapFields(Struct.pick(["id", "status", "subStatus", "updatedAt"]))
export type TransactionStatusView = typeof TransactionStatusView.Type

export const lowerCaseStatuses = statuses.map((s) => s.toLowerCase() as Lowercase<TransactionStatus>)

/** Initiate response (TXN-INIT-1): the status in lower case, the destination type as sent. */
export const TransactionInitiated = Transaction.mapFields(
  Struct.pick(["id", "sourceAccountId", "destinationId", "destinationType", "amount", "assetType", "createdAt"])
).mapFields(Struct.assign({ status: Schema.Literals(lowerCaseStatuses) }))
export type TransactionInitiated = typeof TransactionInitiated.Type

/** Filters of GET /relay/v1/transactions (TXN-LIST-1). */
export interface TransactionFilter {
  /** Transactions whose source is this account. */
  readonly accountId?: string
  readonly assetType?: string
  readonly group?: StatusGroup
}

/** A TransactionFilter as an untyped caller passes it, checked as HTTP checks its query (the Promise facade decodes it). */
export const TransactionFilterInput = Schema.Struct({
  accountId: Schema.optionalKey(FilterText(64)),
  assetType: Schema.optionalKey(FilterText(64)),
  group: Schema.optionalKey(Schema.Literals(statusGroups))
})

export const approvalsOf = (tx: Transaction): Approvals => {
  const approvals = tx.decisions.filter((d) => d.decision === "approve")
  const rejection = tx.decisions.find((d) => d.decision === "reject")
  const first = approvals[0]
  const quorum = tx.approvedAt === null ? undefined : approvals[approvals.length - 1]
  return {
    createdBy: tx.createdBy.name,
    createdAt: tx.createdAt,
    signedBy: first?.name ?? null,
    signedAt: first?.at ?? null,
    approvedBy: quorum?.name ?? null,
    approvedAt: tx.approvedAt,
    providerApprovedAt: tx.providerApprovedAt,
    rejectedBy: rejection?.name ?? null,
    rejectedAt: rejection?.at ?? null
  }
}

export const toListItem = (tx: TransactionSummary): TransactionListItem => ({
  id: tx.id,
  sourceAccountId: tx.sourceAccountId,
  destinationId: tx.destinationId,
  destinationType: readDestinationType[tx.destinationType],
  amount: tx.amount,
  assetType: tx.assetType,
  networkFee: tx.networkFee,
  status: tx.status,
  direction: "OUT",
  createdAt: tx.createdAt,
  updatedAt: tx.updatedAt
})

export const toDetail = (tx: Transaction): TransactionDetail => ({
  id: tx.id,
  providerTransactionId: tx.providerTransactionId,
  sourceAccountId: tx.sourceAccountId,
  destinationId: tx.destinationId,
  destinationType: readDestinationType[tx.destinationType],
  amount: tx.amount,
  assetType: tx.assetType,
  status: tx.status,
  subStatus: tx.subStatus,
  approvals: approvalsOf(tx),
  direction: "OUT",
  transactionType: "WITHDRAWAL",
  networkFee: tx.networkFee,
  createdAt: tx.createdAt,
  updatedAt: tx.updatedAt
})

export const toStatusView = (tx: Transaction): TransactionStatusView => ({
  id: tx.id,
  status: tx.status,
  subStatus: tx.subStatus,
  updatedAt: tx.updatedAt
})

export const toInitiated = (tx: Transaction): TransactionInitiated => ({
  id: tx.id,
  status: tx.status.toLowerCase() as Lowercase<TransactionStatus>,
  sourceAccountId: tx.sourceAccountId,
  destinationId: tx.destinationId,
  destinationType: tx.destinationType,
  amount: tx.amount,
  assetType: tx.assetType,
  createdAt: tx.createdAt
})
