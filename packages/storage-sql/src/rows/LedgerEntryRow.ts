/** A ledger entry as a `ledger_entries` row and back. */
import { type Ledger, Money } from "@custody-relay/core"
import type { LedgerEntriesTable } from "../schema/Database.js"

export const encode = (entry: Ledger.LedgerEntry): LedgerEntriesTable => ({
  id: entry.id,
  client_id: entry.clientId,
  account_id: entry.accountId,
  kind: entry.kind,
  direction: entry.direction,
  amount: entry.amount,
  transaction_id: entry.transactionId,
  created_at: entry.createdAt
})

export const decode = (row: LedgerEntriesTable): Ledger.LedgerEntry => ({
  id: row.id,
  clientId: row.client_id,
  accountId: row.account_id,
  kind: row.kind,
  direction: row.direction,
  amount: Money.canonical(row.amount),
  transactionId: row.transaction_id,
  createdAt: row.created_at
})
