/** The ledger (core `Storage.LedgerStore`) on SQL. */
import type { Storage } from "@custody-relay/core"
import { Effect } from "effect"
import * as LedgerEntryRow from "../rows/LedgerEntryRow.js"
import type { StoreArguments } from "../SqlUnit.js"

export const store = ({ db, engine, statements: { rows, writeLater }, compiled: { writes } }: StoreArguments): Storage.LedgerStore => ({
  insertLedgerEntry(entry) {
    return writeLater(writes.insertLedgerEntry(LedgerEntryRow.encode(entry)), 1, `ledger_entries ${entry.id}`, true)
  },
  listLedgerEntries(accountId) {
    return Effect.map(
      rows(
        db.selectFrom("ledger_entries").selectAll().where("account_id", "=", engine.opaque.text(accountId))
          .orderBy("created_at").orderBy("id")
      ),
      (found) => found.map(LedgerEntryRow.decode)
    )
  }
})
