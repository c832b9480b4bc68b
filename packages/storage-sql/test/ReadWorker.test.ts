/**
 * Reads off the event loop (ReadWorker): a file store's worker reads what the store committed, in a snapshot of
 * each statement's own, with a small page cache; a statement it cannot run is refused with SQLite's code, and the
 * worker reads on; a worker that ended is started again by the next read; on Linux its thread runs at the lowest
 * priority; a store in memory has none, and neither has one told not to.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { CompiledQuery } from "kysely"
import { migrateToLatest } from "../src/migrations/migrateToLatest.js"
import { openSqlite } from "../src/sqlite/layerSqlite.js"
import { CACHE_KIB } from "../src/sqlite/ReadWorker.js"
import { handleOf } from "../src/sqlite/SqliteSession.js"
import { isWanted, temporaryDirectory } from "./Dialects.js"

describe.skipIf(!isWanted("sqlite-file"))("SQLite reads off the event loop on a worker thread", () => {
  it.live("the worker reads what the store committed, refuses what it cannot run with SQLite's code, and starts again after it ended", () =>
    Effect.gen(function*() {
      const filename = join(yield* temporaryDirectory, "reads.db")
      const db = yield* Effect.acquireRelease(Effect.promise(() => openSqlite({ filename })), (db) => Effect.promise(() => db.destroy()))
      yield* Effect.promise(() => migrateToLatest(db))
      const worker = handleOf(db)?.readWorker
      assert.isDefined(worker)
      if (worker === undefined) return
      const count = CompiledQuery.raw("select count(*) as n from rate_limit_windows where key like ?", ["k%"])
      assert.deepStrictEqual(yield* Effect.promise(() => worker.read(count)), [{ n: 0 }])
      yield* Effect.promise(() => db.insertInto("rate_limit_windows").values({ key: "k1", window_start: 0, window_end: 1, count: 1 }).execute())
      assert.deepStrictEqual(yield* Effect.promise(() => worker.read(count)), [{ n: 1 }])
      // Its page cache is small: a walk reads each page once.
      assert.deepStrictEqual(yield* Effect.promise(() => worker.read(CompiledQuery.raw("pragma cache_size", []))), [{ cache_size: -CACHE_KIB }])
      // The connection is read-only, and a statement that fails leaves the worker reading.
      const refused = yield* Effect.promise(() => worker.read(CompiledQuery.raw("delete from rate_limit_windows returning key", [])).then(() => undefined, (error: unknown) => error))
      assert.instanceOf(refused, Error)
      assert.strictEqual((refused as { readonly code?: unknown }).code, "SQLITE_READONLY")
      assert.deepStrictEqual(yield* Effect.promise(() => worker.read(count)), [{ n: 1 }])
      // Ended (as when its thread dies), the next read starts another.
      yield* Effect.promise(() => worker.stop())
      assert.deepStrictEqual(yield* Effect.promise(() => worker.read(count)), [{ n: 1 }])
    }))

  it.live.skipIf(process.platform !== "linux")("on Linux the worker's thread runs at the lowest priority, and no other thread of the process does", () =>
    Effect.gen(function*() {
      // The process's threads at nice 19, by id. Another test's worker may still be ending (its thread leaves the
      // list a little after its exit event), so threads are told apart by id, not counted.
      const threadsAtNice19 = () =>
        new Set(readdirSync("/proc/self/task").filter((thread) => {
          // The fields after the command's closing parenthesis: state is the 3rd field of the line, nice the 19th.
          const stat = readFileSync(`/proc/self/task/${thread}/stat`, "utf8")
          return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]) === 19
        }))
      const before = threadsAtNice19()
      const filename = join(yield* temporaryDirectory, "priority.db")
      const db = yield* Effect.acquireRelease(Effect.promise(() => openSqlite({ filename })), (db) => Effect.promise(() => db.destroy()))
      yield* Effect.promise(() => migrateToLatest(db))
      const worker = handleOf(db)?.readWorker
      assert.isDefined(worker)
      yield* Effect.promise(() => worker!.read(CompiledQuery.raw("select 1 as one", [])))
      // Exactly one thread more: the worker's; the main thread is not among them.
      const added = [...threadsAtNice19()].filter((thread) => !before.has(thread))
      assert.strictEqual(added.length, 1)
      assert.notInclude(added, String(process.pid))
    }))

  it.live("a store in memory has no read worker, and neither has a file store told not to", () =>
    Effect.gen(function*() {
      const memory = yield* Effect.acquireRelease(Effect.promise(() => openSqlite({ filename: ":memory:" })), (db) => Effect.promise(() => db.destroy()))
      assert.isUndefined(handleOf(memory)?.readWorker)
      const filename = join(yield* temporaryDirectory, "no-worker.db")
      const file = yield* Effect.acquireRelease(Effect.promise(() => openSqlite({ filename, readWorker: false })), (db) => Effect.promise(() => db.destroy()))
      assert.isUndefined(handleOf(file)?.readWorker)
    }))
})
