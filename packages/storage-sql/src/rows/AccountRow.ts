/**
 * An account as an `accounts` row and back. The row also carries the JavaScript lower-case of the searchable
 * fields (see `Database`), derived here, on every write, from the one function the memory store uses.
 */
import { type Account, Money } from "@custody-relay/core"
import type { AccountsTable } from "../schema/Database.js"

/** How the account search folds case: the same `toLowerCase` as `Storage.accountMatches`. */
export const fold = (text: string): string => text.toLowerCase()

export const encode = (account: Account.Account): AccountsTable => ({
  id: account.id,
  client_id: account.clientId,
  name: account.name,
  name_folded: fold(account.name),
  description: account.description,
  workspace: account.workspace,
  role: account.role,
  asset_id: account.assetId,
  asset_id_folded: fold(account.assetId),
  chain_type: account.chainType,
  address: account.address,
  address_folded: account.address === null ? null : fold(account.address),
  status: account.status,
  available_balance: account.availableBalance,
  required_approvals: account.requiredApprovals,
  created_at: account.createdAt,
  updated_at: account.updatedAt
})

export const decode = (row: AccountsTable): Account.Account => ({
  id: row.id,
  clientId: row.client_id,
  name: row.name,
  description: row.description,
  workspace: row.workspace,
  role: row.role,
  assetId: row.asset_id,
  chainType: row.chain_type,
  address: row.address,
  status: row.status,
  availableBalance: Money.canonical(row.available_balance),
  requiredApprovals: row.required_approvals,
  createdAt: row.created_at,
  updatedAt: row.updated_at
})
