/** Custody accounts (core `Storage.AccountStore`) on SQL. */
import type { Storage } from "@custody-relay/core"
import { Effect } from "effect"
import { sql } from "kysely"
import * as AccountRow from "../rows/AccountRow.js"
import { countOf, emptyPage, keepingRead, matchesNothing, optional, pageOf, type StoreArguments, updating } from "../SqlUnit.js"
import { accountListValues } from "../StoreStatements.js"

export const store = (
  { db, statements: { first, rows, writeLater }, mode, compiled: { lists, lookups, writes }, read, locking }: StoreArguments
): Storage.AccountStore => {
  const accountById = keepingRead(mode, read.accounts, AccountRow.decode)
  const update = updating(writeLater, locking)
  return {
    insertAccount(account) {
      return writeLater(db.insertInto("accounts").values(AccountRow.encode(account)), 1, `accounts ${account.id}`, true)
    },
    getAccount(id) {
      return Effect.map(first(lookups.account[locking](id)), accountById)
    },
    findAccountByIdentity(clientId, identity) {
      return Effect.map(
        first(
          db.selectFrom("accounts").selectAll()
            .where("client_id", "=", clientId)
            .where("name", "=", identity.name)
            .where("workspace", "=", identity.workspace)
            .where("asset_id", "=", identity.assetId)
            .where("role", "=", identity.role)
            // A literal, not a parameter: SQLite uses the partial unique index only when it can see the predicate.
            .where("status", "<>", sql.lit("rejected"))
        ),
        optional(AccountRow.decode)
      )
    },
    updateAccount(account) {
      const { client_id: _, created_at: __, ...next } = AccountRow.encode(account)
      return update(read.accounts, next, writes.updateAccount, "accounts")
    },
    listAccounts(clientId, filter, request) {
      const values = accountListValues(clientId, filter)
      if (matchesNothing(values)) return Effect.succeed(emptyPage)
      return pageOf({
        first: (limit) => rows(lists.accountsFirst({ ...values, limit })),
        rows: (limit, offset, fromOldest) => rows(lists.accountsPage({ ...values, limit, offset }, fromOldest)),
        count: () => Effect.map(first(lists.accountsTotal(values)), countOf)
      }, AccountRow.decode, request, mode)
    }
  }
}
