/**
 * What only the SQL stores promise, on SQLite (a file) and PostgreSQL: migrations from an empty database and from
 * an older schema, the engines' column types, the unique indexes behind the core's duplicate rules, error
 * classification from real engine errors, the rate limiter shared by two nodes, and list queries that read an
 * index instead of scanning and sorting.
 */
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { type Account, Ids, Money, type Page, Storage, Timestamp } from "@custody-relay/core"
import { Cause, Effect, Exit, Fiber, Layer, Logger, Option, type Scope } from "effect"
import { TestClock } from "effect/testing"
import { CompiledQuery, Kysely, sql } from "kysely"
import { migrateTo, migrateToLatest, SchemaNewerThanRelease } from "../src/migrations/migrateToLatest.js"
import { names as migrationNames, MIGRATION_TABLE } from "../src/migrations/Migrations.js"
import { openPostgres } from "../src/postgres/layerPostgres.js"
import { PostgresEngine } from "../src/postgres/PostgresEngine.js"
import type { Database } from "../src/schema/Database.js"
import { openSqlite } from "../src/sqlite/layerSqlite.js"
import { SqliteEngine } from "../src/sqlite/SqliteEngine.js"
import type { SqlEngine } from "../src/SqlEngine.js"
import * as SqlLayer from "../src/SqlLayer.js"
import * as SqlRateLimiter from "../src/SqlRateLimiter.js"
import * as SqlStorage from "../src/SqlStorage.js"
import * as StorageFailure from "../src/StorageFailure.js"
import { LIST_CHANGES_KEPT_MILLIS, MAX_FAR_WALKS, MAX_NEWER_SNAPSHOTS, STEP_ROWS, STEP_ROWS_ON_EVENT_LOOP } from "../src/PageBoundaries.js"
import { storeStatementsOf, transactionListValues } from "../src/StoreStatements.js"
import { capturedLogs } from "../../core/test/CapturedLogs.js"
import { offLoopCounted, withLookupOnNextTurn } from "./EventLoopTurns.js"
import { queryPlanOf, recording } from "./Recording.js"
import { scopedCountingProxy } from "./CountingProxy.js"
import { heldTransaction, isWanted, migratedSqliteFile, postgresSkipReason, temporaryDirectory, temporaryPostgresDatabase } from "./Dialects.js"
import * as Records from "./Records.js"

interface Engine {
  readonly name: "sqlite-file" | "postgres"
  readonly engine: SqlEngine
  /**
   * A fresh, empty database for the scope: a kysely instance on it (destroyed with the scope), a way to open a
   * second connection (another node), and one that waits only 50 ms for a lock.
   */
  readonly fresh: Effect.Effect<Fresh, never, Scope.Scope>
}

interface Fresh {
  readonly db: Kysely<Database>
  readonly reopen: () => Promise<Kysely<Database>>
  readonly reopenImpatient: () => Promise<Kysely<Database>>
}

const destroyWithScope = (db: Kysely<Database>) => Effect.addFinalizer(() => Effect.promise(() => db.destroy()))

/** Waits until `check` holds, looking every 20 ms, for at most 5 s. */
const until = (check: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 250 && !(yield* check); i++) yield* Effect.sleep("20 millis")
  })

/**
 * `db` with every statement run through it recorded, by kind (kysely's node kind, e.g. "InsertQueryNode"), and every
 * statement compiled through it.
 */
const statementsThrough = (db: Kysely<Database>) => {
  const kinds: Array<string> = []
  const compiled: Array<string> = []
  // A statement is compiled once and may be run many times (StatementTemplate): its kind is noted as it is compiled,
  // and recorded each time it is answered.
  const kindOf = new WeakMap<object, string>()
  const counted = db.withPlugin({
    transformQuery: (args) => {
      kindOf.set(args.queryId, args.node.kind)
      compiled.push(args.node.kind)
      return args.node
    },
    transformResult: (args) => {
      kinds.push(kindOf.get(args.queryId) ?? "unknown")
      return Promise.resolve(args.result)
    }
  })
  return { counted, kinds, compiled }
}

const engines: ReadonlyArray<Engine> = [
  {
    name: "sqlite-file",
    engine: SqliteEngine,
    fresh: Effect.gen(function*() {
      const filename = join(yield* temporaryDirectory, "relay.db")
      const db = yield* Effect.promise(() => openSqlite({ filename }))
      yield* destroyWithScope(db)
      return {
        db,
        reopen: () => openSqlite({ filename }),
        reopenImpatient: () => openSqlite({ filename, busyTimeoutMillis: 50 })
      }
    })
  },
  {
    name: "postgres",
    engine: PostgresEngine,
    fresh: Effect.gen(function*() {
      const { url } = yield* temporaryPostgresDatabase
      const db = yield* Effect.promise(() => openPostgres({ connectionString: url }))
      yield* destroyWithScope(db)
      return {
        db,
        reopen: () => openPostgres({ connectionString: url }),
        // The pool sets lock_timeout itself on every connection, which can override a `-c lock_timeout` in the URL.
        reopenImpatient: () => openPostgres({ connectionString: url, pool: { lockTimeoutMillis: 50 } })
      }
    })
  }
]

const tablesOf = async (db: Kysely<Database>): Promise<ReadonlyArray<string>> =>
  (await db.introspection.getTables()).map((t) => t.name).sort()

/** A new client and one account of it, stored through `storage`; the account as stored. */
const storedAccount = (storage: Storage.Storage["Service"], overrides: Partial<Account.Account> = {}) => {
  const client = Records.client()
  const account = Records.account(client.id, overrides)
  return Effect.as(storage.transaction("write", (unit) => unit.insertClient(client).pipe(Effect.andThen(unit.insertAccount(account)))), account)
}

const storageOn = (db: Kysely<Database>, engine: SqlEngine) => Layer.succeed(Storage.Storage, SqlStorage.make(db, engine))

for (const { engine, fresh, name } of engines) {
  describe.skipIf(!isWanted(name) || (name === "postgres" && postgresSkipReason !== undefined))(`SQL storage: ${name}`, () => {
    /** A migrated database, and a second connection to it: two nodes sharing it. */
    const twoNodes = Effect.gen(function*() {
      const { db, reopen } = yield* fresh
      yield* Effect.promise(() => migrateToLatest(db))
      const other = yield* Effect.promise(reopen)
      yield* destroyWithScope(other)
      return { db, other }
    })

    it.live("migrates an empty database to the latest schema, and a second run changes nothing", () =>
      Effect.gen(function*() {
        const { db } = yield* fresh
        yield* Effect.promise(() => migrateToLatest(db))
        const tables = yield* Effect.promise(() => tablesOf(db))
        for (const table of ["accounts", "api_users", "clients", "idempotency_keys", "domain_events", "outbox_entries", "ledger_entries", "rate_limit_windows", "transaction_counts", "transactions", "whitelisted_addresses"]) {
          assert.include(tables, table)
        }
        yield* Effect.promise(() => migrateToLatest(db))
        const ran = yield* Effect.promise(() => sql<{ readonly name: string }>`select name from ${sql.table(MIGRATION_TABLE)} order by name`.execute(db))
        assert.deepStrictEqual(ran.rows.map((r) => r.name), [...migrationNames])
      }))

    it.live("a database a later release migrated is refused, naming the migration it does not know, and left as it was", () =>
      Effect.gen(function*() {
        const { db } = yield* fresh
        yield* Effect.promise(() => migrateToLatest(db))
        yield* Effect.promise(() => sql`insert into ${sql.table(MIGRATION_TABLE)} (name, timestamp) values ('9999_a_later_release', '2027-01-01T00:00:00.000Z')`.execute(db))
        const refused = yield* Effect.promise(() => migrateToLatest(db).then(() => undefined, (error: unknown) => error))
        assert.instanceOf(refused, SchemaNewerThanRelease)
        assert.deepStrictEqual((refused as SchemaNewerThanRelease).unknownMigrations, ["9999_a_later_release"])
        assert.match(String((refused as Error).message), /migrated by a later release .*9999_a_later_release.*run that release or a later one/)
        const ran = yield* Effect.promise(() => sql<{ readonly name: string }>`select name from ${sql.table(MIGRATION_TABLE)} order by name`.execute(db))
        assert.deepStrictEqual(ran.rows.map((r) => r.name), [...migrationNames, "9999_a_later_release"])
      }))

    it.live("a database made by migration 1 migrates forward and keeps its data", () =>
      Effect.gen(function*() {
        const { db } = yield* fresh
        yield* Effect.promise(() => migrateTo(db, "0001_records"))
        const clientId = Ids.ClientId.make(crypto.randomUUID())
        const accountId = Ids.AccountId.make(crypto.randomUUID())
        const txId = Ids.TransactionId.make(crypto.randomUUID())
        const olderTxId = Ids.TransactionId.make(crypto.randomUUID())
        const balance = "1000000000000000000000000000000.000000000000000001"
        // Written as version 1 wrote rows: no folded search columns, no status group.
        yield* Effect.promise(async () => {
          await sql`insert into clients (id, name, created_at) values (${clientId}, 'Old client', '2025-01-01T00:00:00.000Z')`.execute(db)
          await sql`
            insert into accounts (id, client_id, name, description, workspace, role, asset_id, chain_type, address, status,
              available_balance, required_approvals, created_at, updated_at)
            values (${accountId}, ${clientId}, 'ÄRGER Treasury', '', 'custody', 'custody', 'ETH', 'ethereum', '0xAbCdEf', 'active',
              ${balance}, 1, '2025-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z')
          `.execute(db)
          await sql`
            insert into transactions (id, client_id, source_account_id, destination_id, destination_type, destination_address,
              amount, asset_type, network_fee, fee_asset_id, reserved, status, sub_status, required_approvals,
              created_by_api_user_id, created_by_name, decisions, provider_transaction_id, approved_at, provider_approved_at,
              created_at, updated_at)
            values (${txId}, ${clientId}, ${accountId}, ${crypto.randomUUID()}, 'external', '0xdest', '0.000000000000000001', 'ETH',
              '0.1', 'ETH', '0.100000000000000001', 'CONFIRMING', null, 1, ${crypto.randomUUID()}, 'Old user', '[]', null, null,
              null, '2025-01-02T00:00:00.000Z', '2025-01-02T00:00:00.000Z'),
              (${olderTxId}, ${clientId}, ${accountId}, ${crypto.randomUUID()}, 'external', '0xdest', '2', 'ETH', '0.1', 'ETH',
              '2.1', 'COMPLETED', null, 1, ${crypto.randomUUID()}, 'Old user', '[]', null, null, null,
              '2025-01-01T12:00:00.000Z', '2025-01-01T12:00:00.000Z')
          `.execute(db)
        })
        yield* Effect.promise(() => migrateToLatest(db))
        const found = yield* Effect.gen(function*() {
          const storage = yield* Storage.Storage
          return yield* storage.transaction("read", (unit) =>
            Effect.all([
              unit.getAccount(accountId),
              unit.listAccounts(clientId, { search: "ärger" }, { page: 1, limit: 10 }),
              unit.listAccounts(clientId, { search: "abcd" }, { page: 1, limit: 10 }),
              unit.listTransactions(clientId, { group: "pending" }, { page: 1, limit: 10 }),
              unit.listOpenTransactionsFrom(accountId),
              // A full page: its total comes from the counters migration 4 backfilled.
              unit.listTransactions(clientId, {}, { page: 1, limit: 1 }),
              unit.listTransactions(clientId, { group: "completed", accountId }, { page: 1, limit: 1 })
            ]))
        }).pipe(Effect.provide(storageOn(db, engine)))
        assert.strictEqual(Option.getOrThrow(found[0]).availableBalance, balance)
        assert.deepStrictEqual(found[1].items.map((a) => a.id), [accountId])
        assert.deepStrictEqual(found[2].items.map((a) => a.id), [accountId])
        assert.deepStrictEqual(found[3].items.map((t) => t.id), [txId])
        assert.deepStrictEqual(found[4].map((t) => t.reserved), ["0.100000000000000001"])
        assert.deepStrictEqual([found[5].items.map((t) => t.id), found[5].total], [[txId], 2])
        assert.deepStrictEqual([found[6].items.map((t) => t.id), found[6].total], [[olderTxId], 1])
      }))

    it.live("money columns are exact types: TEXT in SQLite, NUMERIC in PostgreSQL; padded NUMERIC reads back canonical", () =>
      Effect.gen(function*() {
        const { db } = yield* fresh
        yield* Effect.promise(() => migrateToLatest(db))
        const columns = (yield* Effect.promise(() => db.introspection.getTables())).find((t) => t.name === "accounts")?.columns ?? []
        const balanceType = columns.find((c) => c.name === "available_balance")?.dataType.toLowerCase()
        assert.strictEqual(balanceType, engine.name === "postgres" ? "numeric" : "text")
        const client = Records.client()
        const account = Records.account(client.id)
        yield* Effect.gen(function*() {
          const storage = yield* Storage.Storage
          yield* storage.transaction("write", (unit) => unit.insertClient(client).pipe(Effect.andThen(unit.insertAccount(account))))
          // What another writer (or NUMERIC arithmetic) may leave: trailing zeros.
          yield* Effect.promise(() => sql`update accounts set available_balance = '100.500000' where id = ${account.id}`.execute(db))
          const read = yield* storage.transaction("read", (unit) => unit.getAccount(account.id))
          assert.strictEqual(Option.getOrThrow(read).availableBalance, "100.5")
        }).pipe(Effect.provide(storageOn(db, engine)))
      }))

    it.live("unique indexes back ACC-CREATE-3 and the address book, named the same on every engine", () =>
      Effect.gen(function*() {
        const { db } = yield* fresh
        yield* Effect.promise(() => migrateToLatest(db))
        const storage = SqlStorage.make(db, engine, { maxRetries: 0 })
        const client = Records.client()
        const rejected = Records.account(client.id, { name: "Ops", status: "rejected" })
        const first = Records.account(client.id, { name: "Ops", status: "pending_approval" })
        const twin = Records.account(client.id, { name: "Ops", status: "active", description: "other" })
        const archived = Records.whitelisted(client.id, { address: "0xsame", status: "ARCHIVED" })
        const live = Records.whitelisted(client.id, { address: "0xsame", status: "PENDING" })
        const twinEntry = Records.whitelisted(client.id, { address: "0xsame", status: "APPROVED" })
        yield* storage.transaction("write", (unit) =>
          unit.insertClient(client).pipe(
            Effect.andThen(Effect.all([unit.insertAccount(rejected), unit.insertAccount(first)])),
            Effect.andThen(Effect.all([unit.insertWhitelistedAddress(archived), unit.insertWhitelistedAddress(live)]))
          )
        )
        const accountError = yield* Effect.flip(storage.transaction("write", (unit) => unit.insertAccount(twin)))
        const entryError = yield* Effect.flip(storage.transaction("write", (unit) => unit.insertWhitelistedAddress(twinEntry)))
        const keyError = yield* Effect.flip(storage.transaction("write", (unit) => {
          const user = Records.apiUser(client.id)
          return unit.insertApiUser(user).pipe(Effect.andThen(unit.insertApiUser({ ...Records.apiUser(null), keyId: user.keyId })))
        }))
        const constraints = [accountError, entryError, keyError].map((error) =>
          error.reason._tag === "StorageConstraintViolated" ? error.reason.constraint : error.reason._tag
        )
        assert.deepStrictEqual(constraints, ["accounts_identity", "whitelisted_addresses_destination", "api_users_key_id"])
        // Rejecting the live account frees the identity again.
        yield* storage.transaction("write", (unit) =>
          unit.updateAccount({ ...first, status: "rejected" }).pipe(Effect.andThen(unit.insertAccount(twin)))
        )
      }))

    it.live("an update of a record that is not stored is a fault, not a silent no-op", () =>
      Effect.gen(function*() {
        const { db } = yield* fresh
        yield* Effect.promise(() => migrateToLatest(db))
        const storage = SqlStorage.make(db, engine)
        const error = yield* Effect.flip(storage.transaction("write", (unit) => unit.updateAccount(Records.account(Records.client().id))))
        assert.strictEqual(error.reason._tag, "StorageFault")
        assert.isFalse(error.isRetryable)
      }))

    it.live("an update after a read sets only what changed, and a second update in the unit compares with the first", () =>
      Effect.gen(function*() {
        const { db } = yield* fresh
        yield* Effect.promise(() => migrateToLatest(db))
        const storage = SqlStorage.make(db, engine)
        const account = yield* storedAccount(storage, { status: "active", availableBalance: Money.canonical("10") })
        // Back to approved, then active again in the same unit: the second update must not be compared with the row as
        // first read (active), or it would leave the account approved.
        yield* storage.transaction("write", (unit) =>
          Effect.gen(function*() {
            const read = Option.getOrThrow(yield* unit.getAccount(account.id))
            yield* unit.updateAccount({ ...read, status: "approved", availableBalance: Money.canonical("7") })
            yield* unit.updateAccount({ ...read, status: "active", availableBalance: Money.canonical("7") })
          }))
        const stored = Option.getOrThrow(yield* storage.transaction("read", (unit) => unit.getAccount(account.id)))
        assert.strictEqual(stored.status, "active")
        assert.strictEqual(stored.availableBalance, "7")
      }))

    it.live("what one unit of work read is forgotten by the next, even on the same connection", () =>
      Effect.gen(function*() {
        const { db } = yield* fresh
        yield* Effect.promise(() => migrateToLatest(db))
        const storage = SqlStorage.make(db, engine)
        const account = yield* storedAccount(storage, { status: "active" })
        yield* storage.transaction("write", (unit) => unit.getAccount(account.id))
        // Changed behind the store's back after that unit ended.
        yield* Effect.promise(() => db.updateTable("accounts").set({ status: "approved" }).where("id", "=", account.id).execute())
        // A unit that writes the account without reading it must write every column, not compare with a stale read.
        yield* storage.transaction("write", (unit) =>
          unit.updateAccount({ ...account, status: "active", availableBalance: Money.canonical("5") }))
        const stored = Option.getOrThrow(yield* storage.transaction("read", (unit) => unit.getAccount(account.id)))
        assert.strictEqual(stored.status, "active")
        assert.strictEqual(stored.availableBalance, "5")
      }))

    it.live("two nodes on one database share the rate limiter's count", () =>
      Effect.gen(function*() {
        const { db, other } = yield* twoNodes
        const nodes = [SqlRateLimiter.make(db, engine), SqlRateLimiter.make(other, engine)]
        const key = `crk_${crypto.randomUUID()}`
        const decisions = yield* Effect.forEach(
          Array.from({ length: 30 }, (_, i) => nodes[i % 2]),
          (node) => node === undefined ? Effect.die(new Error("no node")) : node.consume(key, { limit: 20, windowSeconds: 3600 }),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(decisions.filter((d) => d.allowed).length, 20)
        assert.deepStrictEqual([...decisions.map((d) => d.remaining)].sort((a, b) => a - b).slice(0, 11), Array(11).fill(0))
      }))

    it.live("LIM-RATE-1 LIM-RATE-3: a node's counts of one turn are one upsert; two nodes asking for keys in opposite orders count exactly", () =>
      Effect.gen(function*() {
        const { db, other } = yield* twoNodes
        const { compiled, counted, kinds } = statementsThrough(db)
        const nodes = [SqlRateLimiter.make(counted, engine), SqlRateLimiter.make(other, engine)] as const
        const run = crypto.randomUUID()
        const keys = ["a", "b", "c"].map((name) => `crk_${run}_${name}`)
        const policy = { limit: 12, windowSeconds: 3600 }
        // The first count of a node also purges ended windows (once a minute): out of the way before counting.
        yield* nodes[0].consume(`crk_${run}_warm`, policy)
        const before = kinds.length
        const turn = (node: (typeof nodes)[number], order: ReadonlyArray<string>) =>
          Effect.forEach(order, (key) => Effect.map(node.consume(key, policy), (decision) => ({ key, ...decision })), { concurrency: "unbounded" })
        const [first, second] = yield* Effect.all([
          Effect.forEach(Array.from({ length: 5 }, () => [...keys, ...keys]), (order) => turn(nodes[0], order)),
          Effect.forEach(Array.from({ length: 5 }, () => [...keys].reverse()), (order) => turn(nodes[1], order))
        ], { concurrency: 2 })
        assert.strictEqual(kinds.length - before, 5, "one upsert for each of the node's five turns of six counts")
        // The warm-up's count compiled the upsert of one window; a turn's, of three windows, is compiled once.
        assert.strictEqual(compiled.filter((kind) => kind === "InsertQueryNode").length, 2, "the upsert compiled once per number of windows")
        const decisions = [...first.flat(), ...second.flat()]
        for (const key of keys) {
          const allowed = decisions.filter((decision) => decision.key === key && decision.allowed)
          assert.strictEqual(allowed.length, 12)
          assert.deepStrictEqual(allowed.map((decision) => decision.remaining).sort((a, b) => b - a), Array.from({ length: 12 }, (_, i) => 11 - i))
        }
      }))

    it.live("the rate limiter purges windows that ended", () =>
      Effect.gen(function*() {
        const { db } = yield* fresh
        yield* Effect.promise(() => migrateToLatest(db))
        const limiter = SqlRateLimiter.make(db, engine)
        const policy = { limit: 5, windowSeconds: 60 }
        const windows = () =>
          Effect.promise(() => db.selectFrom("rate_limit_windows").select(["key", "count"]).orderBy("key").execute())
        yield* TestClock.setTime(Date.UTC(2026, 0, 1, 12, 0, 0))
        yield* limiter.consume("old", policy)
        yield* limiter.consume("old", policy)
        assert.deepStrictEqual(yield* windows(), [{ key: "old", count: 2 }])
        // Past the purge interval and the window's end: the next request removes the ended window.
        yield* TestClock.adjust("2 minutes")
        yield* limiter.consume("new", policy)
        assert.deepStrictEqual(yield* windows(), [{ key: "new", count: 1 }])
      }).pipe(Effect.provide(TestClock.layer())))

    it.live("LIM-RATE-1: the synced rate limiter is exact on one node and reconciles two nodes through the database", () =>
      Effect.gen(function*() {
        const { db, other } = yield* twoNodes
        // Reconciling every 20 ms; each node's background round runs in this test's scope.
        const first = yield* SqlRateLimiter.makeSynced(db, engine, 20)
        const second = yield* SqlRateLimiter.makeSynced(other, engine, 20)
        const policy = { limit: 10, windowSeconds: 3600 }
        const stored = (key: string) =>
          Effect.promise(() => db.selectFrom("rate_limit_windows").select("count").where("key", "=", key).executeTakeFirst())
        // One node alone: exactly its budget, with the remaining count of each request.
        const alone = `crk_${crypto.randomUUID()}`
        const decisions = yield* Effect.forEach(Array.from({ length: 12 }), () => first.consume(alone, policy))
        assert.deepStrictEqual(decisions.map((d) => d.remaining), [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0])
        assert.deepStrictEqual(decisions.map((d) => d.allowed), [...Array(10).fill(true), false, false])
        // Its count reaches the database with the next round, all twelve requests of it.
        yield* until(Effect.map(stored(alone), (row) => Number(row?.count ?? 0) === 12))
        assert.strictEqual(Number((yield* stored(alone))?.count), 12)

        // Two nodes: the first spends 6; once synced, the second's first request of the window reads the 6.
        const shared = `crk_${crypto.randomUUID()}`
        for (let i = 0; i < 6; i++) yield* first.consume(shared, policy)
        yield* until(Effect.map(stored(shared), (row) => Number(row?.count ?? 0) === 6))
        const fromSecond = yield* Effect.forEach(Array.from({ length: 5 }), () => second.consume(shared, policy))
        assert.deepStrictEqual(fromSecond.map((d) => d.allowed), [true, true, true, true, false])
        // And the first learns of the second's requests at its next round: its next request is refused.
        yield* until(Effect.map(stored(shared), (row) => Number(row?.count ?? 0) === 11))
        yield* first.consume(shared, policy)
        yield* until(Effect.map(stored(shared), (row) => Number(row?.count ?? 0) === 12))
        assert.isFalse((yield* first.consume(shared, policy)).allowed)
      }).pipe(Effect.scoped))

    it.live("the synced rate limiter writes nothing per request, and its unsynced counts when its layer closes, every key's in one upsert", () =>
      Effect.gen(function*() {
        const { db } = yield* fresh
        yield* Effect.promise(() => migrateToLatest(db))
        const { counted, kinds } = statementsThrough(db)
        const upserts = () => kinds.filter((kind) => kind === "InsertQueryNode").length
        const [key, other] = [`crk_${crypto.randomUUID()}`, `crk_${crypto.randomUUID()}`]
        const stored = (of: string) => Effect.promise(() => db.selectFrom("rate_limit_windows").select("count").where("key", "=", of).executeTakeFirst())
        // An interval far longer than the test: only the closing round can write the counts.
        yield* Effect.scoped(Effect.gen(function*() {
          const limiter = yield* SqlRateLimiter.makeSynced(counted, engine, 3_600_000)
          for (let i = 0; i < 4; i++) yield* limiter.consume(key, { limit: 10, windowSeconds: 3600 })
          for (let i = 0; i < 2; i++) yield* limiter.consume(other, { limit: 10, windowSeconds: 60 })
          assert.isUndefined(yield* stored(key))
          assert.strictEqual(upserts(), 0)
        }))
        assert.strictEqual(Number((yield* stored(key))?.count), 4)
        assert.strictEqual(Number((yield* stored(other))?.count), 2)
        assert.strictEqual(upserts(), 1)
      }))

    it.live("a write that cannot get the lock in time is a retryable StorageConflict; re-run, it succeeds once the lock is free", () =>
      Effect.gen(function*() {
        const { db, reopen, reopenImpatient } = yield* fresh
        yield* Effect.promise(() => migrateToLatest(db))
        const client = Records.client()
        const account = Records.account(client.id)
        // better-sqlite3 waits for a lock synchronously, blocking this process; the lock's holder lives in this same
        // process here, so the store waits 50 ms at a time and lets the backoff between re-runs free the event loop.
        const impatientDb = yield* Effect.promise(reopenImpatient)
        yield* destroyWithScope(impatientDb)
        const storage = SqlStorage.make(impatientDb, engine)
        yield* storage.transaction("write", (unit) => unit.insertClient(client).pipe(Effect.andThen(unit.insertAccount(account))))
        // Another node holds the lock: SQLite's write lock, PostgreSQL's lock on the account row.
        const holder = yield* Effect.promise(reopen)
        yield* destroyWithScope(holder)
        const held = yield* Effect.promise(() => engine.begin(holder, "write"))
        yield* Effect.promise(() =>
          engine.name === "postgres"
            ? sql`select id from accounts where id = ${account.id} for update`.execute(held)
            : sql`update accounts set description = 'held' where id = ${account.id}`.execute(held)
        )
        const bump = (unit: Storage.StorageUnit) =>
          Effect.gen(function*() {
            const current = Option.getOrThrow(yield* unit.getAccount(account.id))
            yield* unit.updateAccount({ ...current, availableBalance: Money.add(current.availableBalance, Money.canonical("1")) })
          })
        const conflict = yield* Effect.flip(SqlStorage.make(impatientDb, engine, { maxRetries: 0 }).transaction("write", bump))
        assert.strictEqual(conflict.reason._tag, "StorageConflict")
        assert.isTrue(conflict.isRetryable)
        yield* Effect.forkChild(Effect.sleep("150 millis").pipe(Effect.andThen(Effect.promise(() => held.rollback().execute()))))
        yield* storage.transaction("write", bump)
        const final = yield* storage.transaction("read", (unit) => unit.getAccount(account.id))
        assert.strictEqual(Option.getOrThrow(final).availableBalance, "1")
      }))

    it.live("the layer refuses to start on a database it cannot reach, as StorageUnavailable, once its start-up wait is over", () =>
      Effect.gen(function*() {
        const noWait = { startupTimeoutMillis: 0 }
        const layer = engine.name === "postgres"
          ? SqlLayer.make(SqlLayer.scoped(() => openPostgres({ connectionString: "postgres://postgres@127.0.0.1:1/none", pool: { connectionTimeoutMillis: 1000 } }), PostgresEngine), PostgresEngine, noWait)
          : SqlLayer.make(SqlLayer.scoped(() => openSqlite({ filename: "/nonexistent-directory/relay.db" }), SqliteEngine), SqliteEngine, noWait)
        const error = yield* Effect.flip(Effect.scoped(Layer.build(layer)))
        assert.strictEqual(error.reason._tag, "StorageUnavailable")
      }))
  })
}

const recordingSelects = recording(/^select/i)


/** Every list query the SQLite store issues, one per filter kind, with the parameters it bound (on an empty database). */
const issuedListQueries = Effect.gen(function*() {
  const { db, issued, storage } = yield* recordingSelects
  const clientId = Ids.ClientId.make(crypto.randomUUID())
  const page = { page: 1, limit: 20 }
  yield* storage.transaction("read", (unit) =>
    Effect.all([
      ...([{}, { assetId: "ETH" }, { workspace: "custody" }, { status: "active" }, { roles: ["staking"] }] as const).map((filter) =>
        unit.listAccounts(clientId, filter, page)
      ),
      ...([{}, { statuses: ["APPROVED"] }, { assetTypes: ["ETH"] }] as const).map((filter) =>
        unit.listWhitelistedAddresses(clientId, filter, page)
      ),
      ...([{}, { accountId: crypto.randomUUID() }, { group: "pending" }, { assetType: "ETH" }] as const).map((filter) =>
        unit.listTransactions(clientId, filter, page)
      ),
      unit.listOpenTransactionsFrom(Ids.AccountId.make(crypto.randomUUID())),
      unit.listLedgerEntries(Ids.AccountId.make(crypto.randomUUID()))
    ]))
  const lists = issued.filter((query) => /from "(accounts|whitelisted_addresses|transactions|ledger_entries)".* order by/i.test(query.sql))
  assert.strictEqual(lists.length, 14)
  return { db, lists }
})

describe.skipIf(!isWanted("sqlite-file"))("SQL storage: list queries read an index in page order (SQLite query plans)", () => {
  it.live("every list query the store issues uses an index and never sorts", () =>
    Effect.gen(function*() {
      const { db, lists } = yield* issuedListQueries
      for (const query of lists) {
        const plan = yield* queryPlanOf(db, query)
        const details = plan.rows.map((row) => row.detail).join(" | ")
        assert.match(details, /USING INDEX|USING COVERING INDEX/, `${query.sql}: ${details}`)
        assert.notMatch(details, /TEMP B-TREE/, `${query.sql}: ${details}`)
        // Every table it reads, the first page's total among them, through an index.
        for (const { detail } of plan.rows) {
          if (/^(SCAN|SEARCH) /.test(detail)) assert.match(detail, /USING (COVERING |PRIMARY KEY |INTEGER PRIMARY KEY )?INDEX|USING INTEGER PRIMARY KEY/, `${query.sql}: ${details}`)
        }
      }
    }))

  it.live("the outbox's leases and a lane's hold and resumption read their partial indexes: a due backlog of other kinds or lanes is not walked", () =>
    Effect.gen(function*() {
      const { db, issued, storage } = yield* recording(/^(select|update) .*"outbox_entries"/i)
      const now = "2026-11-30T12:00:00.000Z" as Timestamp.Timestamp
      yield* storage.transaction("write", (unit) =>
        Effect.all([
          unit.dueOutboxEntries(now, 16, [], { pool: "provider" }),
          unit.dueOutboxEntries(now, 16, [crypto.randomUUID()], { pool: "deliveries", skipClients: [crypto.randomUUID()] }),
          unit.holdLane(crypto.randomUUID(), crypto.randomUUID(), now),
          unit.resumeLane(crypto.randomUUID(), now)
        ]))
      const expected = [/outbox_entries_due_provider/, /outbox_entries_due\b/, /outbox_entries_lane_pending/, /outbox_entries_lane_pending/]
      assert.strictEqual(issued.length, expected.length)
      for (const [n, query] of issued.entries()) {
        const plan = yield* queryPlanOf(db, query)
        const details = plan.rows.map((row) => row.detail).join(" | ")
        assert.match(details, expected[n]!, `${query.sql}: ${details}`)
      }
    }))

  it.live("retention's batches read the indexes of settled rows (migration 12) and of expiry, in their order: pending rows are not walked, nothing is sorted", () =>
    Effect.gen(function*() {
      const { db, issued, storage } = yield* recording(/^delete from/i)
      const before = "2026-11-30T12:00:00.000Z" as Timestamp.Timestamp
      yield* storage.transaction("write", (unit) =>
        Effect.all([
          unit.deleteSettledOutboxEntries(before, 500),
          unit.deleteSettledWebhookDeliveries(before, 500),
          unit.deleteExpiredIdempotencyRecords(before, 500)
        ]))
      const expected = [/outbox_entries_settled/, /webhook_deliveries_settled/, /idempotency_keys_expires_at/]
      assert.strictEqual(issued.length, expected.length)
      for (const [n, query] of issued.entries()) {
        const plan = yield* queryPlanOf(db, query)
        const details = plan.rows.map((row) => row.detail).join(" | ")
        assert.match(details, expected[n]!, `${query.sql}: ${details}`)
        assert.notMatch(details, /TEMP B-TREE/, `${query.sql}: ${details}`)
        // The rows chosen are then found by key: no step reads a whole table.
        for (const { detail } of plan.rows) if (/^SCAN /.test(detail)) assert.match(detail, / USING /, `${query.sql}: ${details}`)
      }
    }))

  it.live("no list query binds a parameter SQLite's planner reads, so a kept statement is not planned again on every run", () =>
    Effect.gen(function*() {
      // SQLite's planner reads the value bound to a LIMIT, an OFFSET and a `column = ?` (sqlite3ExprIsInteger) and
      // re-plans the statement when that parameter is bound anew; better-sqlite3 clears the bindings after every
      // run, so such a statement was parsed and planned on every call. A CAST hides the value from the planner
      // (SqlEngine's castParameters); IN lists and instr needles are never read.
      const { lists } = yield* issuedListQueries
      for (const query of lists) {
        assert.notMatch(query.sql, /(?:=|<>|limit|offset)\s*\?/i, query.sql)
        // A first page has no offset (StoreStatements' firstPage).
        assert.match(query.sql, /limit cast\(\? as integer\)( offset cast\(\? as integer\))?$|order by "created_at", "id"$/, query.sql)
      }
    }))

  it.live("nor does an ordered read of a write unit or a worker: a client's webhook subscriptions and API users, deliveries, outbox entries", () =>
    Effect.gen(function*() {
      // Measured on such a read (`client_id = ?` then `order by "id"`): 8 µs planned on every run, 2.7 µs behind a
      // CAST. Every write unit that appends an event lists its client's subscriptions.
      const { issued, storage } = yield* recordingSelects
      const id = crypto.randomUUID()
      yield* storage.transaction("write", (unit) =>
        Effect.all([
          unit.listApiUsers(Ids.ClientId.make(id)),
          unit.listWebhookSubscriptions(Ids.ClientId.make(id)),
          unit.listWebhookDeliveries(id, 10),
          unit.listOutboxEntries(id),
          unit.dueOutboxEntries(Timestamp.fromMillis(Date.UTC(2026, 10, 25)), 10)
        ]))
      const ordered = issued.filter((query) => /\b(order by|limit)\b/i.test(query.sql))
      assert.strictEqual(ordered.length, 5)
      // A range (`<= ?`) is not read by the planner (measured: the same 2.7 µs either way).
      for (const query of ordered) assert.notMatch(query.sql, /(?:(?<![<>])=|<>|limit|offset)\s*\?/i, query.sql)
    }))
})

describe.skipIf(!isWanted("sqlite-file"))("SQL storage: a list's first page and its total are one statement (SQLite, PAGE-1)", () => {
  it.live("a lookup unit reads each list's first page and its total in one statement, with no transaction, full or short; a later page is a defect there", () =>
    Effect.gen(function*() {
      const { issued, storage } = yield* recording(/./)
      const account = yield* storedAccount(storage)
      yield* storage.transaction("write", (unit) =>
        Effect.forEach([1, 2], () => unit.insertAccount(Records.account(account.clientId))))
      const lists: ReadonlyArray<(unit: Storage.StorageUnit, page: Page.PageRequest) => Effect.Effect<Page.Page<unknown>, Storage.StorageError>> = [
        (unit: Storage.StorageUnit, page: Page.PageRequest) => unit.listAccounts(account.clientId, {}, page),
        (unit: Storage.StorageUnit, page: Page.PageRequest) => unit.listWhitelistedAddresses(account.clientId, {}, page),
        (unit: Storage.StorageUnit, page: Page.PageRequest) => unit.listTransactions(account.clientId, {}, page),
        (unit: Storage.StorageUnit, page: Page.PageRequest) => unit.pageEvents(account.clientId, {}, page)
      ]
      for (const list of lists) {
        for (const limit of [2, 20]) {
          issued.length = 0
          const inLookup = yield* storage.transaction("lookup", (unit) => list(unit, { page: 1, limit }))
          assert.strictEqual(issued.length, 1, issued.map((query) => query.sql).join("\n"))
          // The audit trail's total is its counted strides' and the events after them (TrailCounts), joined to the page.
          assert.match(issued[0]?.sql ?? "", /^select [^()]+, \(select .+\) as "list_total" from |^select "e"\.\*, "trail"\.\* from \(select \(select count\(\*\) .+ as "trail_in_stride", .+ left join \(select \* from "domain_events"/)
          // The same page and total as a read unit's snapshot gives.
          assert.deepStrictEqual(inLookup, yield* storage.transaction("read", (unit) => list(unit, { page: 1, limit })))
        }
        const later = yield* Effect.exit(storage.transaction("lookup", (unit) => list(unit, { page: 2, limit: 2 })))
        assert.isTrue(Exit.hasDies(later))
      }
      const accounts = yield* storage.transaction("lookup", (unit) => unit.listAccounts(account.clientId, {}, { page: 1, limit: 2 }))
      assert.strictEqual(accounts.total, 3)
      assert.strictEqual(accounts.items.length, 2)
    }))
})

describe.skipIf(!isWanted("sqlite-file"))("SQL storage: an update names only the columns it changes (SQLite trigger)", () => {
  it.live("a balance update after a read leaves the indexed columns out of its SET, so their indexes are not rewritten", () =>
    Effect.gen(function*() {
      const { db } = yield* migratedSqliteFile("narrow.db")
      // `UPDATE OF column` fires only when the statement's SET names the column, whatever its value.
      yield* Effect.promise(async () => {
        await sql`create table named_columns (name text)`.execute(db)
        for (const column of ["name", "workspace", "role", "asset_id", "status", "available_balance"]) {
          await sql.raw(`create trigger named_${column} after update of ${column} on accounts begin insert into named_columns values ('${column}'); end`).execute(db)
        }
      })
      const storage = SqlStorage.make(db, SqliteEngine)
      const account = yield* storedAccount(storage, { availableBalance: Money.canonical("10") })
      const named = () => Effect.promise(() => db.selectFrom("named_columns" as "accounts").select("name").execute())
      yield* storage.transaction("write", (unit) =>
        Effect.flatMap(unit.getAccount(account.id), (read) =>
          unit.updateAccount({ ...Option.getOrThrow(read), availableBalance: Money.canonical("4") })))
      assert.deepStrictEqual((yield* named()).map((row) => row.name), ["available_balance"])
      // Without a read in the unit, every column is written.
      yield* Effect.promise(() => sql`delete from named_columns`.execute(db))
      yield* storage.transaction("write", (unit) => unit.updateAccount({ ...account, availableBalance: Money.canonical("3") }))
      assert.sameMembers((yield* named()).map((row) => row.name), ["name", "workspace", "role", "asset_id", "status", "available_balance"])
    }))
})

/**
 * Transactions `from` to `from + count - 1` of `account`'s client written by another connection `other`, created at
 * `createdAtMillis(i)`, three in four pending (so that group too is long enough to get boundaries); then the client's
 * counters recounted.
 */
const insertTransactions = (
  other: import("better-sqlite3").Database,
  account: Account.Account,
  from: number,
  count: number,
  createdAtMillis: (i: number) => number
) => {
  const insert = other.prepare(`
    insert into transactions (id, client_id, source_account_id, destination_id, destination_type, destination_address,
      amount, asset_type, network_fee, fee_asset_id, reserved, status, status_group, sub_status, required_approvals,
      created_by_api_user_id, created_by_name, decisions, provider_transaction_id, approved_at, provider_approved_at,
      created_at, updated_at)
    values (?, ?, ?, 'destination', 'external', '0xdestination', '1.5', ?, '0.001', ?, '1.501', ?, ?, null, 1,
      'initiator', 'Initiator', '[]', null, null, null, ?, ?)
  `)
  other.transaction(() => {
    for (let i = from; i < from + count; i++) {
      const pending = i % 4 !== 0
      const at = new Date(createdAtMillis(i)).toISOString()
      insert.run(`00000000-0000-7000-8000-${i.toString(16).padStart(12, "0")}`, account.clientId, account.id, account.assetId, account.assetId,
        pending ? "AWAITING_SIGNATURE" : "COMPLETED", pending ? "pending" : "completed", at, at)
    }
    other.prepare("delete from transaction_counts where client_id = ?").run(account.clientId)
    other.prepare(`
      insert into transaction_counts (client_id, source_account_id, asset_type, status_group, count)
      select client_id, source_account_id, asset_type, status_group, count(*) from transactions where client_id = ?
      group by client_id, source_account_id, asset_type, status_group
    `).run(account.clientId)
  })()
}

/**
 * A storage on a new SQLite file with one account, and `rows` transactions of its client one millisecond apart from
 * `startMillis`, written by another connection (`other`, open for the test).
 */
const withTransactions = (name: string, rows: number, startMillis: number, options: { readonly readWorker?: boolean; readonly engine?: SqlEngine } = {}) =>
  Effect.gen(function*() {
    const { db, filename } = yield* migratedSqliteFile(name, options.readWorker === undefined ? {} : { readWorker: options.readWorker })
    const storage = SqlStorage.make(db, options.engine ?? SqliteEngine)
    const account = yield* storedAccount(storage)
    const { default: BetterSqlite3 } = yield* Effect.promise(() => import("better-sqlite3"))
    const other = yield* Effect.acquireRelease(Effect.sync(() => new BetterSqlite3(filename)), (other) => Effect.sync(() => other.close()))
    insertTransactions(other, account, 1, rows, (i) => startMillis + i)
    return { storage, account, other }
  })

describe.skipIf(!isWanted("sqlite-file"))("SQL storage: deep pages from page boundaries (SQLite file, PAGE-4)", () => {
  it.live("deep pages of 100,000 transactions are exact after old transactions are written here and by another connection, and after a status change", () =>
    Effect.gen(function*() {
      const rows = 100_000
      const startMillis = Date.UTC(2023, 0, 1)
      const { storage, account, other } = yield* withTransactions("deep.db", rows, startMillis)
      const expected = (group: "pending" | undefined) =>
        (other.prepare(`select id from transactions where client_id = ? ${group === undefined ? "" : "and status_group = 'pending'"} order by created_at desc, id desc`)
          .all(account.clientId) as Array<{ readonly id: string }>).map((row) => row.id)
      const checkPages = Effect.gen(function*() {
        for (const group of [undefined, "pending"] as const) {
          const all = expected(group)
          const last = Math.ceil(all.length / 20)
          for (const page of [Math.ceil(last / 2), Math.ceil(last / 3), Math.ceil((2 * last) / 3), last - 3, 2]) {
            const found = yield* storage.transaction("read", (unit) => unit.listTransactions(account.clientId, group === undefined ? {} : { group }, { page, limit: 20 }))
            assert.deepStrictEqual({ ids: found.items.map((tx) => tx.id), total: found.total }, { ids: all.slice((page - 1) * 20, page * 20), total: all.length }, `${group} ${page}`)
          }
        }
      })
      yield* checkPages
      // An old transaction written through the store: it sorts among the rows the boundaries count.
      const old = Records.transaction(account, { createdAt: Timestamp.fromMillis(startMillis + 30_000), status: "AWAITING_SIGNATURE" })
      yield* storage.transaction("write", (unit) => unit.insertTransaction(old))
      yield* checkPages
      // Another connection writes an old one: this process learns it from the data version.
      insertTransactions(other, account, rows + 1, 1, () => startMillis + 20_000)
      yield* checkPages
      // An old pending transaction, before every boundary, leaves the pending group.
      const moved = Ids.TransactionId.make(`00000000-0000-7000-8000-${(1_001).toString(16).padStart(12, "0")}`)
      yield* storage.transaction("write", (unit) =>
        Effect.flatMap(unit.getTransaction(moved), (found) => unit.updateTransaction({ ...Option.getOrThrow(found), status: "COMPLETED" })))
      yield* checkPages
    }), 60_000)

  for (const way of ["off the event loop (the read worker)", "on it, pausing (no read worker)", "on it, pausing, once the read worker fails"] as const) {
    it.live(`a list's first deep walk leaves the event loop turns, stepping ${way}: a lookup begun after it answers first, and the page is exact (PAGE-4)`, () =>
      Effect.gen(function*() {
        const rows = 100_000
        const { counted, engine } = offLoopCounted(way.endsWith("fails"))
        const { storage, account, other } = yield* withTransactions("turns.db", rows, Date.UTC(2023, 0, 1), { readWorker: !way.includes("no read worker"), engine })
        const all = (other.prepare("select id from transactions where client_id = ? order by created_at desc, id desc").all(account.clientId) as Array<{ readonly id: string }>)
          .map((row) => row.id)
        // The middle page: 50,000 rows from either end, 24 steps of STEP_ROWS_ON_EVENT_LOOP (0.15 ms or more each), UNIT_MILLIS to a unit.
        const page = rows / 20 / 2
        const { finished, turns, value: listed } = yield* withLookupOnNextTurn(
          storage.transaction("read", (unit) => unit.listTransactions(account.clientId, {}, { page, limit: 20 })),
          storage.transaction("lookup", (unit) => unit.getAccount(account.id))
        )
        assert.deepStrictEqual(finished, ["lookup", "read"])
        assert.isAtLeast(turns, 1, "the walk's units ran in separate turns of the event loop")
        assert.deepStrictEqual({ ids: listed.items.map((tx) => tx.id), total: listed.total }, { ids: all.slice((page - 1) * 20, page * 20), total: rows })
        // Off the event loop every step is the worker's read; once it fails, the steps are the event loop's.
        assert.strictEqual(counted.reads, way.startsWith("off") ? Math.floor(rows / 2 / STEP_ROWS_ON_EVENT_LOOP) : way.endsWith("fails") ? 1 : 0)
      }), 60_000)
  }

  it.live(`a request whose far walks another process voids each time (it commits during every step) walks on the event loop after ${MAX_FAR_WALKS} of them, and its page is exact (PAGE-4)`, () =>
    Effect.gen(function*() {
      const rows = 100_000
      const { counted, engine } = offLoopCounted(false)
      const { storage, account, other } = yield* withTransactions("voided.db", rows, Date.UTC(2023, 0, 1), { readWorker: true, engine })
      const all = (other.prepare("select id from transactions where client_id = ? order by created_at desc, id desc").all(account.clientId) as Array<{ readonly id: string }>)
        .map((row) => row.id)
      let commits = 0
      const commit = other.prepare("insert into rate_limit_windows (key, window_start, window_end, count) values (?, 0, 1, 1)")
      counted.beforeRead = () => commit.run(`voids-${commits++}`)
      const page = rows / 20 / 2
      const listed = yield* storage.transaction("read", (unit) => unit.listTransactions(account.clientId, {}, { page, limit: 20 }))
      assert.deepStrictEqual({ ids: listed.items.map((tx) => tx.id), total: listed.total }, { ids: all.slice((page - 1) * 20, page * 20), total: rows })
      assert.strictEqual(counted.reads, MAX_FAR_WALKS * Math.floor(rows / 2 / STEP_ROWS_ON_EVENT_LOOP))
    }), 60_000)

  it.live("a later page of a client's audit trail passes over the events it skips in the client's index alone, and reads only its own rows from the table (SQLite query plans, PAGE-4)", () =>
    Effect.gen(function*() {
      const { db, issued, storage } = yield* recording(/from "domain_events"/i)
      const clientId = Ids.ClientId.make(crypto.randomUUID())
      const entityId = crypto.randomUUID()
      const events = Array.from({ length: 50 }, (_, n) => Records.accountApproved(clientId, entityId, n))
      yield* storage.transaction("write", (unit) => Effect.forEach(events, (event) => unit.appendEvent(event), { discard: true }))
      const newestFirst = events.map((event) => event.id).reverse()
      const cases = [
        { clientId, filter: {}, deferred: true },
        { clientId, filter: { types: ["account.approved" as const] }, deferred: false },
        { clientId, filter: { entityType: "account" as const }, deferred: false },
        { clientId, filter: { from: Records.at(0) }, deferred: false },
        { clientId: null, filter: { entityType: "account" as const }, deferred: false }
      ]
      for (const { clientId: asking, deferred, filter } of cases) {
        issued.length = 0
        const page = yield* storage.transaction("read", (unit) => unit.pageEvents(asking, filter, { page: 2, limit: 20 }))
        assert.deepStrictEqual({ ids: page.items.map((event) => event.id), total: page.total }, { ids: newestFirst.slice(20, 40), total: 50 })
        const skipping = issued.filter((query) => /\boffset\b/i.test(query.sql))
        assert.strictEqual(skipping.length, 1, issued.map((query) => query.sql).join("\n"))
        const details = (yield* queryPlanOf(db, skipping[0]!)).rows.map((row) => row.detail).join(" | ")
        if (deferred) {
          // The skipped events' positions from the covering index; the page's rows by position.
          assert.match(details, /SEARCH domain_events USING COVERING INDEX domain_events_client \(client_id=\? AND position>\? AND position<\?\)/, details)
          assert.match(details, /SEARCH domain_events USING INTEGER PRIMARY KEY \(rowid=\?\)/, details)
        } else {
          // A filter the client's index does not hold is judged on each event's row: no join would spare a read.
          assert.notMatch(skipping[0]!.sql, /"position" in \(select/, JSON.stringify(filter))
        }
      }
    }))

  it.live("the reads around a boundary use the list's index and never sort (SQLite query plans)", () =>
    Effect.gen(function*() {
      const { db } = yield* migratedSqliteFile("around.db")
      const { lists } = storeStatementsOf(db, SqliteEngine)
      const clientId = Ids.ClientId.make(crypto.randomUUID())
      const key = { created_at: "2026-01-01T00:00:00.000Z", id: crypto.randomUUID() }
      for (const filter of [{}, { accountId: crypto.randomUUID() }, { group: "pending" }, { assetType: "ETH" }] as const) {
        const values = transactionListValues(clientId, filter)
        // A walk on SQLite reads one key a read (PageBoundaries' boundariesPerRead).
        const reads = [
          ...[key, undefined].flatMap((from) => [lists.transactionsAround.after(values, from, 20, 5), lists.transactionsAround.upTo(values, from, 20, 5)]),
          ...[key, undefined].flatMap((from) => [lists.transactionKeysEvery.after(values, from, 5, 1), lists.transactionKeysEvery.upTo(values, from, 5, 1)])
        ]
        for (const query of reads) {
          const compiled = query.compile()
          const plan = yield* queryPlanOf(db, compiled)
          const details = plan.rows.map((row) => row.detail).join(" | ")
          assert.match(details, /USING INDEX|USING COVERING INDEX/, `${compiled.sql}: ${details}`)
          assert.notMatch(details, /TEMP B-TREE/, `${compiled.sql}: ${details}`)
        }
      }
    }))
})

for (const { engine, fresh, name } of engines) {
  describe.skipIf(!isWanted(name) || (name === "postgres" && postgresSkipReason !== undefined))(`SQL storage: a walk's keys a step apart (${name}, PAGE-4)`, () => {
    it.live("each key read answers the sort keys at every step's offset from its key, several in one statement, whatever the filter", () =>
      Effect.gen(function*() {
        const { db } = yield* fresh
        yield* Effect.promise(() => migrateToLatest(db))
        const storage = SqlStorage.make(db, engine)
        const account = yield* storedAccount(storage)
        // Three transactions a millisecond, so keys tie on created_at and their ids order them; one in three completed.
        const base = Date.UTC(2024, 0, 1)
        const written = Array.from({ length: 60 }, (_, i) =>
          Records.transaction(account, { createdAt: Timestamp.fromMillis(base + Math.floor(i / 3)), status: i % 3 === 0 ? "COMPLETED" : "AWAITING_SIGNATURE" }))
        yield* storage.transaction("write", (unit) => Effect.forEach(written, (tx) => unit.insertTransaction(tx), { discard: true }))
        const { lists } = storeStatementsOf(db, engine)
        const keyOf = (tx: { readonly createdAt: string; readonly id: string }) => ({ created_at: tx.createdAt, id: tx.id })
        const byKey = (a: { readonly created_at: string; readonly id: string }, b: { readonly created_at: string; readonly id: string }) =>
          a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0
        for (const filter of [{}, { group: "pending" as const }]) {
          const values = transactionListValues(account.clientId, filter)
          const oldestFirst = written.filter((tx) => filter.group === undefined || tx.status === "AWAITING_SIGNATURE").map(keyOf).sort(byKey)
          for (const key of [undefined, oldestFirst[10], oldestFirst[31]]) {
            const after = key === undefined ? oldestFirst : oldestFirst.filter((row) => byKey(row, key) > 0)
            const upTo = (key === undefined ? oldestFirst : oldestFirst.filter((row) => byKey(row, key) <= 0)).toReversed()
            for (const every of [1, 3, 7]) {
              for (const count of [1, 2, 5, 20]) {
                const read = (query: { readonly compile: () => CompiledQuery<{ readonly created_at: string; readonly id: string }> }) =>
                  Effect.promise(async () => (await db.executeQuery(query.compile())).rows.map((row) => ({ created_at: row.created_at, id: row.id })))
                const steps = Array.from({ length: count }, (_, at) => every * (at + 1))
                const expectedAfter = steps.map((step) => after[step - 1]).filter((row) => row !== undefined)
                const expectedUpTo = steps.map((step) => upTo[step]).filter((row) => row !== undefined)
                const label = `${JSON.stringify(filter)} key ${key === undefined ? "none" : oldestFirst.indexOf(key)} every ${every} count ${count}`
                assert.deepStrictEqual(yield* read(lists.transactionKeysEvery.after(values, key, every, count)), expectedAfter, `after, ${label}`)
                assert.deepStrictEqual(yield* read(lists.transactionKeysEvery.upTo(values, key, every, count)), expectedUpTo, `up to, ${label}`)
              }
            }
          }
        }
      }), 60_000)
  })
}

/** Two nodes' storages on one temporary, migrated PostgreSQL database, each with its own pool, and an account. */
const twoPostgresNodes = Effect.gen(function*() {
  const { url } = yield* temporaryPostgresDatabase
  const open = Effect.acquireRelease(Effect.promise(() => openPostgres({ connectionString: url })), (db) => Effect.promise(() => db.destroy()))
  const dbA = yield* open
  const dbB = yield* open
  yield* Effect.promise(() => migrateToLatest(dbA))
  const nodeA = SqlStorage.make(dbA, PostgresEngine)
  const nodeB = SqlStorage.make(dbB, PostgresEngine)
  return { url, dbA, dbB, nodeA, nodeB, account: yield* storedAccount(nodeA) }
})

describe.skipIf(!isWanted("postgres") || postgresSkipReason !== undefined)("SQL storage: deep pages from page boundaries (PostgreSQL, two nodes, PAGE-4)", () => {
  it.live("deep pages of 100,000 transactions are exact on one node after another node and plain SQL write old transactions and change a status group; without the log they are not", () =>
    Effect.gen(function*() {
      const { dbB, nodeA, nodeB, account } = yield* twoPostgresNodes
      const rows = 100_000
      // Written by plain SQL, one millisecond apart from 2023-01-01; three in four pending (so that group is long
      // enough to get boundaries). Then their counters.
      const insertRows = (from: number, to: number, startMillis: number) =>
        Effect.promise(async () => {
          await sql`
            insert into transactions (id, client_id, source_account_id, destination_id, destination_type, destination_address,
              amount, asset_type, network_fee, fee_asset_id, reserved, status, status_group, sub_status, required_approvals,
              created_by_api_user_id, created_by_name, decisions, provider_transaction_id, approved_at, provider_approved_at,
              created_at, updated_at)
            select '00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'), ${account.clientId}, ${account.id}, 'destination', 'external',
              '0xdestination', 1.5, ${account.assetId}, 0.001, ${account.assetId}, 1.501,
              case when i % 4 = 0 then 'COMPLETED' else 'AWAITING_SIGNATURE' end,
              case when i % 4 = 0 then 'completed' else 'pending' end, null, 1, 'initiator', 'Initiator', '[]', null, null, null,
              to_char(to_timestamp((${startMillis}::bigint + i) / 1000.0) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
              to_char(to_timestamp((${startMillis}::bigint + i) / 1000.0) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
            from generate_series(${from}::int, ${to}::int) as i
          `.execute(dbB)
          await sql`delete from transaction_counts where client_id = ${account.clientId}`.execute(dbB)
          await sql`
            insert into transaction_counts (client_id, source_account_id, asset_type, status_group, count)
            select client_id, source_account_id, asset_type, status_group, count(*) from transactions where client_id = ${account.clientId}
            group by client_id, source_account_id, asset_type, status_group
          `.execute(dbB)
        })
      const startMillis = Date.UTC(2023, 0, 1)
      yield* insertRows(1, rows, startMillis)
      const expected = (group: "pending" | undefined) =>
        Effect.promise(async () =>
          (await sql<{ readonly id: string }>`
            select id from transactions where client_id = ${account.clientId} ${group === undefined ? sql`` : sql`and status_group = 'pending'`}
            order by created_at desc, id desc
          `.execute(dbB)).rows.map((row) => row.id)
        )
      /** The pages of node A that differ from the table's order, by list and page. */
      const offPages = Effect.gen(function*() {
        const off: Array<string> = []
        for (const group of [undefined, "pending"] as const) {
          const all = yield* expected(group)
          const last = Math.ceil(all.length / 20)
          for (const page of [Math.ceil(last / 2), Math.ceil(last / 3), Math.ceil((2 * last) / 3), last - 3, 2]) {
            const found = yield* nodeA.transaction("read", (unit) => unit.listTransactions(account.clientId, group === undefined ? {} : { group }, { page, limit: 20 }))
            if (JSON.stringify({ ids: found.items.map((tx) => tx.id), total: found.total }) !== JSON.stringify({ ids: all.slice((page - 1) * 20, page * 20), total: all.length })) {
              off.push(`${group ?? "all"} page ${page}`)
            }
          }
        }
        return off
      })
      const transactionNumbered = (i: number) => Ids.TransactionId.make(`00000000-0000-7000-8000-${i.toString(16).padStart(12, "0")}`)
      const complete = (storage: Storage.Storage["Service"], i: number) =>
        storage.transaction("write", (unit) =>
          Effect.flatMap(unit.getTransaction(transactionNumbered(i)), (found) => unit.updateTransaction({ ...Option.getOrThrow(found), status: "COMPLETED" })))
      assert.deepStrictEqual(yield* offPages, [])
      // Another node writes an old transaction through its store: it sorts among the rows node A's boundaries count.
      const old = Records.transaction(account, { createdAt: Timestamp.fromMillis(startMillis + 30_000), status: "AWAITING_SIGNATURE" })
      yield* nodeB.transaction("write", (unit) => unit.insertTransaction(old))
      assert.deepStrictEqual(yield* offPages, [])
      // Plain SQL writes an old one (an operator, an older node): the trigger logs it all the same.
      yield* insertRows(rows + 1, rows + 1, startMillis + 20_000 - (rows + 1))
      assert.deepStrictEqual(yield* offPages, [])
      // Another node moves an old pending transaction, before every boundary, out of the pending group.
      yield* complete(nodeB, 1_001)
      assert.deepStrictEqual(yield* offPages, [])
      const logged = yield* Effect.promise(() => sql<{ readonly n: string }>`select count(*) as n from transaction_list_changes`.execute(dbB))
      assert.strictEqual(Number(logged.rows[0]?.n), rows + 3)
      // Without the log node A does not learn of another node's change, and its boundaries go stale: a page is off.
      yield* Effect.promise(() => sql`drop trigger transaction_list_change on transactions`.execute(dbB))
      yield* complete(nodeB, 2_001)
      assert.isNotEmpty(yield* offPages)
    }), 120_000)

  it.live(`a read unit begun before another took a newer snapshot reads its deep page from the boundaries it shares with the snapshot kept before when what it misses is after them, and otherwise runs again on a newer one, at most ${MAX_NEWER_SNAPSHOTS} times; each page is exact, another client's long transaction open throughout (PAGE-4)`, () =>
    Effect.gen(function*() {
      const { url, dbB, nodeA, nodeB, account } = yield* twoPostgresNodes
      // Every snapshot below counts it as running: node A must not read again the changes its kept snapshot saw.
      yield* heldTransaction(url)
      // Four steps of rows, one millisecond apart: the middle page is more than a step from both ends.
      const rows = 4 * STEP_ROWS
      const startMillis = Date.UTC(2023, 0, 1)
      yield* Effect.promise(() =>
        sql`
          insert into transactions (id, client_id, source_account_id, destination_id, destination_type, destination_address,
            amount, asset_type, network_fee, fee_asset_id, reserved, status, status_group, sub_status, required_approvals,
            created_by_api_user_id, created_by_name, decisions, provider_transaction_id, approved_at, provider_approved_at,
            created_at, updated_at)
          select '00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'), ${account.clientId}, ${account.id}, 'destination', 'external',
            '0xdestination', 1.5, ${account.assetId}, 0.001, ${account.assetId}, 1.501, 'COMPLETED', 'completed', null, 1, 'initiator',
            'Initiator', '[]', null, null, null,
            to_char(to_timestamp((${startMillis}::bigint + i) / 1000.0) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
            to_char(to_timestamp((${startMillis}::bigint + i) / 1000.0) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
          from generate_series(1, ${rows}::int) as i
        `.execute(dbB)
      )
      yield* Effect.promise(() =>
        sql`insert into transaction_counts (client_id, source_account_id, asset_type, status_group, count)
          values (${account.clientId}, ${account.id}, ${account.assetId}, 'completed', ${rows})`.execute(dbB)
      )
      const middle = { page: rows / 40, limit: 20 }
      const deepPage = (storage: Storage.Storage["Service"], page = middle) =>
        storage.transaction("read", (unit) => unit.listTransactions(account.clientId, {}, page))
      const ids = (found: { readonly items: ReadonlyArray<{ readonly id: string }> }) => found.items.map((tx) => tx.id)
      const tableSlice = (leaving: ReadonlyArray<string> = []) =>
        Effect.promise(async () =>
          (await sql<{ readonly id: string }>`select id from transactions where client_id = ${account.clientId} order by created_at desc, id desc`.execute(dbB))
            .rows.map((row) => row.id).filter((id) => !leaving.includes(id)).slice((middle.page - 1) * 20, middle.page * 20)
        )
      let written = 0
      // Another node commits a transaction, then a unit of node A begun after it reads a deep page: node A keeps
      // that newer snapshot, which misses nothing, and every unit begun before the commit is now on an older one.
      // The transaction is an old one (created before every row but the first, so before every boundary) or a new
      // one (after every boundary).
      const moveKeptSnapshotOn = (created: "old" | "new") =>
        Effect.gen(function*() {
          const createdAt = created === "old" ? startMillis + 1 : startMillis + rows + 1 + written
          written++
          const tx = Records.transaction(account, { createdAt: Timestamp.fromMillis(createdAt) })
          yield* nodeB.transaction("write", (unit) => unit.insertTransaction(tx))
          yield* deepPage(nodeA, { page: middle.page + 1, limit: 20 })
          return tx.id
        })
      /**
       * A read unit of node A that takes its snapshot, lets another node commit and node A's kept snapshot move on
       * (in its first `times` runs), then reads the middle page; its runs, its page, and what was written while it
       * waited.
       */
      const readAcross = (times: number, created: "old" | "new" = "old") =>
        Effect.gen(function*() {
          let runs = 0
          const wrote: Array<string> = []
          const page = yield* nodeA.transaction("read", (unit) =>
            Effect.gen(function*() {
              runs++
              yield* unit.getAccount(account.id)
              // Units of their own, on other connections of the nodes' pools.
              if (runs <= times) wrote.push(yield* moveKeptSnapshotOn(created))
              return yield* unit.listTransactions(account.clientId, {}, middle)
            }))
          return { runs, page, wrote }
        })
      yield* deepPage(nodeA)
      // Once: the unit runs again, on a snapshot that sees the other node's commit, and reads the page as it is now.
      const once = yield* readAcross(1)
      assert.strictEqual(once.runs, 2)
      assert.deepStrictEqual(ids(once.page), yield* tableSlice())
      // Every run: after the last asking run, it reads from the nearer end in its own snapshot, which misses only
      // what was written while that run waited.
      const always = yield* readAcross(MAX_NEWER_SNAPSHOTS + 1)
      assert.strictEqual(always.runs, MAX_NEWER_SNAPSHOTS + 1)
      assert.deepStrictEqual(ids(always.page), yield* tableSlice(always.wrote.slice(-1)))
      // A new transaction, after every boundary: the unit's snapshot sees all the kept one saw before it moved on,
      // and what it misses changed no row at or before a boundary, so it reads from them at once, in its snapshot.
      // (The old ones forgot every boundary; the middle page is read once to leave them again, as a unit on an older
      // snapshot adds none. Their changes, which the kept snapshot saw, are not read again: each transaction that
      // wrote them began after the held one, so a node reading from its kept snapshot's oldest running transaction
      // would read them on every move, forget every boundary and run this unit again.)
      yield* deepPage(nodeA)
      const newer = yield* readAcross(1, "new")
      assert.strictEqual(newer.runs, 1)
      assert.deepStrictEqual(ids(newer.page), yield* tableSlice(newer.wrote))
    }), 120_000)

  it.live("a transaction open long before it commits logs its list changes as it commits: the next prune keeps them, and a node's deep pages stay exact", () =>
    Effect.gen(function*() {
      const { url, dbB, nodeA, account } = yield* twoPostgresNodes
      const rows = 4 * STEP_ROWS
      const startMillis = Date.UTC(2023, 0, 1)
      const insertSql = (from: number, to: number, millis: string) => `
        insert into transactions (id, client_id, source_account_id, destination_id, destination_type, destination_address,
          amount, asset_type, network_fee, fee_asset_id, reserved, status, status_group, sub_status, required_approvals,
          created_by_api_user_id, created_by_name, decisions, provider_transaction_id, approved_at, provider_approved_at,
          created_at, updated_at)
        select '00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'), '${account.clientId}', '${account.id}', 'destination', 'external',
          '0xdestination', 1.5, '${account.assetId}', 0.001, '${account.assetId}', 1.501, 'COMPLETED', 'completed', null, 1, 'initiator',
          'Initiator', '[]', null, null, null,
          to_char(to_timestamp((${millis}) / 1000.0) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
          to_char(to_timestamp((${millis}) / 1000.0) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
        from generate_series(${from}, ${to}) as i`
      yield* Effect.promise(() => sql.raw(insertSql(1, rows, `${startMillis}::bigint + i`)).execute(dbB))
      yield* Effect.promise(() =>
        sql`insert into transaction_counts (client_id, source_account_id, asset_type, status_group, count)
          values (${account.clientId}, ${account.id}, ${account.assetId}, 'completed', ${rows})`.execute(dbB))
      const middle = { page: rows / 40, limit: 20 }
      const deepPage = nodeA.transaction("read", (unit) => unit.listTransactions(account.clientId, {}, middle))
      const tableSlice = Effect.promise(async () =>
        (await sql<{ readonly id: string }>`select id from transactions where client_id = ${account.clientId} order by created_at desc, id desc`.execute(dbB))
          .rows.map((row) => row.id).slice((middle.page - 1) * 20, middle.page * 20))
      const ids = (found: { readonly items: ReadonlyArray<{ readonly id: string }> }) => found.items.map((tx) => tx.id)
      // Node A pages deep: it keeps boundaries and the snapshot they are exact in.
      assert.deepStrictEqual(ids(yield* deepPage), yield* tableSlice)
      // An operator's transaction writes an old transaction, before every boundary, and stays open.
      const { default: pg } = yield* Effect.promise(() => import("pg"))
      const operator = new pg.Client({ connectionString: url })
      yield* Effect.promise(() => operator.connect())
      yield* Effect.promise(() => operator.query("begin"))
      yield* Effect.promise(() => operator.query(insertSql(rows + 1, rows + 1, `${startMillis + 5}::bigint`)))
      yield* Effect.promise(() => operator.query(`update transaction_counts set count = count + 1 where client_id = '${account.clientId}'`))
      // Nothing is logged while it runs: an entry written now would carry this time, and a transaction open longer
      // than the log is kept would commit an entry the next prune removes before any node reads it.
      const loggedInside = yield* Effect.promise(() => operator.query("select count(*)::int as n from transaction_list_changes where xid = pg_current_xact_id()"))
      assert.strictEqual(loggedInside.rows[0]?.n, 0)
      assert.deepStrictEqual(ids(yield* deepPage), yield* tableSlice)
      yield* Effect.sleep("1 second")
      const committing = Date.now()
      yield* Effect.promise(() => operator.query("commit"))
      yield* Effect.promise(() => operator.end())
      // Logged at its commit, a second after its write: the log keeps it for LIST_CHANGES_KEPT_MILLIS from then.
      const logged = yield* Effect.promise(() =>
        sql<{ readonly at: number }>`select (extract(epoch from recorded_at) * 1000)::float8 as at from transaction_list_changes where id = ${`00000000-0000-7000-8000-${(rows + 1).toString(16).padStart(12, "0")}`}`.execute(dbB))
      assert.isAtLeast(Number(logged.rows[0]?.at), committing - 50)
      // Some node's prune runs before node A's next deep page: the entry stays, and the page moves by the row.
      yield* Effect.promise(() => dbB.executeQuery(PostgresEngine.listChanges!.prune!))
      assert.deepStrictEqual(ids(yield* deepPage), yield* tableSlice)
    }), 120_000)

  it.live("the layer prunes list changes older than LIST_CHANGES_KEPT_MILLIS when it starts, and keeps newer ones", () =>
    Effect.gen(function*() {
      const { url } = yield* temporaryPostgresDatabase
      const db = yield* Effect.acquireRelease(Effect.promise(() => openPostgres({ connectionString: url })), (db) => Effect.promise(() => db.destroy()))
      yield* Effect.promise(() => migrateToLatest(db))
      const keptSeconds = LIST_CHANGES_KEPT_MILLIS / 1000
      yield* Effect.promise(() =>
        sql`
          insert into transaction_list_changes (client_id, created_at, id, recorded_at) values
            ('old', '2023', 'a', now() - make_interval(secs => ${keptSeconds + 60})),
            ('recent', '2023', 'b', now() - make_interval(secs => ${keptSeconds - 60}))
        `.execute(db)
      )
      yield* Layer.build(SqlLayer.make(SqlLayer.scoped(() => openPostgres({ connectionString: url }), PostgresEngine), PostgresEngine, {}))
      const left = () => Effect.promise(async () => (await sql<{ readonly client_id: string }>`select client_id from transaction_list_changes`.execute(db)).rows.map((row) => row.client_id))
      for (let i = 0; i < 50 && (yield* left()).length > 1; i++) yield* Effect.sleep(100)
      assert.deepStrictEqual(yield* left(), ["recent"])
    }))
})

describe.skipIf(!isWanted("postgres") || postgresSkipReason !== undefined)("SQL storage: a rate-limit count the database does not answer (PostgreSQL, LIM-RATE-1)", () => {
  /** A migrated database reached through a proxy that can hold the server's replies back: a database that stops answering. */
  const throughProxy = Effect.gen(function*() {
    const { url } = yield* temporaryPostgresDatabase
    const proxy = yield* scopedCountingProxy(url)
    const db = yield* Effect.promise(() => openPostgres({ connectionString: proxy.url }))
    yield* destroyWithScope(db)
    yield* Effect.promise(() => migrateToLatest(db))
    // The same database without the proxy, to see what reached it.
    const direct = yield* Effect.promise(() => openPostgres({ connectionString: url }))
    yield* destroyWithScope(direct)
    return { db, direct, proxy }
  })
  /** A window's count in the database, as the rows hold it. */
  const storedCount = (direct: Kysely<Database>, key: string) =>
    Effect.promise(async () => Number((await direct.selectFrom("rate_limit_windows").select("count").where("key", "=", key).executeTakeFirst())?.count ?? 0))
  const policy = { limit: 100, windowSeconds: 3600 }
  /** Whether a count ended as the database being unavailable (the request is then answered 503). */
  const unavailable = (exit: Exit.Exit<unknown>) => {
    const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
    return error instanceof Storage.StorageError && error.isUnavailable
  }

  it.live("a count left unanswered fails as the database being unavailable once its bound has passed; the node's next counts go out, and count on", () =>
    Effect.gen(function*() {
      const { db, proxy } = yield* throughProxy
      const limiters = {
        "one upsert out at a time": SqlRateLimiter.make(db, PostgresEngine, 200),
        // Its first request of a key's window reads the window's count.
        synced: yield* SqlRateLimiter.makeSynced(db, PostgresEngine, 3_600_000, 200)
      }
      for (const [name, limiter] of Object.entries(limiters)) {
        const key = (suffix: string) => `crk_${name}_${suffix}`
        assert.strictEqual((yield* limiter.consume(key("counted"), policy)).remaining, 99)
        const release = proxy.holdReplies()
        // Two counts while the database does not answer, the second asked while the first waits: each is refused
        // in its own bound instead of waiting as long as TCP would, the second not held behind the first for ever.
        const [first, second] = yield* Effect.all([
          Effect.exit(limiter.consume(key("first"), policy)),
          Effect.andThen(Effect.sleep("50 millis"), Effect.exit(limiter.consume(key("second"), policy)))
        ], { concurrency: 2 })
        assert.isTrue(unavailable(first), `${name}: a count the database did not answer ended as ${String(first)}`)
        assert.isTrue(unavailable(second), `${name}: the next count ended as ${String(second)}`)
        release()
        // Answered again: the node counts on.
        assert.strictEqual((yield* limiter.consume(key("counted"), policy)).remaining, 98, name)
      }
    }).pipe(Effect.scoped))

  it.live("a count whose connection is lost after the database ran it is not sent again: the request fails as unavailable, counted once", () =>
    Effect.gen(function*() {
      const { db, direct, proxy } = yield* throughProxy
      const limiter = SqlRateLimiter.make(db, PostgresEngine, 5_000)
      const key = `crk_${crypto.randomUUID()}`
      assert.strictEqual((yield* limiter.consume(key, policy)).remaining, 99)
      const release = proxy.holdReplies()
      const counting = yield* Effect.forkChild(Effect.exit(limiter.consume(key, policy)))
      // The upsert reached the database and committed; its answer is held, then the connection is cut.
      yield* until(Effect.map(storedCount(direct, key), (count) => count === 2))
      proxy.cutConnections()
      release()
      const exit = yield* Fiber.join(counting)
      assert.isTrue(unavailable(exit), `the count ended as ${String(exit)}`)
      const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
      assert.isTrue(error instanceof Storage.StorageError && error.isOutcomeUnknown, "its outcome is unknown")
      yield* Effect.sleep("100 millis")
      assert.strictEqual(yield* storedCount(direct, key), 2, "the request was counted once, not again by a re-run")
      // The node counts on, on a new connection.
      assert.strictEqual((yield* limiter.consume(key, policy)).remaining, 97)
    }).pipe(Effect.scoped))

  it.live("a count that failed with the database's own answer, or that its client never sent, is known not to have run; a connection lost without an answer may have", () =>
    Effect.gen(function*() {
      const { url } = yield* temporaryPostgresDatabase
      const { default: pg } = yield* Effect.promise(() => import("pg"))
      // Each statement's failure, caught as it is sent (its rejection may come before the test looks at it).
      const failureOf = (promise: Promise<unknown>) => {
        const caught = promise.then(() => undefined, (cause: unknown) => cause)
        return Effect.promise(() => caught)
      }
      const judged = (cause: unknown) => StorageFailure.mayHaveRun(PostgresEngine.classify(cause), cause)
      // A backend terminated while its statement runs: the server answers 57P01, and the statement rolled back.
      const victim = new pg.Client({ connectionString: url })
      victim.on("error", () => undefined)
      const victimEnded = new Promise<void>((resolve) => victim.once("end", () => resolve()))
      yield* Effect.promise(() => victim.connect())
      const pid = (yield* Effect.promise(() => victim.query<{ readonly pid: number }>("select pg_backend_pid() as pid"))).rows[0]?.pid
      const sleeping = failureOf(victim.query("select pg_sleep(10)"))
      yield* Effect.sleep("200 millis")
      const admin = new pg.Client({ connectionString: url })
      yield* Effect.promise(() => admin.connect())
      yield* Effect.promise(() => admin.query("select pg_terminate_backend($1)", [pid]))
      yield* Effect.promise(() => admin.end())
      const terminated = yield* sleeping
      assert.strictEqual(StorageFailure.codeOf(terminated), "57P01")
      assert.isFalse(judged(terminated), "the database answered: the statement did not commit")
      // The same client, once it has seen its connection end, refuses to send anything.
      yield* Effect.promise(() => victimEnded)
      const refused = yield* failureOf(victim.query("select 1"))
      assert.match(String(refused), /not queryable/)
      assert.isFalse(judged(refused), "never sent")
      // A connection cut while a statement is out, with no answer: it may have run.
      const proxy = yield* scopedCountingProxy(url)
      const cut = new pg.Client({ connectionString: proxy.url })
      cut.on("error", () => undefined)
      yield* Effect.promise(() => cut.connect())
      proxy.holdReplies()
      const out = failureOf(cut.query("select 1"))
      yield* Effect.sleep("100 millis")
      proxy.cutConnections()
      const lost = yield* out
      assert.isTrue(judged(lost), `a lost answer (${String(lost)}) may have run`)
      // A pooler's word that it lost the server connection the statement was out on (PgBouncer's 08P01, a server
      // error's shape), and a socket's error whose code looks like a SQLSTATE, are no answer about the statement.
      const pooler = Object.assign(new Error("server conn crashed?"), { code: "08P01", severity: "ERROR" })
      const socket = Object.assign(new Error("write EPIPE"), { code: "EPIPE", errno: -32, syscall: "write" })
      for (const cause of [pooler, socket]) assert.isTrue(judged(cause), `${cause.message} may have run`)
    }).pipe(Effect.scoped))

  it.live("a synced limiter's round whose connection is lost after the database ran it takes its counts as written: counted once", () =>
    Effect.gen(function*() {
      const { db, direct, proxy } = yield* throughProxy
      const key = `crk_${crypto.randomUUID()}`
      // A round every 20 ms.
      const limiter = yield* SqlRateLimiter.makeSynced(db, PostgresEngine, 20, 5_000).pipe(Effect.provide(Logger.layer([])))
      yield* limiter.consume(key, policy)
      yield* until(Effect.map(storedCount(direct, key), (count) => count === 1))
      const release = proxy.holdReplies()
      for (let i = 0; i < 4; i++) assert.isTrue((yield* limiter.consume(key, policy)).allowed)
      // A round's upsert of the four reached the database and committed; its answer is held, then the connection is cut.
      yield* until(Effect.map(storedCount(direct, key), (count) => count === 5))
      proxy.cutConnections()
      release()
      for (let i = 0; i < 2; i++) assert.isTrue((yield* limiter.consume(key, policy)).allowed)
      yield* until(Effect.map(storedCount(direct, key), (count) => count >= 7))
      yield* Effect.sleep("200 millis")
      assert.strictEqual(yield* storedCount(direct, key), 7, "every request counted once in the database")
    }).pipe(Effect.scoped))

  it.live("a synced limiter's round left unanswered fails in its bound, its counts taken as written: counted once, not again by the rounds after it", () =>
    Effect.gen(function*() {
      const { db, proxy } = yield* throughProxy
      const key = `crk_${crypto.randomUUID()}`
      const stored = Effect.promise(() => db.selectFrom("rate_limit_windows").select("count").where("key", "=", key).executeTakeFirst())
      const { lines, layer: logging } = capturedLogs()
      // A round every 20 ms, each waiting at most 200 ms for its upsert; its rounds log through `logging`.
      const limiter = yield* SqlRateLimiter.makeSynced(db, PostgresEngine, 20, 200).pipe(Effect.provide(logging))
      yield* limiter.consume(key, policy)
      const release = proxy.holdReplies()
      // Decisions go on locally while the rounds get no answer; the first of them waits past its bound.
      for (let i = 0; i < 4; i++) assert.isTrue((yield* limiter.consume(key, policy)).allowed)
      yield* Effect.sleep("500 millis")
      for (let i = 0; i < 4; i++) assert.isTrue((yield* limiter.consume(key, policy)).allowed)
      yield* Effect.sleep("500 millis")
      release()
      // Answered again: the next round that has a count to add says so.
      assert.isTrue((yield* limiter.consume(key, policy)).allowed)
      yield* until(Effect.map(stored, (row) => Number(row?.count ?? 0) === 10))
      // The unanswered upserts reached the database (only their answers were held): each request counted there once.
      yield* Effect.sleep("100 millis")
      assert.strictEqual(Number((yield* stored)?.count), 10, "every request counted once in the database")
      // Two rounds failed: the outage is said once, and its end once (OutageLog), not a line a round.
      assert.deepStrictEqual(lines.map((line) => [line.level, Array.isArray(line.message) ? line.message[0] : line.message]), [
        ["WARN", "rate limit: reconciling with the database failed; counting on locally"],
        ["INFO", "rate limit: reconciling with the database again"]
      ])
    }).pipe(Effect.scoped))
})
