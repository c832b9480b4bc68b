/**
 * WAL checkpoints run on a worker thread (Checkpointer), not inside the commit that passes SQLite's 1000-page
 * mark: a file store's writes are checkpointed by the worker while the store's own automatic checkpoint (raised
 * to 10,000 pages) never fires; the worker stops, after a last checkpoint, before the store closes; and the data
 * is all there when the file is opened again.
 */
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { sql } from "kysely"
import { migrateToLatest } from "../src/migrations/migrateToLatest.js"
import { FALLBACK_AUTOCHECKPOINT_PAGES } from "../src/sqlite/Checkpointer.js"
import { openSqlite } from "../src/sqlite/layerSqlite.js"
import { handleOf } from "../src/sqlite/SqliteSession.js"
import { isWanted, temporaryDirectory } from "./Dialects.js"

const waitFor = (condition: () => boolean, timeoutMillis = 5_000) =>
  Effect.promise(async () => {
    const deadline = Date.now() + timeoutMillis
    while (!condition() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
    return condition()
  })

describe.skipIf(!isWanted("sqlite-file"))("SQLite WAL checkpoints on a worker thread", () => {
  it.live("the worker checkpoints a file store's commits; the store's own checkpoint is the raised fallback", () =>
    Effect.gen(function*() {
      const filename = join(yield* temporaryDirectory, "checkpoints.db")
      const db = yield* Effect.promise(() => openSqlite({ filename, checkpointIntervalMillis: 20 }))
      const checkpointer = handleOf(db)?.checkpointer
      assert.isDefined(checkpointer)
      yield* Effect.promise(() => migrateToLatest(db))
      const [{ wal_autocheckpoint: mark } = { wal_autocheckpoint: 0 }] = (yield* Effect.promise(() =>
        sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(db)
      )).rows
      assert.strictEqual(mark, FALLBACK_AUTOCHECKPOINT_PAGES)
      // About 300 frames of log, far below the store's own mark: only the worker can have copied them.
      for (let i = 0; i < 300; i++) {
        yield* Effect.promise(() =>
          db.insertInto("rate_limit_windows").values({ key: `k${i}`, window_start: i, window_end: i + 1, count: 1 }).execute()
        )
      }
      assert.isTrue(yield* waitFor(() => (checkpointer?.copied() ?? 0) > 0))
      assert.isTrue(yield* waitFor(() => {
        const last = checkpointer?.last()
        return last !== undefined && last.checkpointed === last.log
      }))
      yield* Effect.promise(() => db.destroy())
      // Closed cleanly (the worker stopped first): the file opens again with every row.
      const again = yield* Effect.promise(() => openSqlite({ filename, checkpointIntervalMillis: 0 }))
      const rows = yield* Effect.promise(() => again.selectFrom("rate_limit_windows").select("key").execute())
      assert.strictEqual(rows.length, 300)
      assert.isUndefined(handleOf(again)?.checkpointer)
      yield* Effect.promise(() => again.destroy())
    }))

  it.live("an in-memory store has no worker", () =>
    Effect.gen(function*() {
      const db = yield* Effect.promise(() => openSqlite({ filename: ":memory:" }))
      assert.isUndefined(handleOf(db)?.checkpointer)
      yield* Effect.promise(() => db.destroy())
    }))
})
