/**
 * The PostgreSQL pool's settings (PoolSettings): one merge of the caller's `pool` over the defaults, read by the pool
 * and by the bound on write units alike, and a setting out of range refused before anything opens. On a real
 * database: a setting given as `undefined` reaches the server as the default, not as pg's "no limit".
 */
import { describe, it } from "@effect/vitest"
import { sql } from "kysely"
import { assert, expect } from "vitest"
import { layerPostgres, POSTGRES_POOL_DEFAULTS, type PostgresPoolOptions } from "../src/index.js"
import { checkedConnectionString, openPostgres } from "../src/postgres/layerPostgres.js"
import { poolSettings } from "../src/postgres/PoolSettings.js"
import { postgresSkipReason, postgresUrl } from "./Dialects.js"

if (postgresSkipReason !== undefined) console.log(`PoolSettings.test.ts: the test on a real database is skipped: ${postgresSkipReason}`)

/** What a caller writes who builds options from its own config, where an unset value is `undefined`. */
const loose = (pool: Record<string, number | undefined>): PostgresPoolOptions => pool as PostgresPoolOptions

describe("PostgreSQL pool settings", () => {
  it("the defaults, with write units kept off the read reserve", () => {
    assert.deepStrictEqual(poolSettings(undefined), { ...POSTGRES_POOL_DEFAULTS, writeUnits: 8 })
    assert.deepStrictEqual(poolSettings({}), poolSettings(undefined))
  })

  it("a setting given as undefined takes the default, as one left out does", () => {
    assert.deepStrictEqual(
      poolSettings(loose({ max: undefined, readReserve: undefined, lockTimeoutMillis: undefined, statementTimeoutMillis: undefined })),
      poolSettings(undefined)
    )
  })

  it("the caller's settings over the defaults; a reserve of max or more leaves write units one connection", () => {
    const settings = poolSettings({ max: 4, lockTimeoutMillis: 250 })
    assert.strictEqual(settings.max, 4)
    assert.strictEqual(settings.readReserve, 2)
    assert.strictEqual(settings.writeUnits, 2)
    assert.strictEqual(settings.lockTimeoutMillis, 250)
    assert.strictEqual(settings.statementTimeoutMillis, POSTGRES_POOL_DEFAULTS.statementTimeoutMillis)
    assert.deepStrictEqual([poolSettings({ max: 3, readReserve: 5 }).readReserve, poolSettings({ max: 3, readReserve: 5 }).writeUnits], [2, 1])
    assert.deepStrictEqual([poolSettings({ max: 1 }).readReserve, poolSettings({ max: 1 }).writeUnits], [0, 1])
    assert.strictEqual(poolSettings({ readReserve: 0 }).writeUnits, 10)
  })

  it("a setting that is not a whole number in range is refused, naming it", () => {
    const refused: ReadonlyArray<[PostgresPoolOptions, RegExp]> = [
      [{ max: 0 }, /pool\.max must be a whole number of at least 1, got 0/],
      [{ max: Number.NaN }, /pool\.max .* got NaN/],
      [{ max: 2.5 }, /pool\.max .* got 2\.5/],
      [{ readReserve: -1 }, /pool\.readReserve must be a whole number of at least 0, got -1/],
      [{ lockTimeoutMillis: Number.POSITIVE_INFINITY }, /pool\.lockTimeoutMillis .* got Infinity/],
      [{ statementTimeoutMillis: -5 }, /pool\.statementTimeoutMillis/],
      [{ connectionTimeoutMillis: 0.5 }, /pool\.connectionTimeoutMillis/],
      [{ idleTimeoutMillis: -1 }, /pool\.idleTimeoutMillis/],
      [{ idleInTransactionTimeoutMillis: Number.NaN }, /pool\.idleInTransactionTimeoutMillis/],
      [{ preparedStatements: -1 }, /pool\.preparedStatements must be a whole number of at least 0, got -1/],
      [loose({ max: "8" as unknown as number }), /pool\.max .* got 8/]
    ]
    for (const [pool, message] of refused) {
      assert.throws(() => poolSettings(pool), RangeError, message)
      // The layer refuses it when it is made, before it opens anything.
      assert.throws(() => layerPostgres({ connectionString: "postgres://127.0.0.1:1/none", pool }), RangeError, message)
    }
  })
})

describe("PostgreSQL bounds on units at once", () => {
  it("maxConcurrentWriteUnits and maxConcurrentTrailCounts that are not whole numbers of at least 1 are refused when the layer is made, naming them; 1 and more are taken", () => {
    for (const name of ["maxConcurrentWriteUnits", "maxConcurrentTrailCounts"] as const) {
      for (const value of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
        assert.throws(
          () => layerPostgres({ connectionString: "postgres://127.0.0.1:1/none", [name]: value }),
          RangeError,
          new RegExp(`^${name} must be a whole number of at least 1, got ${String(value)}$`)
        )
      }
      for (const value of [1, 4]) assert.doesNotThrow(() => layerPostgres({ connectionString: "postgres://127.0.0.1:1/none", [name]: value }))
    }
  })
})

describe("a connection string that cannot name a PostgreSQL server is refused at once, saying why", () => {
  it("quotes pasted with it, another database's URL, or a URL that cannot be read; libpq's keyword form is left to pg", async () => {
    for (const [given, message] of [
      ["", /is empty/],
      ["'postgres://postgres@127.0.0.1:5432/relay'", /wrapped in quotes/],
      ["mysql://root@127.0.0.1:3306/relay", /must be a postgres:\/\/ or postgresql:\/\/ URL, got a mysql:\/\/ one/],
      ["postgres://user:pa ss@[::1/relay", /not a URL that can be read/]
    ] as const) {
      assert.throws(() => checkedConnectionString(given), message, given)
      // Before any connection is tried: not retried as an unreachable database for the start-up bound.
      await expect(openPostgres({ connectionString: given })).rejects.toThrow(message)
    }
    for (const given of ["postgres://postgres@127.0.0.1:5432/relay", "postgresql://u:p%40ss@db.example.com/relay?sslmode=require", "host=/var/run/postgresql dbname=relay"]) {
      assert.strictEqual(checkedConnectionString(given), given)
    }
  })
})

describe.skipIf(postgresSkipReason !== undefined)("PostgreSQL pool settings on a real database", () => {
  it("a lock or statement timeout given as undefined reaches the server as the default", async () => {
    const db = await openPostgres({
      connectionString: postgresUrl ?? "",
      pool: loose({ max: 1, lockTimeoutMillis: undefined, statementTimeoutMillis: undefined })
    })
    try {
      const lock = await sql<{ lock_timeout: string }>`show lock_timeout`.execute(db)
      const statement = await sql<{ statement_timeout: string }>`show statement_timeout`.execute(db)
      assert.strictEqual(lock.rows[0]?.lock_timeout, "5s")
      assert.strictEqual(statement.rows[0]?.statement_timeout, "30s")
    } finally {
      await db.destroy()
    }
  })

  it("a session idle inside a transaction is ended after 10 s by default: a node cut off from the database holds others' writes on its rows that long, not PostgreSQL's usual minute", async () => {
    const db = await openPostgres({ connectionString: postgresUrl ?? "", pool: { max: 1 } })
    try {
      const idle = await sql<{ idle_in_transaction_session_timeout: string }>`show idle_in_transaction_session_timeout`.execute(db)
      assert.strictEqual(idle.rows[0]?.idle_in_transaction_session_timeout, "10s")
    } finally {
      await db.destroy()
    }
  })
})
