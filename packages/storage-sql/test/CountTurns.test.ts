/**
 * A trail's long counts take turns where statements run in the database (PostgreSQL, SqlStorage's
 * `maxConcurrentTrailCounts`, TrailCounts.CountTurnHeld): a read unit that would count more than
 * UNTURNED_COUNT_STRIDES strides' positions runs again once it holds a turn, and waits for it outside any transaction.
 * Two first counts side by side take two of the database's cores, every core a small machine shares with its node
 * (docs/benchmarks.md). Seen on the wire: a proxy in front of a real database holds the replies to the first count
 * statement, and the test watches whether the second is sent meanwhile.
 */
import type { DomainEvent } from "@custody-relay/core"
import { describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { sql } from "kysely"
import { assert } from "vitest"
import { migrateToLatest } from "../src/migrations/migrateToLatest.js"
import { openPostgres } from "../src/postgres/layerPostgres.js"
import { PostgresEngine } from "../src/postgres/PostgresEngine.js"
import * as SqlStorage from "../src/SqlStorage.js"
import { STRIDE_POSITIONS, UNTURNED_COUNT_STRIDES } from "../src/TrailCounts.js"
import { scopedCountingProxy } from "./CountingProxy.js"
import { postgresSkipReason, temporaryPostgresDatabase } from "./Dialects.js"
import * as Records from "./Records.js"

if (postgresSkipReason !== undefined) console.log(`CountTurns.test.ts: skipped: ${postgresSkipReason}`)

/** How long the test waits for a statement that must not be sent: a unit sends its count milliseconds after its first round trip. */
const QUIET_MILLIS = 1_000

/**
 * A migrated database with a client and four strides more than a unit counts without a turn of events, every other
 * one a transaction's, the rest of type `funds.reserved`; reached through a counting proxy by a storage whose long
 * counts take `maxConcurrentTrailCounts` turns at once (the default where it is undefined).
 */
const seeded = (maxConcurrentTrailCounts: number | undefined) =>
  Effect.gen(function*() {
    const { url } = yield* temporaryPostgresDatabase
    const client = Records.client()
    const events = (UNTURNED_COUNT_STRIDES + 4) * STRIDE_POSITIONS
    yield* Effect.promise(async () => {
      const direct = await openPostgres({ connectionString: url })
      try {
        await migrateToLatest(direct)
        await sql`insert into clients (id, name, created_at) values (${client.id}, ${client.name}, ${client.createdAt})`.execute(direct)
        await sql`insert into domain_events (id, type, client_id, entity_type, entity_id, actor, at, data)
          select '00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'),
            case when i % 2 = 0 then 'funds.reserved' else 'transaction.initiated' end, ${client.id},
            case when i % 2 = 0 then 'account' else 'transaction' end, '00000000-0000-7000-a000-' || lpad(to_hex(i), 12, '0'),
            '{"kind":"system"}', to_char(timestamp '2026-01-01' + i * interval '1 millisecond', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), '{}'
          from generate_series(1, ${events}::int) as i`.execute(direct)
      } finally {
        await direct.destroy()
      }
    })
    const proxy = yield* scopedCountingProxy(url)
    const db = yield* Effect.acquireRelease(
      Effect.promise(() => openPostgres({ connectionString: proxy.url, pool: { max: 4 } })),
      (db) => Effect.promise(() => db.destroy())
    )
    // Positions held settled as soon as a snapshot holds them, as on SQLite: a transaction open anywhere on the
    // server (another test file's) would hold back what PostgreSQL's snapshots hold settled (SettledPositions).
    const storage = SqlStorage.make(db, { ...PostgresEngine, logSettling: undefined }, {
      maxRetries: 0,
      ...(maxConcurrentTrailCounts === undefined ? {} : { maxConcurrentTrailCounts })
    })
    const page = (filter: DomainEvent.TrailFilter) => storage.transaction("read", (unit) => unit.pageEvents(client.id, filter, { page: 2, limit: 20 }))
    /** The sessions on the database, besides the one asking, inside a transaction. */
    const inTransaction = Effect.promise(async () => {
      const direct = await openPostgres({ connectionString: url, pool: { max: 1 } })
      try {
        const found = await sql<{ readonly n: string }>`select count(*) as n from pg_stat_activity
          where datname = current_database() and pid <> pg_backend_pid() and xact_start is not null`.execute(direct)
        return Number(found.rows[0]?.n)
      } finally {
        await direct.destroy()
      }
    })
    return { proxy, page, events, inTransaction }
  })

/** Until `seen()` reaches `count`; fails after 30 s. */
const untilSeen = (seen: () => number, count: number) =>
  Effect.gen(function*() {
    for (let waited = 0; seen() < count; waited += 5) {
      if (waited > 30_000) return yield* Effect.die(new Error(`${seen()} count statements seen, waiting for ${count}`))
      yield* Effect.sleep("5 millis")
    }
  })

/** A trail's count per stride, as the unit sends it (EventLog). */
const isStrideCount = (text: string) => text.includes(`as "stride"`)

describe.skipIf(postgresSkipReason !== undefined)("a trail's long counts take turns on PostgreSQL (PAGE-1, PAGE-4)", () => {
  it.live("by default one at a time: while one trail's first count runs, another's waits outside its transaction, then runs; both totals exact", () =>
    Effect.scoped(Effect.gen(function*() {
      const { events, inTransaction, page, proxy } = yield* seeded(undefined)
      const hold = proxy.holdRepliesTo(isStrideCount)
      const transactions = yield* Effect.forkChild(page({ entityType: "transaction" }))
      yield* untilSeen(hold.seen, 1)
      const reserved = yield* Effect.forkChild(page({ types: ["funds.reserved"] }))
      yield* Effect.sleep(QUIET_MILLIS)
      assert.strictEqual(hold.seen(), 1, "a second count was sent while the first ran")
      assert.isUndefined(reserved.pollUnsafe(), "the second page answered before its count")
      // The first unit's, whose count's answer is held; the second waits for its turn in no transaction.
      assert.strictEqual(yield* inTransaction, 1)
      hold.release()
      assert.strictEqual((yield* Fiber.join(transactions)).total, events / 2)
      assert.strictEqual((yield* Fiber.join(reserved)).total, events / 2)
      assert.strictEqual(hold.seen(), 2)
    })), 60_000)

  it.live("with maxConcurrentTrailCounts 2, two trails' first counts run side by side", () =>
    Effect.scoped(Effect.gen(function*() {
      const { events, page, proxy } = yield* seeded(2)
      const hold = proxy.holdRepliesTo(isStrideCount)
      const transactions = yield* Effect.forkChild(page({ entityType: "transaction" }))
      const reserved = yield* Effect.forkChild(page({ types: ["funds.reserved"] }))
      yield* untilSeen(hold.seen, 2)
      hold.release()
      assert.strictEqual((yield* Fiber.join(transactions)).total, events / 2)
      assert.strictEqual((yield* Fiber.join(reserved)).total, events / 2)
    })), 60_000)
})
