/**
 * What a unit of work's stores live as long as (issue 17: no request waits behind another): made once for a session
 * that serves unit after unit (a SQLite connection's), and made for the one unit of a session that serves one
 * (PostgreSQL's pipelined sessions, kysely's own transactions), dying with it. Kept past their session, every unit's
 * stores were copied by each young-generation collection and then moved to the old generation: under load that made
 * each of those collections 10 to 30 ms instead of 1 to 4, one every tenth of a second, and every request waited
 * through them (docs/benchmarks.md, "a unit of work's stores kept past its session").
 *
 * Whether an object dies young is seen in the old generation's size: what survives two young collections is moved
 * there. Each test runs many units, collects the young generation twice, and measures how much the old generation
 * grew per unit: a unit's stores are about 10 KB, so units kept past their session grow it by that much each.
 */
import { randomUUID } from "node:crypto"
import { join } from "node:path"
import { getHeapSpaceStatistics, setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { assert, describe, it } from "@effect/vitest"
import { Ids, Storage } from "@custody-relay/core"
import BetterSqlite3 from "better-sqlite3"
import { Effect } from "effect"
import { Kysely } from "kysely"
import { migrateToLatest } from "../src/migrations/migrateToLatest.js"
import { openPostgres } from "../src/postgres/layerPostgres.js"
import { PostgresEngine } from "../src/postgres/PostgresEngine.js"
import type { Database } from "../src/schema/Database.js"
import { ConnectionGate } from "../src/sqlite/ConnectionGate.js"
import { SqliteEngine } from "../src/sqlite/SqliteEngine.js"
import { WriteLockSqliteDialect } from "../src/sqlite/WriteLockDriver.js"
import type { SqlEngine } from "../src/SqlEngine.js"
import * as SqlStorage from "../src/SqlStorage.js"
import { migratedSqliteFile, postgresSkipReason, temporaryDirectory, temporaryPostgresDatabase } from "./Dialects.js"

setFlagsFromString("--expose-gc")
const collect = runInNewContext("gc") as (options?: { readonly type: "minor" | "major" }) => void

const oldGenerationBytes = (): number => getHeapSpaceStatistics().find((space) => space.space_name === "old_space")?.space_used_size ?? 0

const UNITS = 3_000
/**
 * What the old generation may grow by per unit when its stores die young: far below what it grew by when they were
 * kept past their session (8.8 KB a unit on PostgreSQL, 11.4 KB on kysely's transactions). With them dying young it
 * grew by 0.24 KB a unit on PostgreSQL; on kysely's own transactions by 2.8 KB, kysely's objects of a transaction,
 * which are not the storage's to shorten.
 */
const MOST_BYTES_KEPT_PER_UNIT = { postgres: 1_000, kysely: 5_000 }

/** One read unit of work, reading a client that does not exist: one statement, no row. */
const readUnit = (storage: Storage.Storage["Service"]) =>
  storage.transaction("read", (unit) => unit.getClient(Ids.ClientId.make(randomUUID())))

/** The old generation's growth per unit over `UNITS` read units, run one after another after a warm-up. */
const oldGenerationGrowthPerUnit = (storage: Storage.Storage["Service"]) =>
  Effect.gen(function*() {
    for (let n = 0; n < 300; n++) yield* readUnit(storage)
    collect({ type: "major" })
    collect({ type: "major" })
    const before = oldGenerationBytes()
    for (let n = 0; n < UNITS; n++) yield* readUnit(storage)
    // Twice: a young object that survives one collection is moved to the old generation by the next.
    collect({ type: "minor" })
    collect({ type: "minor" })
    return (oldGenerationBytes() - before) / UNITS
  })

const storageOn = (db: Kysely<Database>, engine: SqlEngine) =>
  Effect.gen(function*() {
    yield* Effect.addFinalizer(() => Effect.promise(() => db.destroy()))
    yield* Effect.promise(() => migrateToLatest(db))
    return SqlStorage.make(db, engine)
  })

describe("a unit of work's stores", () => {
  it.live.skipIf(postgresSkipReason !== undefined)("die young with the unit on PostgreSQL's sessions, one per unit", () =>
    Effect.scoped(Effect.gen(function*() {
      const { url } = yield* temporaryPostgresDatabase
      const storage = yield* storageOn(yield* Effect.promise(() => openPostgres({ connectionString: url })), PostgresEngine)
      const perUnit = yield* oldGenerationGrowthPerUnit(storage)
      assert.isBelow(perUnit, MOST_BYTES_KEPT_PER_UNIT.postgres, `the old generation grew ${perUnit.toFixed(0)} bytes a unit`)
    })))

  it.live("die young with the unit on kysely's own transactions, one per unit", () =>
    Effect.scoped(Effect.gen(function*() {
      const filename = join(yield* temporaryDirectory, "relay.db")
      const db = new Kysely<Database>({ dialect: new WriteLockSqliteDialect({ database: new BetterSqlite3(filename) }, new ConnectionGate()) })
      const storage = yield* storageOn(db, SqliteEngine)
      const perUnit = yield* oldGenerationGrowthPerUnit(storage)
      assert.isBelow(perUnit, MOST_BYTES_KEPT_PER_UNIT.kysely, `the old generation grew ${perUnit.toFixed(0)} bytes a unit`)
    })))

  it.live("are made once for a SQLite connection's session, which serves unit after unit", () =>
    Effect.scoped(Effect.gen(function*() {
      const { db } = yield* migratedSqliteFile("relay.db")
      const storage = SqlStorage.make(db, SqliteEngine)
      const seen = new Set<Storage.StorageUnit>()
      for (const mode of ["read", "read", "write", "write", "read"] as const) {
        yield* storage.transaction(mode, (unit) => Effect.sync(() => seen.add(unit)))
      }
      assert.strictEqual(seen.size, 2, "one read unit and one write unit, each made once")
    })))
})
