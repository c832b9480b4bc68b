/**
 * Transactions (core `Storage.TransactionStore`) on SQL, with the counter rows list totals are summed from
 * (migration 4), kept in the same unit as the transactions themselves.
 */
import type { Storage } from "@custody-relay/core"
import { Effect } from "effect"
import { sql } from "kysely"
import type { ListReads } from "../PageBoundaries.js"
import * as TransactionRow from "../rows/TransactionRow.js"
import type { TransactionsTable } from "../schema/Database.js"
import { countOf, emptyPage, keepingRead, matchesNothing, pageOf, type StoreArguments, updating } from "../SqlUnit.js"
import { transactionListValues } from "../StoreStatements.js"

export const store = (
  { db, engine, statements: { first, rows, writeLater }, mode, compiled: { lists, lookups, writes }, read, locking, pageBoundaries, readOffLoop }: StoreArguments
): Storage.TransactionStore => {
  const transactionById = keepingRead(mode, read.transactions, TransactionRow.decode)
  const update = updating(writeLater, locking)
  const countTransactions = (key: Pick<TransactionsTable, "client_id" | "source_account_id" | "asset_type" | "status_group">, delta: 1 | -1) =>
    writeLater(
      writes.countTransactions({
        client_id: key.client_id,
        source_account_id: key.source_account_id,
        asset_type: key.asset_type,
        status_group: key.status_group,
        count: delta,
        increment: delta
      }),
      1,
      `transaction_counts of ${key.source_account_id}`,
      // An upsert with no condition on its update changes one row or fails.
      true
    )
  return {
    insertTransaction(tx) {
      const row = TransactionRow.encode(tx)
      const inserted = Effect.andThen(writeLater(writes.insertTransaction(row), 1, `transactions ${row.id}`, true), countTransactions(row, 1))
      return pageBoundaries === undefined ? inserted : Effect.andThen(Effect.sync(() => pageBoundaries.changed(row.client_id, row)), inserted)
    },
    getTransaction(id) {
      return Effect.map(first(lookups.transaction[locking](id)), transactionById)
    },
    updateTransaction(tx) {
      // Client, source, asset and creation never change; the counters are keyed by the first three.
      const { client_id: _, source_account_id: __, asset_type: ___, created_at: ____, ...next } = TransactionRow.encode(tx)
      const id = next.id
      return Effect.suspend(() => {
        // The row as the unit read it, or read now, locked, so the group it leaves is the one it really leaves.
        const kept = read.transactions.get(id)
        const before = kept !== undefined ? Effect.succeed(kept) : first(
          db.selectFrom("transactions").select(["client_id", "source_account_id", "asset_type", "status_group", "created_at"])
            .where("id", "=", id).$if(engine.locksRowsForWrite, (qb) => qb.forNoKeyUpdate())
        )
        return Effect.flatMap(before, (before) =>
          Effect.andThen(
            update(read.transactions, next, writes.updateTransaction, "transactions"),
            before === undefined || before.status_group === next.status_group ? Effect.void : Effect.suspend(() => {
              pageBoundaries?.changed(before.client_id, { created_at: before.created_at, id })
              return Effect.andThen(countTransactions(before, -1), countTransactions({ ...before, status_group: next.status_group }, 1))
            })
          ))
      })
    },
    listTransactions(clientId, filter, request) {
      const values = transactionListValues(clientId, filter)
      if (matchesNothing(values)) return Effect.succeed(emptyPage)
      return pageOf({
        first: (limit) => rows(lists.transactionsFirst({ ...values, limit })),
        rows: (limit, offset, fromOldest) => rows(lists.transactionsPage({ ...values, limit, offset }, fromOldest)),
        count: () => Effect.map(first(lists.transactionsTotal(values)), countOf),
        // Only a read unit holds one snapshot on every engine (a PostgreSQL write unit reads each statement afresh).
        ...(pageBoundaries === undefined || mode !== "read" ? {} : { laterPage: () => Effect.suspend(() => {
          const listKey = JSON.stringify(values)
          const unseenBy = pageBoundaries.keptSnapshot(clientId)
          const changes = engine.listChanges.query(clientId, unseenBy)
          const around: ListReads<TransactionRow.SummaryRow> = {
            after: (key, limit, offset) => rows(lists.transactionsAround.after(values, key, limit, offset)),
            upTo: (key, limit, offset) => rows(lists.transactionsAround.upTo(values, key, limit, offset)),
            keysAfter: (key, every, count) => rows(lists.transactionKeysEvery.after(values, key, every, count)),
            keysUpTo: (key, every, count) => rows(lists.transactionKeysEvery.upTo(values, key, every, count)),
            ...(readOffLoop === undefined ? {} : {
              keysOffLoop: {
                keysAfter: (key, every, count) => readOffLoop(lists.transactionKeysEvery.after(values, key, every, count).compile()),
                keysUpTo: (key, every, count) => readOffLoop(lists.transactionKeysEvery.upTo(values, key, every, count).compile())
              }
            })
          }
          // Where each statement is a round trip, the page is guessed at in the same one as the total and the
          // changes; where statements run on the event loop a guess would only read twice.
          const guess = engine.runsOnEventLoop ? undefined : pageBoundaries.guess(listKey, request, around)
          return Effect.map(
            Effect.all([rows({ compile: () => changes }), guess ?? Effect.succeed(undefined)], { concurrency: 2 }),
            ([found, guessed]) => (total: number) =>
              pageBoundaries.page(listKey, clientId, engine.listChanges.sighting(found, unseenBy), total, request, around, Date.now(), guessed)
          )
        }) })
      }, TransactionRow.decodeSummary, request, mode)
    },
    listOpenTransactionsFrom(accountId) {
      return Effect.map(
        rows(
          db.selectFrom("transactions").selectAll()
            .where("source_account_id", "=", engine.opaque.text(accountId))
            // The literal lets SQLite use the partial index of open transactions.
            .where("status_group", "=", sql.lit("pending"))
            .orderBy("created_at").orderBy("id")
        ),
        (found) => found.map(TransactionRow.decode)
      )
    }
  }
}
