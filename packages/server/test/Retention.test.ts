/**
 * The retention's housekeeping in a real server process, on a SQLite file and on PostgreSQL (RELAY_TEST_PG_URL;
 * skipped with a printed reason when unset): settled outbox entries and webhook deliveries written long ago (as a
 * release that kept everything leaves them) are deleted in batches at the first pass after start, and said in one
 * line; pending ones, held behind a failed delivery however old, and recently settled ones stay.
 */
import Database from "better-sqlite3"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import { startServer } from "./ServerProcess.js"
import { dropDatabases, hasPostgres, newPostgresDatabase } from "./Tenant.js"

if (!hasPostgres) {
  console.log("Retention.test.ts: the PostgreSQL case skipped because RELAY_TEST_PG_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/postgres)")
}

afterAll(dropDatabases, 60_000)

const directory = mkdtempSync(join(tmpdir(), "relay-retention-test-"))
afterAll(() => rmSync(directory, { recursive: true, force: true }))

/** Several of the housekeeping's batches (200 rows) of each. */
const OLD = 1_200
const HELD = "9999-12-31T23:59:59.999Z"
const LONG_AGO = "2023-01-01T00:00:00.000Z"
const SEEDED_CLIENT = "00000000-0000-7000-e000-000000000000"

interface Table {
  readonly query: (sql: string, parameters?: ReadonlyArray<unknown>) => Promise<ReadonlyArray<Record<string, unknown>>>
}

/** The rows as a release that kept everything leaves them, `recently` settled an hour ago. */
const seed = async (db: Table, recently: string) => {
  const id = (part: string, n: number) => `00000000-0000-7000-${part}-${n.toString(16).padStart(12, "0")}`
  const entry = (n: number, state: string, part: string, due: string, updatedAt: string, lane: string | null) =>
    db.query(
      `insert into outbox_entries (id, kind, client_id, subject_id, lane, state, attempts, next_attempt_at, leased_until,
        last_error, created_at, updated_at) values ($1, 'deliverWebhook', $2, $3, $4, $5, 1, $6, null, null, $7, $8)`,
      [id(part, n), SEEDED_CLIENT, id("9000", n), lane, state, due, LONG_AGO, updatedAt]
    )
  const delivery = (n: number, state: string, updatedAt: string) =>
    db.query(
      `insert into webhook_deliveries (id, subscription_id, client_id, event_id, entity_id, event_at, payload, state,
        attempts, last_status, last_error, last_latency_millis, created_at, updated_at)
        values ($1, $2, $3, $4, $5, $6, '{}', $7, 1, 204, null, 12, $8, $9)`,
      [id("9000", n), id("f000", 0), SEEDED_CLIENT, id("c000", n), id("d000", n), LONG_AGO, state, LONG_AGO, updatedAt]
    )
  for (let n = 1; n <= OLD; n++) {
    await entry(n, n % 2 === 0 ? "done" : "given_up", "8000", LONG_AGO, LONG_AGO, null)
    await delivery(n, ["delivered", "failed", "skipped"][n % 3]!, LONG_AGO)
  }
  // Kept: held behind a failed delivery since long ago (its subscription holds them), and settled an hour ago.
  for (let n = 1; n <= 3; n++) {
    await entry(OLD + n, "pending", "b000", HELD, LONG_AGO, id("f000", 0))
    await delivery(OLD + n, "pending", LONG_AGO)
    await entry(OLD + n, "done", "8000", LONG_AGO, recently, null)
    await delivery(OLD + 10 + n, "delivered", recently)
  }
}

/** What is left of the seeded rows (their client's, not the demo's, whose own entries settle meanwhile). */
const left = async (db: Table) => {
  const seeded = `client_id = '${SEEDED_CLIENT}'`
  const [row] = await db.query(`select
    (select count(*) from outbox_entries where ${seeded} and state <> 'pending' and updated_at < '2024-01-01') as old_entries,
    (select count(*) from webhook_deliveries where ${seeded} and state <> 'pending' and updated_at < '2024-01-01') as old_deliveries,
    (select count(*) from outbox_entries where ${seeded} and next_attempt_at = '${HELD}') as held,
    (select count(*) from webhook_deliveries where ${seeded} and state = 'pending') as pending_deliveries,
    (select count(*) from outbox_entries where ${seeded} and state <> 'pending' and updated_at >= '2024-01-01') as recent_entries,
    (select count(*) from webhook_deliveries where ${seeded} and state <> 'pending' and updated_at >= '2024-01-01') as recent_deliveries`)
  return Object.fromEntries(Object.entries(row!).map(([name, value]) => [name, Number(value)]))
}

/** The housekeeping's line, once the server has written it. */
const prunedLine = async (output: () => string) => {
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    const line = output().split("\n").find((l) => l.includes("housekeeping deleted what the retention settings no longer keep"))
    if (line !== undefined) return JSON.parse(line) as Record<string, unknown>
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`no housekeeping line within 60 s:\n${output()}`)
}

const engines = [
  {
    name: "a SQLite file",
    skip: false,
    database: () => Promise.resolve(join(directory, "relay.db")),
    open: async (database: string) => {
      const db = new Database(database)
      return {
        table: {
          query: (sql: string, parameters: ReadonlyArray<unknown> = []) =>
            Promise.resolve(/^\s*select/i.test(sql)
              ? db.prepare(sql.replace(/\$\d+/g, "?")).all(...parameters) as ReadonlyArray<Record<string, unknown>>
              : (db.prepare(sql.replace(/\$\d+/g, "?")).run(...parameters), []))
        },
        close: () => Promise.resolve(db.close())
      }
    }
  },
  {
    name: "PostgreSQL",
    skip: !hasPostgres,
    database: newPostgresDatabase,
    open: async (database: string) => {
      const client = new pg.Client({ connectionString: database })
      await client.connect()
      const table: Table = { query: async (sql, parameters = []) => (await client.query(sql, [...parameters])).rows }
      return { table, close: () => client.end() }
    }
  }
]

describe("settled rows past their retention, deleted by a real server's housekeeping", () => {
  for (const engine of engines) {
    it.skipIf(engine.skip)(`on ${engine.name}: the first pass deletes the old settled outbox entries and deliveries in batches; pending and recent ones stay`, async () => {
      const database = await engine.database()
      // A first start migrates (and seeds the demo); then the rows a release that kept everything leaves behind.
      const first = await startServer({ RELAY_DATABASE: database, RELAY_DEMO: "always" })
      await first.stop()
      const seeding = await engine.open(database)
      try {
        await seeding.table.query("begin")
        await seed(seeding.table, new Date(Date.now() - 3_600_000).toISOString())
        await seeding.table.query("commit")
        expect(await left(seeding.table)).toEqual({
          old_entries: OLD, old_deliveries: OLD, held: 3, pending_deliveries: 3, recent_entries: 3, recent_deliveries: 3
        })
      } finally {
        await seeding.close()
      }

      const server = await startServer({ RELAY_DATABASE: database, RELAY_DEMO: "never", RELAY_LOG_LEVEL: "Info" })
      try {
        const line = await prunedLine(server.output)
        expect(line["level"]).toBe("INFO")
        expect(line["annotations"]).toMatchObject({ outboxEntries: OLD, webhookDeliveries: OLD })
        const after = await engine.open(database)
        try {
          expect(await left(after.table)).toEqual({
            old_entries: 0, old_deliveries: 0, held: 3, pending_deliveries: 3, recent_entries: 3, recent_deliveries: 3
          })
        } finally {
          await after.close()
        }
      } finally {
        await server.stop()
      }
    }, 120_000)
  }
})
