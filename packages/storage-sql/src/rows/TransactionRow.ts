/**
 * A transaction as a `transactions` row and back, and a list's summary of one from the columns a list reads. The
 * creator is two columns; the approvers' decisions are a JSON array, always read and written whole with the
 * transaction, decoded on the way in. The row also carries the status group (`Transaction.groupOf`), so the list's
 * group filter is an index range.
 */
import { Money, Transaction } from "@custody-relay/core"
import { Schema } from "effect"
import type { TransactionsTable } from "../schema/Database.js"

const decodeDecisions = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Array(Transaction.Decision)))

const NO_DECISIONS = "[]"

export const encode = (tx: Transaction.Transaction): TransactionsTable => ({
  id: tx.id,
  client_id: tx.clientId,
  source_account_id: tx.sourceAccountId,
  destination_id: tx.destinationId,
  destination_type: tx.destinationType,
  destination_address: tx.destinationAddress,
  amount: tx.amount,
  asset_type: tx.assetType,
  network_fee: tx.networkFee,
  fee_asset_id: tx.feeAssetId,
  reserved: tx.reserved,
  status: tx.status,
  status_group: Transaction.groupOf[tx.status],
  sub_status: tx.subStatus,
  required_approvals: tx.requiredApprovals,
  created_by_api_user_id: tx.createdBy.apiUserId,
  created_by_name: tx.createdBy.name,
  decisions: tx.decisions.length === 0 ? NO_DECISIONS : JSON.stringify(tx.decisions),
  provider_transaction_id: tx.providerTransactionId,
  approved_at: tx.approvedAt,
  provider_approved_at: tx.providerApprovedAt,
  created_at: tx.createdAt,
  updated_at: tx.updatedAt
})

/** The columns a list reads: what `Transaction.TransactionSummary` holds, so a list's rows carry nothing else. */
export const summaryColumns = [
  "id", "source_account_id", "destination_id", "destination_type", "amount", "asset_type", "network_fee", "status",
  "created_at", "updated_at"
] as const satisfies ReadonlyArray<keyof TransactionsTable>

export type SummaryRow = Pick<TransactionsTable, (typeof summaryColumns)[number]>

export const decodeSummary = (row: SummaryRow): Transaction.TransactionSummary => ({
  id: row.id,
  sourceAccountId: row.source_account_id,
  destinationId: row.destination_id,
  destinationType: row.destination_type,
  amount: Money.canonical(row.amount),
  assetType: row.asset_type,
  networkFee: Money.canonical(row.network_fee),
  status: row.status,
  createdAt: row.created_at,
  updatedAt: row.updated_at
})

export const decode = (row: TransactionsTable): Transaction.Transaction => ({
  ...decodeSummary(row),
  clientId: row.client_id,
  destinationAddress: row.destination_address,
  feeAssetId: row.fee_asset_id,
  reserved: Money.canonical(row.reserved),
  subStatus: row.sub_status,
  requiredApprovals: row.required_approvals,
  createdBy: { apiUserId: row.created_by_api_user_id, name: row.created_by_name },
  // Most transactions have no decision yet: skip the decoder for the common row.
  decisions: row.decisions === NO_DECISIONS ? [] : decodeDecisions(row.decisions),
  providerTransactionId: row.provider_transaction_id,
  approvedAt: row.approved_at,
  providerApprovedAt: row.provider_approved_at
})
