/**
 * Reconciliation: proves an account's balance from first principles. The available balance must equal the
 * ledger's credits minus its debits minus the reservations of the account's open transactions, and can never be
 * negative. Used by the crash and concurrency proofs and available to operators.
 */
import { Effect, Option } from "effect"
import { requireUuid } from "./Accounts.js"
import { AccountId } from "./Ids.js"
import * as Money from "./Money.js"
import { operation } from "./Operation.js"
import { NotFound } from "./RelayError.js"
import * as Storage from "./Storage.js"

export interface AccountReconciliation {
  readonly accountId: string
  readonly availableBalance: Money.DecimalString
  readonly credits: Money.DecimalString
  readonly debits: Money.DecimalString
  readonly reserved: Money.DecimalString
  readonly expectedAvailable: Money.DecimalString
  readonly consistent: boolean
}

export const reconcileAccount = operation("Reconciliation.reconcileAccount")(function*(accountId: string) {
  accountId = yield* requireUuid("accountId", accountId)
  return yield* Storage.run("read", (unit) => reconcileIn(unit, accountId))
})

const reconcileIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  accountId: string
) {
  const found = yield* unit.getAccount(AccountId.make(accountId))
  if (Option.isNone(found)) return yield* new NotFound({ resource: "account", id: accountId })
  const account = found.value
  const entries = yield* unit.listLedgerEntries(account.id)
  const open = yield* unit.listOpenTransactionsFrom(account.id)
  const credits = Money.sum(entries.filter((e) => e.direction === "credit").map((e) => e.amount))
  const debits = Money.sum(entries.filter((e) => e.direction === "debit").map((e) => e.amount))
  const reserved = Money.sum(open.map((t) => t.reserved))
  const expectedAvailable = Money.subtract(Money.subtract(credits, debits), reserved)
  return {
    accountId: account.id,
    availableBalance: account.availableBalance,
    credits,
    debits,
    reserved,
    expectedAvailable,
    consistent: Money.compare(expectedAvailable, account.availableBalance) === 0 &&
      !Money.isNegative(account.availableBalance)
  } satisfies AccountReconciliation
})
