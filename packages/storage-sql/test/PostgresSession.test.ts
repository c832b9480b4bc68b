/**
 * PostgreSQL units of work in as few round trips as their reads allow (PostgresSession, issue 17), counted on the
 * wire by a proxy in front of a real database: BEGIN goes with the first statement, a write goes with the unit's
 * next statement or its COMMIT. And what must not change with it: a unit reads its own writes, a write that fails or
 * changes the wrong number of rows fails the unit where its answer arrives and nothing of the unit is kept, and the
 * connection is clean for the next unit. A read unit does not wait for its COMMIT's answer.
 */
import { type DomainEvent, Storage } from "@custody-relay/core"
import { describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Option } from "effect"
import { CompiledQuery, Kysely, PostgresDialect, sql } from "kysely"
import pg from "pg"
import { assert } from "vitest"
import { migrateToLatest } from "../src/migrations/migrateToLatest.js"
import { openPostgres, pgParts } from "../src/postgres/layerPostgres.js"
import { Pipeline, UnansweredReply } from "../src/postgres/Pipeline.js"
import { PostgresEngine } from "../src/postgres/PostgresEngine.js"
import type { PostgresPoolOptions } from "../src/postgres/PoolSettings.js"
import type { Database } from "../src/schema/Database.js"
import * as SqlStorage from "../src/SqlStorage.js"
import { LIST_TOTAL, TRAIL_IN_STRIDE } from "../src/SqlUnit.js"
import { STRIDE_POSITIONS } from "../src/TrailCounts.js"
import { scopedCountingProxy } from "./CountingProxy.js"
import { postgresSkipReason, temporaryPostgresDatabase } from "./Dialects.js"
import * as Records from "./Records.js"

if (postgresSkipReason !== undefined) console.log(`PostgresSession.test.ts: skipped: ${postgresSkipReason}`)

/**
 * A migrated database reached through a counting proxy, on a pool of one connection; the storage on it, and the
 * proxy. Retries off unless `maxRetries` is given: a unit that fails here must fail once, so the test sees its own
 * error and its own round trips.
 */
const proxied = (options: { readonly maxRetries?: number; readonly pool?: PostgresPoolOptions } = {}) => Effect.gen(function*() {
  const { url } = yield* temporaryPostgresDatabase
  // Migrated on a connection of its own: a migration's statements are not what these tests bound, and one slower
  // than a bounded pool's reply bound (a busy server, the suite's other files) discarded its connection mid-migration.
  yield* Effect.promise(async () => {
    const direct = await openPostgres({ connectionString: url })
    try {
      await migrateToLatest(direct)
    } finally {
      await direct.destroy()
    }
  })
  const proxy = yield* scopedCountingProxy(url)
  const pool = { max: 1, ...options.pool }
  const db = yield* Effect.acquireRelease(
    Effect.promise(() => openPostgres({ connectionString: proxy.url, pool })),
    (db) => Effect.promise(() => db.destroy())
  )
  const storage = SqlStorage.make(db, PostgresEngine, { maxRetries: options.maxRetries ?? 0 })
  // The pool's one connection is opened before counting.
  yield* storage.transaction("write", (unit) => unit.getClient(Records.client().id))
  /** How `work` ended, and the round trips it made. */
  const trips = <A, E>(work: Effect.Effect<A, E>) =>
    Effect.promise(async () => {
      let exit: Exit.Exit<A, E> | undefined
      const count = await proxy.count(async () => {
        exit = await Effect.runPromise(Effect.exit(work))
      })
      if (exit === undefined) throw new Error("the unit did not end")
      return { count, exit }
    })
  return { db, proxy, storage, trips, url }
})

const throughProxy = proxied()

/** Another session, open for the scope, that holds the row `id` of `table` locked in a transaction it leaves open. */
const rowLockedElsewhere = (url: string, table: "accounts" | "clients", id: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const session = new pg.Client({ connectionString: url })
      await session.connect()
      await session.query("begin")
      await session.query(`select id from ${table} where id = $1 for update`, [id])
      return session
    }),
    (session) => Effect.promise(() => session.end())
  )

const countRows = (db: Kysely<Database>, table: "clients" | "accounts", id: string) =>
  Effect.promise(() => db.selectFrom(table).select(db.fn.countAll<string>().as("n")).where("id", "=", id as never).executeTakeFirstOrThrow())
    .pipe(Effect.map((row) => Number(row.n)))

describe.skipIf(postgresSkipReason !== undefined)("PostgreSQL units of work, pipelined", () => {
  it.live("a unit's writes go with its next read, BEGIN with its first statement, the rest with COMMIT; it reads its own writes", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db, storage, trips } = yield* throughProxy
      const client = Records.client()
      const account = Records.account(client.id)
      const { count, exit } = yield* trips(storage.transaction("write", (unit) =>
        Effect.gen(function*() {
          yield* unit.insertClient(client)
          yield* unit.insertAccount(account)
          // BEGIN, both inserts and this read: one round trip, and the read sees the inserts.
          const read = yield* unit.getAccount(account.id)
          yield* unit.updateAccount({ ...account, name: "Renamed" })
          return read
        })
      ))
      assert.isTrue(exit._tag === "Success" && Option.isSome(exit.value))
      // The read with everything before it, then the update with COMMIT.
      assert.strictEqual(count, 2)
      const stored = yield* storage.transaction("read", (unit) => unit.getAccount(account.id))
      assert.strictEqual(Option.getOrThrow(stored).name, "Renamed")
      assert.strictEqual(yield* countRows(db, "clients", client.id), 1)
    })))

  it.live("a unit that writes and never reads sends BEGIN, its writes and COMMIT as one round trip", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db, storage, trips } = yield* throughProxy
      const client = Records.client()
      const { count, exit } = yield* trips(storage.transaction("write", (unit) =>
        unit.insertClient(client).pipe(Effect.andThen(unit.insertAccount(Records.account(client.id))))
      ))
      assert.strictEqual(exit._tag, "Success")
      assert.strictEqual(count, 1)
      assert.strictEqual(yield* countRows(db, "clients", client.id), 1)
    })))

  it.live("an update of a row the unit did not read is answered before COMMIT is sent: one that changes no row fails the unit, and nothing of it is kept", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db, storage, trips } = yield* throughProxy
      const client = Records.client()
      const never = Records.account(client.id)
      const { count, exit } = yield* trips(storage.transaction("write", (unit) =>
        unit.insertClient(client).pipe(Effect.andThen(unit.updateAccount(never)))
      ))
      assert.strictEqual(exit._tag, "Failure")
      const error = exit._tag === "Failure" ? Option.getOrUndefined(Cause.findErrorOption(exit.cause)) : undefined
      assert.instanceOf(error, Storage.StorageError)
      assert.strictEqual(error?.reason._tag, "StorageFault")
      assert.match(error?.reason.message ?? "", /changed 0 rows, not 1/)
      // BEGIN, the insert and the update in one, but not the COMMIT: the update's count is not the database's
      // promise (the unit holds no lock on that row). It failed on its answer, then ROLLBACK.
      assert.strictEqual(count, 2)
      assert.strictEqual(yield* countRows(db, "clients", client.id), 0)
      // The connection (the pool's only one) is clean: the next unit commits.
      yield* storage.transaction("write", (unit) => unit.insertClient(client))
      assert.strictEqual(yield* countRows(db, "clients", client.id), 1)
    })))

  it.live("a write the database refuses fails the unit with its error at the next statement; the statements after it do not run", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db, storage, trips } = yield* throughProxy
      const client = Records.client()
      yield* storage.transaction("write", (unit) => unit.insertClient(client))
      const other = Records.client()
      const { exit } = yield* trips(storage.transaction("write", (unit) =>
        Effect.gen(function*() {
          yield* unit.insertClient(client) // a duplicate id
          yield* unit.insertClient(other)
          return yield* unit.getClient(other.id)
        })
      ))
      const error = exit._tag === "Failure" ? Option.getOrUndefined(Cause.findErrorOption(exit.cause)) : undefined
      assert.instanceOf(error, Storage.StorageError)
      assert.strictEqual(error?.reason._tag, "StorageConstraintViolated")
      assert.strictEqual(yield* countRows(db, "clients", other.id), 0)
      yield* storage.transaction("write", (unit) => unit.insertClient(other))
      assert.strictEqual(yield* countRows(db, "clients", other.id), 1)
    })))

  it.live("a unit that fails before sending anything sends nothing: no BEGIN, no ROLLBACK", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db, storage, trips } = yield* throughProxy
      const client = Records.client()
      const { count, exit } = yield* trips(storage.transaction("write", (unit) =>
        unit.insertClient(client).pipe(Effect.andThen(Effect.fail("refused by a check of the unit's own")))
      ))
      assert.strictEqual(exit._tag, "Failure")
      assert.strictEqual(count, 0)
      assert.strictEqual(yield* countRows(db, "clients", client.id), 0)
    })))

  it.live("a read unit answers without waiting for its COMMIT's answer, and its connection serves the next unit after it", () =>
    Effect.scoped(Effect.gen(function*() {
      const { proxy, storage, trips } = yield* throughProxy
      const client = Records.client()
      const account = Records.account(client.id)
      yield* storage.transaction("write", (unit) => Effect.andThen(unit.insertClient(client), unit.insertAccount(account)))
      // From the moment the unit has its row, the server's replies are held: its COMMIT is sent and not answered
      // until `resume`, or until 3 s have passed if the unit waits for that answer.
      let resume: (() => void) | undefined
      let waitedForCommit = false
      const read = storage.transaction("read", (unit) =>
        Effect.tap(unit.getAccount(account.id), () =>
          Effect.sync(() => {
            const pass = proxy.holdReplies()
            const timer = setTimeout(() => {
              waitedForCommit = true
              pass()
            }, 3000)
            resume = () => {
              clearTimeout(timer)
              pass()
            }
          }))
      )
      const { count, exit } = yield* trips(read)
      const answeredWhileHeld = !waitedForCommit
      resume?.()
      assert.isTrue(answeredWhileHeld, "the read unit waited for its COMMIT's answer")
      assert.isTrue(exit._tag === "Success" && Option.isSome(exit.value))
      // BEGIN with the read, then COMMIT.
      assert.strictEqual(count, 2)
      // The pool's only connection: the next unit runs after the COMMIT, outside the read's snapshot.
      yield* storage.transaction("write", (unit) =>
        Effect.andThen(unit.getAccount(account.id), unit.updateAccount({ ...account, name: "Renamed" }))
      )
      const again = yield* storage.transaction("read", (unit) => unit.getAccount(account.id))
      assert.strictEqual(Option.getOrThrow(again).name, "Renamed")
    })))

  it.live("statements a unit issues together go in one round trip, in the order issued: the first row is locked while the second waits", () =>
    Effect.scoped(Effect.gen(function*() {
      const { storage, trips, url } = yield* throughProxy
      const client = Records.client()
      const [first, second] = [Records.account(client.id), Records.account(client.id)]
      yield* storage.transaction("write", (unit) => Effect.andThen(unit.insertClient(client), Effect.andThen(unit.insertAccount(first), unit.insertAccount(second))))
      const both = (mode: Storage.UnitMode) =>
        storage.transaction(mode, (unit) => Effect.all([unit.getAccount(first.id), unit.getAccount(second.id)], { concurrency: 2 }))
      // A lookup: both reads in one pipeline.
      const looked = yield* trips(both("lookup"))
      assert.isTrue(looked.exit._tag === "Success" && looked.exit.value.every(Option.isSome))
      assert.strictEqual(looked.count, 1)
      // A write unit, while another connection holds the second row: the first is already locked by the unit.
      const holder = yield* rowLockedElsewhere(url, "accounts", second.id)
      const unit = yield* Effect.forkChild(trips(both("write")))
      // Polled, not slept on: the unit's pipeline reaches the server when this machine gets to it. In the other order
      // the unit would wait on the second row before locking the first, and the first would stay free throughout.
      const firstLocked = yield* Effect.promise(async () => {
        const probe = new pg.Client({ connectionString: url })
        await probe.connect()
        try {
          for (let attempt = 0; attempt < 200; attempt++) {
            try {
              await probe.query("select id from accounts where id = $1 for update nowait", [first.id])
            } catch (error) {
              if ((error as { code?: string }).code === "55P03") return true
              throw error
            }
            await new Promise((resolve) => setTimeout(resolve, 25))
          }
          return false
        } finally {
          await probe.end()
        }
      })
      assert.isTrue(firstLocked, "the first statement of the pair ran before the second waited")
      yield* Effect.promise(() => holder.query("commit"))
      const written = yield* Fiber.join(unit)
      assert.isTrue(written.exit._tag === "Success" && written.exit.value.every(Option.isSome))
      // BEGIN with both reads, then COMMIT.
      assert.strictEqual(written.count, 2)
    })))

  it.live("a unit interrupted while its statements gather sends none of them: its connection goes back to the pool clean", () =>
    Effect.scoped(Effect.gen(function*() {
      const { storage, trips } = yield* throughProxy
      const client = Records.client()
      yield* storage.transaction("write", (unit) => unit.insertClient(client))
      const interrupted = yield* trips(storage.transaction("write", (unit) => Effect.all([unit.getClient(client.id), Effect.interrupt], { concurrency: 2 })))
      assert.strictEqual(interrupted.exit._tag, "Failure")
      assert.strictEqual(interrupted.count, 0)
      // The pool's only connection is clean: the next unit on it begins its own transaction and commits.
      const next = yield* trips(storage.transaction("write", (unit) => unit.getClient(client.id)))
      assert.isTrue(next.exit._tag === "Success" && Option.isSome(next.exit.value))
      assert.strictEqual(next.count, 2)
    })))

  /** What `query` answers in a session opened in `mode` on `db`. */
  const inSession = <R>(db: Kysely<Database>, mode: Storage.UnitMode, query: string) =>
    Effect.gen(function*() {
      const session = yield* PostgresEngine.sessions(db)(mode)
      const answer = yield* session.execute(CompiledQuery.raw(query) as CompiledQuery<R>)
      yield* session.commit
      yield* session.release
      return answer.rows as ReadonlyArray<R>
    })
  /** The value of the server's `setting` in a session opened in `mode` on `db`. */
  const settingIn = (db: Kysely<Database>, mode: Storage.UnitMode, setting: "plan_cache_mode" | "jit") =>
    Effect.map(inSession<Readonly<Record<string, string>>>(db, mode, `show ${setting}`), (rows) => rows[0]?.[setting])
  /** The statements the pool's one connection keeps prepared, with how often each ran on a generic plan and on one for its values. */
  const keptPlans = (db: Kysely<Database>) =>
    inSession<{ readonly statement: string; readonly generic_plans: string; readonly custom_plans: string }>(
      db,
      "lookup",
      "select statement, generic_plans, custom_plans from pg_prepared_statements"
    )
  /** A client with one account and 30 transactions, a millisecond apart. */
  const thirtyTransactions = (storage: Storage.Storage["Service"]) =>
    Effect.gen(function*() {
      const client = Records.client()
      const account = Records.account(client.id)
      const transactions = Array.from({ length: 30 }, (_, i) => Records.transaction(account, { createdAt: Records.at(i), updatedAt: Records.at(i) }))
      yield* storage.transaction("write", (unit) =>
        Effect.gen(function*() {
          yield* unit.insertClient(client)
          yield* unit.insertAccount(account)
          for (const tx of transactions) yield* unit.insertTransaction(tx)
        }))
      return { client, transactions }
    })

  it.live("a read unit's statements run on generic plans, each planned once per connection; write units and lookups keep the server's default", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db, proxy, storage } = yield* throughProxy
      assert.strictEqual(yield* settingIn(db, "read", "plan_cache_mode"), "force_generic_plan")
      assert.strictEqual(yield* settingIn(db, "write", "plan_cache_mode"), "auto")
      assert.strictEqual(yield* settingIn(db, "lookup", "plan_cache_mode"), "auto")
      // Later pages of a list, each in a read unit. pg_prepared_statements is the connection's own, and the pool has
      // one: every statement with a LIMIT or an OFFSET ran on its generic plan, never planned again for its values
      // (under the default, each would have been planned for its values at every run).
      const { client } = yield* thirtyTransactions(storage)
      for (let run = 0; run < 8; run++) {
        const page = yield* storage.transaction("read", (unit) => unit.listTransactions(client.id, {}, { page: 2 + (run % 2), limit: 10 }))
        assert.strictEqual(page.total, 30)
        assert.deepStrictEqual(page.items.map((tx) => tx.createdAt), Array.from({ length: 10 }, (_, i) => Records.at(29 - 10 * (1 + (run % 2)) - i)))
      }
      const kept = (yield* keptPlans(db)).filter(({ statement }) =>
        statement.includes(`"transactions"`) && (statement.includes("limit") || statement.includes("offset"))
      )
      assert.isNotEmpty(kept)
      for (const statement of kept) {
        assert.strictEqual(Number(statement.custom_plans), 0, statement.statement)
        assert.isAbove(Number(statement.generic_plans), 0, statement.statement)
      }
      // On kysely's own transactions (a kysely instance built elsewhere), the same.
      const elsewhere = yield* Effect.acquireRelease(
        Effect.sync(() => new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: proxy.url, max: 1 }) }) })),
        (other) => Effect.promise(() => other.destroy())
      )
      assert.strictEqual(yield* settingIn(elsewhere, "read", "plan_cache_mode"), "force_generic_plan")
      assert.strictEqual(yield* settingIn(elsewhere, "read", "jit"), "off")
      assert.strictEqual(yield* settingIn(elsewhere, "write", "plan_cache_mode"), "auto")
    })))

  it.live("rows read through a pipeline are the rows pg's own query reads: every column in order, each type parsed as pg parses it, nulls kept", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db, url } = yield* throughProxy
      const query = `select i, i::int4 as int4, (9007199254740990 + i)::int8 as int8, (12.3400 * i)::numeric as amount,
        1.5::float8 * i as float8, i % 2 = 0 as even, 'text ' || i as label, case when i = 2 then null else i::text end as sometimes,
        timestamptz '2026-01-01T00:00:00Z' + i * interval '1 second' as at, jsonb_build_object('i', i) as document,
        array[i, i + 1]::int4[] as pair, '\\x00ff'::bytea as bytes, null::text as nothing
        from generate_series(1, 3) as i order by i`
      const piped = yield* inSession<Record<string, unknown>>(db, "lookup", query)
      const direct = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const client = new pg.Client({ connectionString: url })
          await client.connect()
          return client
        }),
        (client) => Effect.promise(() => client.end())
      )
      const expected = (yield* Effect.promise(() => direct.query(query))).rows as ReadonlyArray<Record<string, unknown>>
      assert.lengthOf(piped, 3)
      assert.deepStrictEqual(piped, expected)
      for (const [at, row] of piped.entries()) assert.deepStrictEqual(Object.keys(row), Object.keys(expected[at]!))
      assert.strictEqual(piped[1]!["sometimes"], null)
      assert.typeOf(piped[0]!["int4"], "number")
      assert.instanceOf(piped[0]!["at"], Date)
    })))

  it.live("a lookup that reads a list's first page runs it on a generic plan, in the same round trip; the setting ends with the round trip, and lookups by id keep the default", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db, storage, trips } = yield* throughProxy
      const { client, transactions } = yield* thirtyTransactions(storage)
      // The HTTP API's first pages (Storage.unitForPage): transactions, accounts, and the audit trail's own statement.
      for (let run = 0; run < 8; run++) {
        const { count, exit } = yield* trips(storage.transaction("lookup", (unit) => unit.listTransactions(client.id, {}, { page: 1, limit: 10 })))
        assert.strictEqual(count, 1)
        const page = yield* exit
        assert.strictEqual(page.total, 30)
        assert.deepStrictEqual(page.items.map((tx) => tx.createdAt), Array.from({ length: 10 }, (_, i) => Records.at(29 - i)))
        assert.strictEqual((yield* storage.transaction("lookup", (unit) => unit.listAccounts(client.id, {}, { page: 1, limit: 10 }))).total, 1)
        yield* storage.transaction("lookup", (unit) => unit.pageEvents(client.id, {}, { page: 1, limit: 10 }))
        assert.isTrue(Option.isSome(yield* storage.transaction("lookup", (unit) => unit.getTransaction(transactions[run]!.id))))
      }
      // pg_prepared_statements is the connection's own, and the pool has one. Under the default each first page would
      // have been planned for its values at every run: custom_plans 8.
      const kept = yield* keptPlans(db)
      const firstPages = kept.filter((statement) => statement.statement.includes(LIST_TOTAL) || statement.statement.includes(TRAIL_IN_STRIDE))
      for (const statement of firstPages) assert.strictEqual(Number(statement.custom_plans), 0, statement.statement)
      // The audit trail's first page is one statement in two forms: one takes a mark, at most every
      // MARK_EVERY_MILLIS (PostgresSettledPositions).
      const trail = firstPages.filter((statement) => statement.statement.includes(TRAIL_IN_STRIDE))
      const lists = firstPages.filter((statement) => !trail.includes(statement))
      assert.lengthOf(lists, 2)
      for (const statement of lists) assert.strictEqual(Number(statement.generic_plans), 8, statement.statement)
      assert.strictEqual(trail.reduce((runs, statement) => runs + Number(statement.generic_plans), 0), 8)
      // A transaction by id, in lookups of its own: planned for its values until the server's default settles.
      const byId = kept.filter((statement) => statement.statement.startsWith(`select * from "transactions" where "id" =`))
      assert.lengthOf(byId, 1)
      assert.isAbove(Number(byId[0]!.custom_plans), 0)
      // Nothing stays set on the pooled connection, after a round trip that succeeded or one that failed.
      assert.strictEqual(yield* settingIn(db, "lookup", "plan_cache_mode"), "auto")
      const failed = yield* Effect.exit(Effect.gen(function*() {
        const session = yield* PostgresEngine.sessions(db)("lookup")
        yield* Effect.all([
          session.execute(CompiledQuery.raw(`select 1 as "${LIST_TOTAL}"`)),
          session.execute(CompiledQuery.raw("select 1 / 0"))
        ], { concurrency: 2 })
      }))
      assert.isTrue(failed._tag === "Failure")
      assert.strictEqual(yield* settingIn(db, "lookup", "plan_cache_mode"), "auto")
    })))

  it.live("statements on generic plans (a read unit's, a first page's round trip) are never compiled by JIT, even where the server would compile every statement; write units and other lookups keep the server's setting, and nothing stays set on the connection", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db } = yield* throughProxy
      // JIT on for the session of the pool's one connection, whatever the server's default.
      yield* inSession(db, "write", "select set_config('jit', 'on', false)")
      assert.strictEqual(yield* settingIn(db, "lookup", "jit"), "on")
      assert.strictEqual(yield* settingIn(db, "read", "jit"), "off")
      assert.strictEqual(yield* settingIn(db, "write", "jit"), "on")
      // A first page's round trip: the setting holds for its statements and ends with it.
      const firstPage = yield* Effect.gen(function*() {
        const session = yield* PostgresEngine.sessions(db)("lookup")
        const [, shown] = yield* Effect.all([
          session.execute(CompiledQuery.raw(`select 1 as "${LIST_TOTAL}"`)),
          session.execute(CompiledQuery.raw("show jit") as CompiledQuery<{ readonly jit: string }>)
        ], { concurrency: 2 })
        yield* session.commit
        yield* session.release
        return shown.rows[0]?.jit
      })
      assert.strictEqual(firstPage, "off")
      assert.strictEqual(yield* settingIn(db, "lookup", "jit"), "on")
      // Where the server can compile (PostgreSQL built with LLVM), and would compile every statement (the pool's one
      // connection told so for the rest of its session), a read unit's statement still runs uncompiled.
      const [compiles] = yield* inSession<{ readonly available: boolean }>(db, "lookup", "select pg_jit_available() as available")
      if (compiles?.available !== true) return
      yield* inSession(db, "write", "select set_config('jit_above_cost', '0', false)")
      const explained = (mode: Storage.UnitMode) =>
        Effect.map(
          inSession<{ readonly "QUERY PLAN": unknown }>(db, mode, "explain (analyze, format json) select count(*) from generate_series(1, 10) as i where i % 2 = 0"),
          (rows) => JSON.stringify(rows[0]?.["QUERY PLAN"])
        )
      assert.include(yield* explained("lookup"), `"JIT"`)
      assert.notInclude(yield* explained("read"), `"JIT"`)
      yield* inSession(db, "write", "select set_config('jit_above_cost', '100000', false)")
    })))

  it.live("a trail's counts per stride that read the table (a filter no index holds, a time range) are planned for their values: most of the log is read in one sequential scan; the client's whole log and a record's trail keep a generic plan (PAGE-1, PAGE-4)", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db } = yield* throughProxy
      // Positions held settled as soon as a snapshot holds them, as on SQLite: a transaction open anywhere on the
      // server (another test file's) holds back what PostgreSQL's snapshots hold settled (SettledPositions), and the
      // trails would then be counted without their strides. The statements are the engine's own.
      const storage = SqlStorage.make(db, { ...PostgresEngine, logSettling: undefined }, { maxRetries: 0 })
      const client = Records.client()
      yield* storage.transaction("write", (unit) => unit.insertClient(client))
      // Three strides and some of the client's events, a millisecond apart: one in three an account's (the record),
      // the others transactions'.
      const events = 3 * STRIDE_POSITIONS + 100
      const record = "00000000-0000-7000-9000-000000000001"
      yield* Effect.promise(() =>
        sql`insert into domain_events (id, type, client_id, entity_type, entity_id, actor, at, data)
          select '00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'),
            case when i % 3 = 0 then 'funds.reserved' else 'transaction.initiated' end, ${client.id},
            case when i % 3 = 0 then 'account' else 'transaction' end,
            case when i % 3 = 0 then ${record} else '00000000-0000-7000-a000-' || lpad(to_hex(i), 12, '0') end,
            '{"kind":"system"}', to_char(timestamp '2026-01-01' + i * interval '1 millisecond', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), '{}'
          from generate_series(1, ${events}::int) as i`.execute(db)
      )
      yield* Effect.promise(() => sql`analyze domain_events`.execute(db))
      const accounts = Math.floor(events / 3)
      const trails: ReadonlyArray<readonly [DomainEvent.TrailFilter, number]> = [
        [{ entityType: "transaction" }, events - accounts],
        [{ types: ["funds.reserved"] }, accounts],
        [{ from: Records.at(1_000) }, events - 999],
        [{}, events],
        [{ entityId: record }, accounts],
        [{ entityId: record, from: Records.at(1_000) }, accounts - 333]
      ]
      // A later page: a read unit, which counts the trail's strides.
      for (const [filter, total] of trails) {
        const page = yield* storage.transaction("read", (unit) => unit.pageEvents(client.id, filter, { page: 2, limit: 20 }))
        assert.strictEqual(page.total, total, JSON.stringify(filter))
        assert.lengthOf(page.items, 20)
      }
      const counts = (yield* keptPlans(db)).map(({ statement }) => statement).filter((statement) => statement.includes(`as "stride"`))
      const planned = counts.filter((statement) => statement.includes(`'${client.id}'`))
      const generic = counts.filter((statement) => !planned.includes(statement))
      // The entity type's, the types', and the time range's base trail's times, each read once per trail.
      assert.lengthOf(planned, 3, counts.join("\n"))
      assert.isDefined(planned.find((text) => text.includes(`min("at")`)), counts.join("\n"))
      for (const statement of planned) assert.notMatch(statement, /\$\d/, "a value bound as a parameter")
      for (const [filter, statement] of [["'transaction'", "entity type"], ["'funds.reserved'", "types"]] as const) {
        const count = planned.find((text) => text.includes(filter))
        assert.isDefined(count, statement)
        const plan = (yield* inSession<{ readonly "QUERY PLAN": string }>(db, "read", `explain ${count}`)).map((row) => row["QUERY PLAN"]).join("\n")
        assert.include(plan, "Seq Scan on domain_events", `${statement}: ${plan}`)
      }
      // Bound, on a generic plan: the whole log's (the client's index alone), the record's (the entity's index), its
      // base trail's times for a time range (the entity's index too), and each time range's count within its edge
      // strides (a few strides, asked for each new range).
      assert.lengthOf(generic, 5, counts.join("\n"))
      for (const statement of generic) assert.match(statement, /"client_id" = \$1/)
      for (const shape of [`"entity_id" = $2) and`, `"at" >= $2`, `min("at")`, `"entity_id" = $2 and "at" >= $3`]) {
        assert.isDefined(generic.find((text) => text.includes(shape)), `${shape} in\n${counts.join("\n")}`)
      }
    })))

  it.live("an instance used only through pipelined units ends its pool when destroyed, as one kysely used does: no connection is left open until the pool's idle timeout", () =>
    Effect.gen(function*() {
      const { url } = yield* temporaryPostgresDatabase
      const db = yield* Effect.promise(() => openPostgres({ connectionString: url, pool: { max: 1 } }))
      // Kysely's own driver never ran a statement here, so kysely alone would not end the pool.
      assert.deepStrictEqual(yield* inSession<{ readonly one: number }>(db, "lookup", "select 1 as one"), [{ one: 1 }])
      yield* Effect.promise(() => db.destroy())
      const after = yield* Effect.exit(inSession(db, "lookup", "select 1 as one"))
      const error = Exit.isFailure(after) ? Cause.squash(after.cause) : undefined
      assert.isTrue(error instanceof Storage.StorageError && error.isUnavailable, String(error))
      assert.include(error instanceof Storage.StorageError ? error.message : "", "after calling end on the pool")
      // Destroying again changes nothing and does not fail.
      yield* Effect.promise(() => db.destroy())
    }).pipe(Effect.scoped))

  it.live("on a kysely instance built elsewhere, units run through kysely's transactions, one statement per round trip", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db: migrated, proxy } = yield* throughProxy
      const elsewhere = yield* Effect.acquireRelease(
        Effect.sync(() => new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: proxy.url, max: 1 }) }) })),
        (db) => Effect.promise(() => db.destroy())
      )
      const storage = SqlStorage.make(elsewhere, PostgresEngine, { maxRetries: 0 })
      // Its sessions cannot confirm a kept credential in a unit's round trip, so none is kept.
      assert.isUndefined(storage.keptCredentials)
      yield* storage.transaction("read", (unit) => unit.getClient(Records.client().id))
      const client = Records.client()
      const count = yield* Effect.promise(() =>
        proxy.count(() =>
          Effect.runPromise(storage.transaction("write", (unit) => Effect.andThen(unit.insertClient(client), unit.insertAccount(Records.account(client.id)))))
        )
      )
      // BEGIN, each insert, COMMIT.
      assert.strictEqual(count, 4)
      assert.strictEqual(yield* countRows(migrated, "clients", client.id), 1)
    })))
})

/**
 * AUTH-PERM-2 with kept credentials (KeptApiUsers): a unit of a request that runs on a kept API user re-reads the
 * row in its first round trip, and a row that changed stops the unit before anything of it commits.
 */
describe.skipIf(postgresSkipReason !== undefined)("a kept credential, confirmed in a unit's first round trip", () => {
  /** An API user, kept by a lookup by its key id as the core's authentication makes; a fresh pending check of it. */
  const keptUser = Effect.gen(function*() {
    const setup = yield* throughProxy
    const client = Records.client()
    const user = Records.apiUser(client.id)
    yield* setup.storage.transaction("write", (unit) => Effect.andThen(unit.insertClient(client), unit.insertApiUser(user)))
    yield* setup.storage.transaction("lookup", (unit) => unit.findApiUserByKeyId(user.keyId))
    const kept = setup.storage.keptCredentials?.get(user.keyId)
    if (kept === undefined) return yield* Effect.die(new Error("the lookup kept no API user"))
    assert.deepStrictEqual(kept.user, user)
    const pending = (): Storage.PendingCredential => ({ keyId: user.keyId, stamp: kept.stamp, confirmed: false })
    // Another connection changes the row, as another node, the operator CLI or SQL by hand would.
    const changeRow = Effect.promise(() =>
      setup.db.updateTable("api_users").set({ permissions: JSON.stringify(["View custody account"]) }).where("id", "=", user.id).execute()
    )
    return { ...setup, client, user, pending, changeRow }
  })

  const credentialChanged = (exit: Exit.Exit<unknown, unknown>): boolean =>
    exit._tag === "Failure" &&
    Cause.prettyErrors(exit.cause).some((error) => error.message.includes("CredentialChanged"))

  it.live("AUTH-PERM-2: a lookup confirms an unchanged credential with its first statement, one round trip; a changed row fails it", () =>
    Effect.scoped(Effect.gen(function*() {
      const { storage, trips, client, pending, changeRow } = yield* keptUser
      const lookup = (credential: Storage.PendingCredential) =>
        Effect.provideService(storage.transaction("lookup", (unit) => unit.getClient(client.id)), Storage.CurrentCredential, credential)
      const unchanged = pending()
      const confirmed = yield* trips(lookup(unchanged))
      assert.isTrue(confirmed.exit._tag === "Success" && Option.isSome(confirmed.exit.value))
      assert.isTrue(unchanged.confirmed)
      assert.strictEqual(confirmed.count, 1)

      yield* changeRow
      const stale = pending()
      const refused = yield* trips(lookup(stale))
      assert.isTrue(credentialChanged(refused.exit), String(refused.exit))
      assert.isFalse(stale.confirmed)
      assert.strictEqual(refused.count, 1)
    })))

  it.live("AUTH-PERM-2: a write unit on a changed credential commits nothing, not even an insert that would go with COMMIT", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db, storage, trips, pending, changeRow } = yield* keptUser
      const insert = (credential: Storage.PendingCredential, client = Records.client()) => ({
        client,
        unit: Effect.provideService(storage.transaction("write", (unit) => unit.insertClient(client)), Storage.CurrentCredential, credential)
      })
      const unchanged = pending()
      const kept = insert(unchanged)
      const committed = yield* trips(kept.unit)
      assert.strictEqual(committed.exit._tag, "Success")
      assert.isTrue(unchanged.confirmed)
      // BEGIN, the re-read and the insert, judged; then COMMIT (without a credential to confirm: one round trip).
      assert.strictEqual(committed.count, 2)
      assert.strictEqual(yield* countRows(db, "clients", kept.client.id), 1)

      const stale = pending()
      yield* changeRow
      const refused = insert(stale)
      const outcome = yield* trips(refused.unit)
      assert.isTrue(credentialChanged(outcome.exit), String(outcome.exit))
      assert.isFalse(stale.confirmed)
      // BEGIN, the re-read and the insert; then ROLLBACK.
      assert.strictEqual(outcome.count, 2)
      assert.strictEqual(yield* countRows(db, "clients", refused.client.id), 0)
    })))

  it.live("a unit that sends nothing leaves the credential unconfirmed; one confirmed already is not read again", () =>
    Effect.scoped(Effect.gen(function*() {
      const { storage, trips, client, pending, changeRow } = yield* keptUser
      const untouched = pending()
      const nothing = yield* trips(Effect.provideService(storage.transaction("read", () => Effect.void), Storage.CurrentCredential, untouched))
      assert.strictEqual(nothing.exit._tag, "Success")
      assert.strictEqual(nothing.count, 0)
      assert.isFalse(untouched.confirmed)
      // Confirmed by an earlier unit of its request, a credential is not re-read, whatever happened to the row since.
      yield* changeRow
      const confirmed = { ...pending(), confirmed: true }
      const read = yield* trips(Effect.provideService(storage.transaction("read", (unit) => unit.getClient(client.id)), Storage.CurrentCredential, confirmed))
      assert.strictEqual(read.exit._tag, "Success")
    })))
})

describe.skipIf(postgresSkipReason !== undefined)("a round trip the database does not answer", () => {
  /** A connection of its own, outside any pool; closed with the scope. */
  const ownConnection = Effect.gen(function*() {
    const { url } = yield* temporaryPostgresDatabase
    return yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const connection = new pg.Client({ connectionString: url })
        connection.on("error", () => undefined)
        await connection.connect()
        return connection
      }),
      (connection) => Effect.promise(() => connection.end().catch(() => undefined))
    )
  })
  /** Runs `statements` as one pipeline on `connection`, each statement's answer awaited at most `replyTimeoutMillis`. */
  const pipelined = (connection: pg.Client, replyTimeoutMillis: number, statements: ReadonlyArray<string>) =>
    Effect.exit(Effect.tryPromise(async () => {
      const parts = await pgParts({ preparedStatements: 0, replyTimeoutMillis })
      return new Promise<number>((resolve, reject) => {
        const pipeline = new Pipeline(parts, statements.map((sql) => ({ sql, parameters: [] })), (error, results) => error === undefined ? resolve(results?.length ?? 0) : reject(error))
        connection.query(pipeline as never)
      })
    }))

  it.live("a round trip answered within the bound ends its bound with it: the connection stays open past it, and answers the next", () =>
    Effect.scoped(Effect.gen(function*() {
      const connection = yield* ownConnection
      const exit = yield* pipelined(connection, 300, ["select pg_sleep(0.1)", "select 1"])
      assert.deepStrictEqual(exit, Exit.succeed(2))
      yield* Effect.sleep("500 millis")
      assert.strictEqual((yield* Effect.promise(() => connection.query("select 2 as two"))).rows[0]?.two, 2)
    })))

  it.live("a statement not answered within the bound fails its round trip as UnansweredReply, and the connection is closed: a late answer is never taken for the next statement's", () =>
    Effect.scoped(Effect.gen(function*() {
      const connection = yield* ownConnection
      const exit = yield* pipelined(connection, 300, ["select 1", "select pg_sleep(2)"])
      const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
      assert.instanceOf(error instanceof Error ? error.cause : undefined, UnansweredReply)
      // Refused, not left waiting: the statement fails with the closed connection.
      const next = yield* Effect.exit(Effect.tryPromise(() => connection.query("select 2 as two")).pipe(Effect.timeout("5 seconds")))
      const refusal = Exit.isFailure(next) ? Cause.squash(next.cause) : undefined
      assert.match(String(refusal instanceof Error ? refusal.cause : refusal), /Connection terminated|not queryable/)
    })))

  /**
   * Storage through the proxy, re-runs on as in production, each round trip's answer awaited at most 300 ms and a
   * connection at most a second.
   */
  const bounded = Effect.gen(function*() {
    const setup = yield* proxied({ maxRetries: SqlStorage.DEFAULT_MAX_RETRIES, pool: { replyTimeoutMillis: 300, connectionTimeoutMillis: 1000 } })
    const client = Records.client()
    yield* setup.storage.transaction("write", (unit) => unit.insertClient(client))
    return { ...setup, client }
  })
  /** The StorageError `exit` failed with, if it did. */
  const storageErrorOf = (exit: Exit.Exit<unknown, unknown>): Storage.StorageError | undefined => {
    const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
    return error instanceof Storage.StorageError ? error : undefined
  }

  it.live("a read unit, a lookup and a write unit whose statement gets no answer fail as unavailable within the bound, are not re-run, and the pool serves again once the database answers", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, proxy, storage } = yield* bounded
      // The read unit last: it gives its connection back only once its COMMIT is answered (which it does not wait
      // for), and the pool has one connection.
      const units = {
        lookup: storage.transaction("lookup", (unit) => unit.getClient(client.id)),
        write: storage.transaction("write", (unit) => unit.getClient(client.id)),
        read: storage.transaction("read", (unit) => unit.getClient(client.id))
      }
      for (const [mode, unit] of Object.entries(units)) {
        const opened = proxy.connections()
        const release = proxy.holdReplies()
        const error = storageErrorOf(yield* Effect.exit(unit))
        release()
        assert.isTrue(error?.isUnavailable === true, `${mode}: ended as ${String(error)}`)
        assert.include(error?.message, "did not answer within 300 ms", mode)
        // Not re-run: a re-run would have opened a connection in place of the one closed.
        assert.strictEqual(proxy.connections(), opened, `${mode}: connections opened while the database did not answer`)
        // The closed connection is replaced, and the unit is answered.
        assert.isTrue(Option.isSome(yield* unit), mode)
        assert.strictEqual(proxy.connections(), opened + 1, mode)
      }
    })))

  it.live("a unit that gets no connection within connectionTimeoutMillis fails as unavailable at once: one connection tried, not one for each re-run", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, proxy, storage } = yield* bounded
      const lookup = storage.transaction("lookup", (unit) => unit.getClient(client.id))
      const release = proxy.holdReplies()
      // The pool's one connection is closed when its round trip gets no answer; the next unit needs a new one,
      // whose start-up gets no answer either.
      assert.isTrue(storageErrorOf(yield* Effect.exit(lookup))?.isUnavailable)
      const opened = proxy.connections()
      const error = storageErrorOf(yield* Effect.exit(lookup))
      const tried = proxy.connections() - opened
      release()
      assert.isTrue(error?.isUnavailable === true && !error.isRetryable, String(error))
      assert.include(error?.message, "connection timeout")
      assert.strictEqual(tried, 1, "connections tried while the database did not answer")
      assert.isTrue(Option.isSome(yield* lookup))
    })))

  it.live("a statement the server stops at statement_timeout fails as unavailable (503), not as a fault (500), and is not re-run", () =>
    Effect.scoped(Effect.gen(function*() {
      // No lock timeout: the write unit's read waits on the row lock until the server's statement timeout stops it.
      const { storage, url } = yield* proxied({ maxRetries: SqlStorage.DEFAULT_MAX_RETRIES, pool: { lockTimeoutMillis: 0, statementTimeoutMillis: 300 } })
      const client = Records.client()
      yield* storage.transaction("write", (unit) => unit.insertClient(client))
      const holder = yield* rowLockedElsewhere(url, "clients", client.id)
      let runs = 0
      const error = storageErrorOf(yield* Effect.exit(storage.transaction("write", (unit) => Effect.suspend(() => (runs++, unit.getClient(client.id))))))
      yield* Effect.promise(() => holder.query("rollback"))
      assert.isTrue(error?.isUnavailable === true && !error.isRetryable, String(error))
      assert.include(error?.message, "statement timeout")
      assert.strictEqual(runs, 1)
    })))

  it.live("a statement kysely runs itself (a migration's, the rate limiter's) has the same bound, and its connection is closed, not lent again", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db, proxy } = yield* bounded
      const read = Effect.tryPromise(() => db.selectFrom("clients").select("id").execute())
      const release = proxy.holdReplies()
      const exit = yield* Effect.exit(read)
      release()
      const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
      assert.instanceOf(error instanceof Error ? error.cause : undefined, UnansweredReply, String(exit))
      // The pool's one connection was closed: the next statement opens another.
      const opened = proxy.connections()
      assert.strictEqual((yield* read).length, 1)
      assert.strictEqual(proxy.connections(), opened + 1)
    })))

  it.live("a COMMIT whose answer does not come fails as outcome unknown and is not re-run: the database may have committed, and here it had", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db, proxy, storage } = yield* bounded
      const client = Records.client()
      const release = proxy.holdReplies()
      // BEGIN, the insert and COMMIT: one round trip, whose answer is held.
      const error = storageErrorOf(yield* Effect.exit(storage.transaction("write", (unit) => unit.insertClient(client))))
      release()
      assert.isTrue(error?.isOutcomeUnknown === true, String(error))
      assert.include(error?.message, "commit outcome unknown")
      assert.strictEqual(yield* countRows(db, "clients", client.id), 1)
    })))
})
