/**
 * bench:retention's check of what is left of its backlog (bench/SeededBacklog.ts) runs on the event loop that times
 * the bench's reader, every 250 ms: it must answer from the settled rows' indexes, reading a row of each at most,
 * never walk a table (SQLite query plans), and answer rightly: seeded settled rows left or not, whatever pending or
 * recently settled rows the tables hold.
 */
import { migrateToLatest } from "@custody-relay/storage-sql"
import Database from "better-sqlite3"
import { Kysely, SqliteDialect } from "kysely"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { ANY_LEFT, seededBacklog } from "../bench/SeededBacklog.js"

const directory = mkdtempSync(join(tmpdir(), "seeded-backlog-"))
afterAll(() => rmSync(directory, { recursive: true, force: true }))

/** A file with the relay's latest schema, open on a connection of its own. */
const migratedFile = async (name: string) => {
  const file = join(directory, name)
  const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new Database(file) }) })
  await migrateToLatest(db)
  await db.destroy()
  const database = new Database(file)
  database.pragma("journal_mode = WAL")
  return { file, database }
}

const entry = (database: Database.Database, n: number, state: string, updatedAt: string) =>
  database.prepare(
    `insert into outbox_entries (id, kind, client_id, subject_id, lane, state, attempts, next_attempt_at, leased_until,
      last_error, created_at, updated_at) values (?, 'deliverWebhook', 'c', 's', null, ?, 1, ?, null, null, ?, ?)`
  ).run(`entry-${n}`, state, updatedAt, updatedAt, updatedAt)

const delivery = (database: Database.Database, n: number, state: string, updatedAt: string) =>
  database.prepare(
    `insert into webhook_deliveries (id, subscription_id, client_id, event_id, entity_id, event_at, payload, state,
      attempts, last_status, last_error, last_latency_millis, created_at, updated_at)
      values (?, 's', 'c', ?, 'e', ?, '{}', ?, 1, 204, null, 12, ?, ?)`
  ).run(`delivery-${n}`, `event-${n}`, updatedAt, state, updatedAt, updatedAt)

describe("bench:retention's backlog check (bench/SeededBacklog)", () => {
  it("reads the settled rows' indexes and never walks a table (SQLite query plan)", async () => {
    const { database } = await migratedFile("plan.db")
    try {
      const plan = database.prepare<[], { detail: string }>(`explain query plan ${ANY_LEFT}`).all().map((row) => row.detail)
      expect(plan).toContainEqual(expect.stringMatching(/^SEARCH outbox_entries USING (COVERING )?INDEX outbox_entries_settled /))
      expect(plan).toContainEqual(expect.stringMatching(/^SEARCH webhook_deliveries USING (COVERING )?INDEX webhook_deliveries_settled /))
      expect(plan.filter((detail) => /^SCAN (outbox_entries|webhook_deliveries)/.test(detail))).toEqual([])
    } finally {
      database.close()
    }
  })

  it("answers whether a seeded settled row is left, whatever pending or recently settled rows there are", async () => {
    const { database, file } = await migratedFile("left.db")
    const backlog = await seededBacklog(file, undefined)
    try {
      entry(database, 1, "pending", "2023-01-01T00:00:00.000Z")
      entry(database, 2, "done", "2026-11-30T00:00:00.000Z")
      delivery(database, 1, "delivered", "2026-11-30T00:00:00.000Z")
      expect(await backlog.anyLeft()).toBe(false)
      entry(database, 3, "done", "2023-01-01T00:00:00.000Z")
      expect(await backlog.anyLeft()).toBe(true)
      database.prepare("delete from outbox_entries where id = 'entry-3'").run()
      delivery(database, 2, "failed", "2023-01-01T00:00:00.000Z")
      expect(await backlog.anyLeft()).toBe(true)
      expect(await backlog.count()).toEqual({ entries: 0, deliveries: 1, pending: 1 })
    } finally {
      await backlog.close()
      database.close()
    }
  })
})
