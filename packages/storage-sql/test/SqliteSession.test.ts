/**
 * Units of work on SQLite run straight on better-sqlite3 (SqliteSession): synchronously when the connection is
 * free, and never interleaved with kysely's own use of the same connection (ConnectionGate).
 */
import { assert, describe, it } from "@effect/vitest"
import BetterSqlite3 from "better-sqlite3"
import { Effect, Exit, Fiber, Option } from "effect"
import { ConnectionGate } from "../src/sqlite/ConnectionGate.js"
import { SqliteEngine } from "../src/sqlite/SqliteEngine.js"
import * as SqlStorage from "../src/SqlStorage.js"
import { isWanted, migratedSqliteFile } from "./Dialects.js"
import * as Records from "./Records.js"

const openFile = Effect.map(migratedSqliteFile("session.db"), ({ db }) => db)

/** A storage on a migrated file holding one client, stored by a write unit (which waits for its group's commit). */
const storageWithClient = Effect.gen(function*() {
  const storage = SqlStorage.make(yield* openFile, SqliteEngine)
  const client = Records.client()
  yield* storage.transaction("write", (unit) => unit.insertClient(client))
  return { storage, client }
})

describe.skipIf(!isWanted("sqlite-file"))("SQLite units of work run on the connection directly", () => {
  it.live("a read or lookup unit whose connection is free runs to its end synchronously: no promise, no suspension", () =>
    Effect.gen(function*() {
      // CommitGroup.test.ts has write units synchronous with groups turned off.
      const { storage, client } = yield* storageWithClient
      // runSyncExit fails with an AsyncFiberError if anything in the unit had to wait.
      const read = Effect.runSyncExit(storage.transaction("read", (unit) => unit.getClient(client.id)))
      assert.isTrue(Exit.isSuccess(read) && Option.isSome(read.value))
      const looked = Effect.runSyncExit(storage.transaction("lookup", (unit) => unit.getClient(client.id)))
      assert.isTrue(Exit.isSuccess(looked) && Option.isSome(looked.value))
    }))

  it.live("a lookup on a file runs on the always-open read-only session: under half the Effect steps of a read unit", () =>
    Effect.gen(function*() {
      const { storage, client } = yield* storageWithClient
      // Steps the run loop takes for a whole unit, run synchronously on a fiber of its own.
      const stepsOf = (mode: "read" | "lookup") =>
        Effect.runSync(Effect.andThen(
          storage.transaction(mode, (unit) => unit.getClient(client.id)),
          Effect.withFiber((fiber) => Effect.succeed(fiber.currentOpCount))
        ))
      const read = stepsOf("read")
      const lookup = stepsOf("lookup")
      // Without the open session a lookup pays for an acquire, a commit and a release as a read unit does.
      assert.isBelow(lookup * 2, read, `lookup ${lookup} steps, read ${read}`)
      const looked = Effect.runSyncExit(storage.transaction("lookup", (unit) => unit.getClient(client.id)))
      assert.isTrue(Exit.isSuccess(looked) && Option.isSome(looked.value))
    }))

  it.live("kysely's statements wait for an open unit and are not part of it (the unit rolls back alone)", () =>
    Effect.gen(function*() {
      const db = yield* openFile
      const storage = SqlStorage.make(db, SqliteEngine)
      const client = Records.client()
      const order: Array<string> = []
      // A unit that writes, waits (holding the connection across a suspension), then fails and rolls back.
      const unit = storage.transaction("write", (unit) =>
        unit.insertClient(client).pipe(
          Effect.andThen(Effect.sleep("50 millis")),
          Effect.andThen(Effect.sync(() => order.push("unit ends"))),
          Effect.andThen(Effect.fail("abandon" as const))
        ))
      const fiber = yield* Effect.forkChild(Effect.flip(unit))
      yield* Effect.sleep("10 millis")
      // Meanwhile kysely writes on the same connection: it must wait, and survive the unit's rollback.
      yield* Effect.promise(() =>
        db.insertInto("rate_limit_windows").values({ key: "k", window_start: 0, window_end: 1, count: 1 }).execute()
          .then(() => order.push("kysely wrote"))
      )
      assert.strictEqual(yield* Fiber.join(fiber), "abandon")
      assert.deepStrictEqual(order, ["unit ends", "kysely wrote"])
      const windows = yield* Effect.promise(() => db.selectFrom("rate_limit_windows").selectAll().execute())
      assert.strictEqual(windows.length, 1)
      const clients = yield* storage.transaction("read", (unit) => unit.getClient(client.id))
      assert.isTrue(Option.isNone(clients))
    }))
})

describe.skipIf(!isWanted("sqlite-file"))("SQLite's data version in a read unit", () => {
  it.live("PAGE-4: `PRAGMA data_version` after BEGIN begins the read transaction, as a SELECT does: a commit after it is seen by neither (a later page reads it with the total, in either order)", () =>
    Effect.gen(function*() {
      const { filename } = yield* migratedSqliteFile("version.db")
      const reader = new BetterSqlite3(filename)
      const writer = new BetterSqlite3(filename)
      try {
        const count = () => (reader.prepare("select count(*) as n from clients").get() as { readonly n: number }).n
        reader.exec("begin")
        const version = reader.pragma("data_version", { simple: true })
        writer.prepare("insert into clients (id, name, created_at) values (?, ?, ?)")
          .run("00000000-0000-7000-8000-00000000c1e1", "Other process", "2026-01-01T00:00:00.000Z")
        assert.strictEqual(reader.pragma("data_version", { simple: true }), version)
        assert.strictEqual(count(), 0)
        reader.exec("commit")
        assert.notStrictEqual(reader.pragma("data_version", { simple: true }), version)
        assert.strictEqual(count(), 1)
      } finally {
        reader.close()
        writer.close()
      }
    }))
})

describe("ConnectionGate", () => {
  it.live("is taken synchronously when free, then handed over in order, skipping a waiter that was interrupted", () =>
    Effect.gen(function*() {
      const gate = new ConnectionGate()
      assert.isTrue(gate.tryTake())
      assert.isFalse(gate.tryTake())
      const order: Array<string> = []
      const first = gate.take().then(() => order.push("first"))
      const interrupted = yield* Effect.forkChild(gate.takeEffect.pipe(Effect.andThen(Effect.sync(() => order.push("interrupted")))))
      const third = yield* Effect.forkChild(gate.takeEffect.pipe(Effect.andThen(Effect.sync(() => order.push("third")))))
      yield* Effect.yieldNow
      yield* Fiber.interrupt(interrupted)
      gate.give()
      yield* Effect.promise(() => first)
      gate.give()
      yield* Fiber.join(third)
      assert.deepStrictEqual(order, ["first", "third"])
      gate.give()
      assert.isTrue(gate.tryTake())
    }))
})
