/**
 * The ledger: every movement of funds into or out of an account's balance that is final. Deposits and internal
 * transfers in are credits; a completed transaction's settlement is a debit. Together with the reservations of
 * open transactions it explains every balance: available = credits - debits - open reservations, always.
 */
import { Schema } from "effect"
import { AccountId, ClientId, LedgerEntryId } from "./Ids.js"
import { DecimalString } from "./Money.js"
import { Timestamp } from "./Timestamp.js"

export const LedgerEntryKind = Schema.Literals(["deposit", "transfer_in", "settlement"])
export type LedgerEntryKind = typeof LedgerEntryKind.Type

export const LedgerEntry = Schema.Struct({
  id: LedgerEntryId,
  clientId: ClientId,
  accountId: AccountId,
  kind: LedgerEntryKind,
  direction: Schema.Literals(["credit", "debit"]),
  /** Always positive; `direction` gives the sign. */
  amount: DecimalString,
  /** The transaction behind a transfer or settlement; null for a deposit. */
  transactionId: Schema.NullOr(Schema.String),
  createdAt: Timestamp
})
export type LedgerEntry = typeof LedgerEntry.Type
