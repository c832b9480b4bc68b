/**
 * Statements each PostgreSQL connection keeps prepared (PreparedStatements, issue 17), seen on the wire by a proxy
 * in front of a real database: a statement is parsed once per connection and then only bound; a connection keeps
 * at most its capacity, and none with capacity 0; a schema change that makes a kept statement's plan invalid costs
 * the unit a re-run, never an error; a name a failed pipeline may have left on the server is closed with the next
 * one; the rate limiter's count in the database is kept too. And the classification the re-run rests on.
 */

import { describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { assert } from "vitest"
import { migrateToLatest } from "../src/migrations/migrateToLatest.js"
import { classifyPostgresError } from "../src/postgres/classifyPostgresError.js"
import { openPostgres } from "../src/postgres/layerPostgres.js"
import { PostgresEngine } from "../src/postgres/PostgresEngine.js"
import { PreparedStatements } from "../src/postgres/PreparedStatements.js"
import * as SqlRateLimiter from "../src/SqlRateLimiter.js"
import * as SqlStorage from "../src/SqlStorage.js"
import { scopedCountingProxy } from "./CountingProxy.js"
import { admin, postgresSkipReason, temporaryPostgresDatabase } from "./Dialects.js"
import * as Records from "./Records.js"

if (postgresSkipReason !== undefined) console.log(`PreparedStatements.test.ts: skipped: ${postgresSkipReason}`)

/** A migrated database through a counting proxy, one connection keeping up to `preparedStatements`; an account on it. */
const world = (preparedStatements?: number) =>
  Effect.gen(function*() {
    const { url } = yield* temporaryPostgresDatabase
    const proxy = yield* scopedCountingProxy(url)
    const db = yield* Effect.acquireRelease(
      Effect.promise(() => openPostgres({ connectionString: proxy.url, pool: { max: 1, ...(preparedStatements === undefined ? {} : { preparedStatements }) } })),
      (db) => Effect.promise(() => db.destroy())
    )
    yield* Effect.promise(() => migrateToLatest(db))
    const storage = SqlStorage.make(db, PostgresEngine)
    const client = Records.client()
    const account = Records.account(client.id)
    yield* storage.transaction("write", (unit) => Effect.andThen(unit.insertClient(client), unit.insertAccount(account)))
    /** Parse and Close messages `work` sent, counted once every round trip it made was answered (a read unit's COMMIT goes after it). */
    const sent = <A, E>(work: Effect.Effect<A, E>) =>
      Effect.promise(async () => {
        const before = proxy.sent()
        let value: A | undefined
        await proxy.count(async () => {
          value = await Effect.runPromise(work)
        })
        const after = proxy.sent()
        return { value: value as A, parses: after.parses - before.parses, closes: after.closes - before.closes }
      })
    const readAccount = storage.transaction("read", (unit) => unit.getAccount(account.id))
    return { url, db, storage, client, account, sent, readAccount }
  })

describe.skipIf(postgresSkipReason !== undefined)("statements kept prepared on each PostgreSQL connection", () => {
  it.live("a unit's statements are parsed on its connection's first run of them; every later run only binds them", () =>
    Effect.scoped(Effect.gen(function*() {
      const { readAccount, sent } = yield* world()
      const first = yield* sent(readAccount)
      // A read unit's BEGIN, what it sets (PostgresSession's `isolation`) and the read; COMMIT was parsed, and kept,
      // by the unit that inserted the account.
      assert.strictEqual(first.parses, 3)
      for (let run = 0; run < 3; run++) {
        const again = yield* sent(readAccount)
        assert.isTrue(Option.isSome(again.value))
        assert.strictEqual(again.parses, 0)
      }
    })))

  /** The read unit run twice on a connection keeping up to `capacity` statements: what each run sent. */
  const twoReads = (capacity: number) =>
    Effect.gen(function*() {
      const { readAccount, sent } = yield* world(capacity)
      const first = yield* sent(readAccount)
      const again = yield* sent(readAccount)
      assert.isTrue(Option.isSome(again.value))
      return { first, again }
    })

  it.live("capacity 0 keeps nothing: every statement is parsed at every run, as an unnamed statement", () =>
    Effect.scoped(Effect.gen(function*() {
      const { again, first } = yield* twoReads(0)
      // Every statement of the unit (BEGIN, the read, COMMIT and the rest), again.
      assert.isAtLeast(again.parses, 3)
      assert.strictEqual(again.parses, first.parses)
    })))

  it.live("a connection keeps at most its capacity: a unit with more statements than that parses some at every run", () =>
    Effect.scoped(Effect.gen(function*() {
      const { again, first } = yield* twoReads(2)
      // The read unit runs more than two statements: whichever two are kept, the others are parsed again, and the
      // names they push out are closed.
      assert.isAtLeast(first.parses, 3)
      assert.isAtLeast(again.parses, first.parses - 2)
      assert.isAbove(again.closes, 0)
    })))

  it.live("a schema change that alters a kept statement's result (another node's migration): the unit runs again on fresh statements and answers", () =>
    Effect.scoped(Effect.gen(function*() {
      const { account, readAccount, sent, url } = yield* world()
      yield* readAccount
      yield* Effect.promise(() => admin(url, (other) => other.query("alter table accounts add column added_by_a_later_release text")))
      // Without the re-run: "cached plan must not change result type", a fault.
      const after = yield* sent(readAccount)
      assert.strictEqual(Option.getOrThrow(after.value).id, account.id)
      assert.isAbove(after.parses, 0)
      // The forgotten names are closed with the next round trip, which parses nothing.
      const next = yield* sent(readAccount)
      assert.strictEqual(next.parses, 0)
      assert.isAbove(after.closes + next.closes, 0)
    })))

  it.live("a statement after the one that failed was never parsed: its name is not kept, and its next run parses it", () =>
    Effect.scoped(Effect.gen(function*() {
      const { account, client, db, readAccount, sent } = yield* world()
      // Retries off: a unit that failed here must fail once, so a lost name cannot hide behind a re-run.
      const storage = SqlStorage.make(db, PostgresEngine, { maxRetries: 0 })
      yield* readAccount
      // One round trip: the account's insert again, which fails on its key, then a whitelisted address's insert, a
      // text this connection has not run: the server skips its Parse.
      const failed = yield* sent(Effect.exit(storage.transaction("write", (unit) =>
        Effect.andThen(unit.insertAccount(account), unit.insertWhitelistedAddress(Records.whitelisted(client.id)))
      )))
      assert.isTrue(failed.value._tag === "Failure")
      // Kept, it would be bound under a name the server never had (26000) and the unit would fail.
      const inserted = yield* sent(storage.transaction("write", (unit) => unit.insertWhitelistedAddress(Records.whitelisted(client.id))))
      assert.strictEqual(inserted.parses, 1)
      const next = yield* sent(readAccount)
      assert.strictEqual(next.parses, 0)
    })))
})

describe.skipIf(postgresSkipReason !== undefined)("a rate-limit count in the database, kept prepared (LIM-RATE-1)", () => {
  it.live("a turn's upsert is parsed on its connection's first count; every later count of as many windows only binds it", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db, sent } = yield* world()
      const limiter = SqlRateLimiter.make(db, PostgresEngine)
      const policy = { limit: 100, windowSeconds: 3600 }
      const key = `crk_${crypto.randomUUID()}`
      // The first count also purges ended windows (once a minute), a statement of its own.
      const first = yield* sent(limiter.consume(key, policy))
      assert.strictEqual(first.value.remaining, 99)
      assert.isAtLeast(first.parses, 1)
      for (let count = 2; count <= 4; count++) {
        const again = yield* sent(limiter.consume(key, policy))
        assert.strictEqual(again.value.remaining, 100 - count)
        // Sent unnamed, through kysely's driver, each count was parsed again.
        assert.strictEqual(again.parses, 0)
      }
    })))
})

describe("what says a connection's kept statements are gone", () => {
  const reasonOf = (cause: object) => classifyPostgresError(cause).reason._tag
  it("a plan a schema change made invalid, or a statement the session no longer has: a lost race, re-run", () => {
    assert.strictEqual(reasonOf({ code: "0A000", message: "cached plan must not change result type" }), "StorageConflict")
    assert.strictEqual(reasonOf({ code: "26000", message: "prepared statement \"cr7\" does not exist" }), "StorageConflict")
  })
  it("any other feature PostgreSQL does not support is a fault: running it again cannot help", () => {
    assert.strictEqual(reasonOf({ code: "0A000", message: "cannot lock rows in materialized view" }), "StorageFault")
  })
  it("a full connection evicts the statement used least recently, and closes its name", () => {
    const prepared = new PreparedStatements(2)
    const kept = (texts: ReadonlyArray<string>) => {
      const plan = prepared.plan(texts)
      prepared.succeeded(plan)
      return plan
    }
    const first = kept(["a", "b"])
    kept(["a"])
    // "b" is the least recently used: "c" takes its place.
    const third = kept(["c"])
    assert.deepStrictEqual(third.closing, [first.statements[1]?.name ?? "(none)"])
    assert.isFalse(prepared.plan(["a"]).statements[0]?.parse)
    assert.isTrue(prepared.plan(["b"]).statements[0]?.parse)
    // More new statements in one round trip than the connection keeps: the rest go unnamed.
    const one = new PreparedStatements(1).plan(["x", "y"]).statements
    assert.deepStrictEqual(one.map((statement) => [statement.name !== "", statement.parse]), [[true, true], [false, true]])
  })

  it("a kept name is forgotten (and closed) only when the failure says so", () => {
    const prepared = new PreparedStatements(8)
    const plan = prepared.plan(["select 1", "select 2", "select 1"])
    // The same text twice in one pipeline is parsed once.
    assert.deepStrictEqual(plan.statements.map((s) => s.parse), [true, true, false])
    prepared.succeeded(plan)
    prepared.failed(prepared.plan(["select 1"]), { code: "23505" })
    assert.isFalse(prepared.plan(["select 1"]).statements[0]?.parse)
    prepared.failed(prepared.plan(["select 1"]), { code: "0A000", message: "cached plan must not change result type" })
    const fresh = prepared.plan(["select 1"])
    assert.isTrue(fresh.statements[0]?.parse)
    assert.strictEqual(fresh.closing.length, 2)
  })
})


