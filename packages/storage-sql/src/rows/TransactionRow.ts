/**
 * A transaction as a `transactions` row and back. The creator is two columns; the approvers' decisions are a JSON
 * array, always read and written whole with the transaction, decoded on the way in. The row also carries the
 * status group (`Transaction.groupOf`), so the list's group filter is an index range.
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

export const decode = (row: TransactionsTable): Transaction.Transaction => ({
  id: row.id,
  clientId: row.client_id,
  sourceAccountId: row.source_account_id,
  destinationId: row.destination_id,
  destinationType: row.destination_type,
  destinationAddress: row.destination_address,
  amount: Money.canonical(row.amount),
  assetType: row.asset_type,
  networkFee: Money.canonical(row.network_fee),
  feeAssetId: row.fee_asset_id,
  reserved: Money.canonical(row.reserved),
  status: row.status,
  subStatus: row.sub_status,
  requiredApprovals: row.required_approvals,
  createdBy: { apiUserId: row.created_by_api_user_id, name: row.created_by_name },
  // Most transactions have no decision yet: skip the decoder for the common row.
  decisions: row.decisions === NO_DECISIONS ? [] : decodeDecisions(row.decisions),
  providerTransactionId: row.provider_transaction_id,
  approvedAt: row.approved_at,
  providerApprovedAt: row.provider_approved_at,
  createdAt: row.created_at,
  updatedAt: row.updated_at
})
