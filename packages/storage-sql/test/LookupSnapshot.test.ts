/**
 * Lookups on a SQLite file share one read transaction while nothing commits (sqlite/LookupSnapshot), and still read
 * what is committed when their request is served (AUTH-PERM-2, and every record read by a lookup):
 * - a request's credential check, which reads the commit version on a connection of its own, ends a shared
 *   transaction that another connection's commit made out of date, even within one turn of the event loop;
 * - this storage's own commits end it, through a write unit's group commit and through kysely's use of the writer;
 * - it never outlives the turn.
 * Better-sqlite3's statements are counted to show the sharing: one `begin` on the read-only connection for many
 * requests' lookups while nothing commits.
 */
import { assert, describe, it } from "@effect/vitest"
import { type Account, Money } from "@custody-relay/core"
import BetterSqlite3 from "better-sqlite3"
import { Effect, Option } from "effect"
import { join } from "node:path"
import { setImmediate as nextTurn } from "node:timers/promises"
import { migrateToLatest } from "../src/migrations/migrateToLatest.js"
import { openSqlite } from "../src/sqlite/layerSqlite.js"
import { SqliteEngine } from "../src/sqlite/SqliteEngine.js"
import * as SqlStorage from "../src/SqlStorage.js"
import { countedStatements } from "./CountedStatements.js"
import { isWanted, temporaryDirectory } from "./Dialects.js"
import * as Records from "./Records.js"

/** How many read transactions were begun on a read-only connection of this process. */
const readOnlyBegins = countedStatements("run", (statement) => statement.database.readonly && statement.source === "begin deferred")

const openStore = Effect.gen(function*() {
  const filename = join(yield* temporaryDirectory, "lookups.db")
  const db = yield* Effect.acquireRelease(
    Effect.promise(() => openSqlite({ filename, checkpointIntervalMillis: 0 })),
    (db) => Effect.promise(() => db.destroy())
  )
  yield* Effect.promise(() => migrateToLatest(db))
  const other = yield* Effect.acquireRelease(Effect.sync(() => new BetterSqlite3(filename)), (other) => Effect.sync(() => other.close()))
  const storage = SqlStorage.make(db, SqliteEngine)
  const client = Records.client()
  const user = Records.apiUser(client.id)
  const account = Records.account(client.id, { availableBalance: Money.canonical("10") })
  yield* storage.transaction("write", (unit) =>
    Effect.andThen(unit.insertClient(client), Effect.andThen(unit.insertApiUser(user), unit.insertAccount(account))))
  const balance = (found: Option.Option<Account.Account>) => Option.getOrUndefined(Option.map(found, (a) => a.availableBalance))
  return {
    db,
    other,
    storage,
    /** A request's lookups: its credential first, as the core's authentication reads it, then the account. */
    request: storage.transaction("lookup", (unit) =>
      Effect.andThen(unit.findApiUserByKeyId(user.keyId), Effect.map(unit.getAccount(account.id), balance))),
    /** A lookup with no credential check before it, as a background worker's. */
    lookupAlone: storage.transaction("lookup", (unit) => Effect.map(unit.getAccount(account.id), balance)),
    /** Another process (the operator CLI, a second server) sets the balance. */
    foreignBalance: (value: string) =>
      other.prepare("update accounts set available_balance = ? where id = ?").run(value, account.id),
    ownBalance: (value: string) =>
      storage.transaction("write", (unit) =>
        Effect.flatMap(unit.getAccount(account.id), (found) =>
          Option.isSome(found) ? unit.updateAccount({ ...found.value, availableBalance: Money.canonical(value) }) : Effect.void)),
    accountId: account.id
  }
})

describe.skipIf(!isWanted("sqlite-file"))("lookups share a read transaction on a SQLite file (LookupSnapshot)", () => {
  it.live("requests' lookups share one read transaction while nothing commits; the turn's end ends it", () =>
    Effect.gen(function*() {
      const { request } = yield* openStore
      yield* Effect.promise(() => nextTurn())
      const counter = yield* readOnlyBegins
      for (let i = 0; i < 5; i++) assert.strictEqual(yield* request, "10")
      assert.strictEqual(counter.calls, 1, "five requests in one turn, one read transaction")
      yield* Effect.promise(() => nextTurn())
      assert.strictEqual(yield* request, "10")
      assert.strictEqual(counter.calls, 2, "a new turn, a new read transaction")
    }))

  it.live("AUTH-PERM-2: another connection's commit is seen by the next request, even in the same turn; a lookup alone sees it from the next turn", () =>
    Effect.gen(function*() {
      const { request, lookupAlone, foreignBalance } = yield* openStore
      assert.strictEqual(yield* request, "10")
      foreignBalance("7")
      // The next request's credential check sees the commit version move and ends the shared transaction.
      assert.strictEqual(yield* request, "7")
      foreignBalance("6")
      assert.strictEqual(yield* lookupAlone, "7", "a lookup with no request check before it reads the turn's transaction")
      yield* Effect.promise(() => nextTurn())
      assert.strictEqual(yield* lookupAlone, "6")
    }))

  it.live("this storage's own commits end the shared transaction: a write unit's group commit, and kysely's statements on the writer", () =>
    Effect.gen(function*() {
      const { db, request, lookupAlone, ownBalance, accountId } = yield* openStore
      yield* Effect.promise(() => nextTurn())
      // The write unit joins its group first, then another fiber's lookup begins the shared transaction: the group
      // commits before the turn ends, and the writer looks up right after its commit.
      const [afterCommit, before] = yield* Effect.all([Effect.andThen(ownBalance("5"), lookupAlone), lookupAlone], { concurrency: 2 })
      assert.strictEqual(before, "10")
      assert.strictEqual(afterCommit, "5", "a write unit's commit ends the shared transaction")

      assert.strictEqual(yield* request, "5")
      yield* Effect.promise(() => db.updateTable("accounts").set({ available_balance: "4" }).where("id", "=", accountId).execute())
      assert.strictEqual(yield* lookupAlone, "4", "kysely's statements on the writer end the shared transaction")
    }))
})
