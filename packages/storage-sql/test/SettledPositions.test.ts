/**
 * The audit trail on PostgreSQL from counts kept per stride (TrailCounts), which a snapshot may use only up to the
 * positions it holds settled (postgres/SettledPositions): exact while a transaction that took a lower position than
 * committed ones is still running, on two nodes, and after it commits or rolls back; the events' insert takes its
 * transaction id before its position; the marks' rule in isolation.
 */
import { assert, describe, it } from "@effect/vitest"
import type { DomainEvent, Ids, Page, Storage } from "@custody-relay/core"
import { Effect } from "effect"
import pg from "pg"
import { migrateToLatest } from "../src/migrations/migrateToLatest.js"
import { openPostgres } from "../src/postgres/layerPostgres.js"
import { PostgresEngine } from "../src/postgres/PostgresEngine.js"
import { insertEventsTakingId, MAX_MARKS, SettledPositions } from "../src/postgres/SettledPositions.js"
import * as SqlStorage from "../src/SqlStorage.js"
import { STRIDE_POSITIONS } from "../src/TrailCounts.js"
import { isWanted, postgresSkipReason, temporaryPostgresDatabase } from "./Dialects.js"
import * as Records from "./Records.js"

const marks = (xmin: number, xmax: number) => ({ snapshot_xmin: String(xmin), snapshot_xmax: String(xmax) })

describe("SettledPositions: what a snapshot holds settled, from the marks of earlier ones", () => {
  it("a snapshot with nothing running holds its top settled; one with a transaction running, only what an earlier snapshot's mark vouches for", () => {
    const settled = new SettledPositions()
    // Transaction 10 runs: nothing is vouched for yet.
    assert.strictEqual(settled.settledIn(100, marks(10, 12)), 0)
    // Still running: the mark (top 100, xmax 12) needs a snapshot whose xmin is at least 12.
    assert.strictEqual(settled.settledIn(150, marks(10, 14)), 0)
    // Everything below 12 finished: up to 100 is settled, not 180 (transaction 12 ran when 150 was seen).
    assert.strictEqual(settled.settledIn(180, marks(12, 16)), 100)
    assert.strictEqual(settled.settledIn(200, marks(14, 17)), 150)
    // Nothing running: its own top.
    assert.strictEqual(settled.settledIn(210, marks(17, 17)), 210)
    // An older snapshot, read later (a unit that began earlier), uses only marks its xmin reaches.
    assert.strictEqual(settled.settledIn(120, marks(11, 13)), 0)
    assert.strictEqual(settled.settledIn(160, marks(14, 15)), 150)
  })

  it("never says more than the snapshot's top, and keeps a bounded number of marks", () => {
    const settled = new SettledPositions()
    for (let n = 1; n <= 4 * MAX_MARKS; n++) settled.settledIn(n * 10, marks(n, n + 1))
    // The newest marks are kept: the one of top 1,270 (xmax 128) serves a snapshot whose xmin is 128.
    assert.strictEqual(settled.settledIn(1_300, marks(128, 140)), 1_270)
    // A snapshot whose xmin every mark reaches, with a lower top than theirs (not possible with the sequence handing
    // out values one at a time): its top.
    assert.strictEqual(settled.settledIn(50, marks(200, 210)), 50)
  })
})

describe.skipIf(!isWanted("postgres") || postgresSkipReason !== undefined)("SQL storage: the audit trail's counts on PostgreSQL (PAGE-1, PAGE-4)", () => {
  /** A migrated database, two storages on it (two nodes), a client and a raw connection. */
  const withNodes = Effect.gen(function*() {
    const { url } = yield* temporaryPostgresDatabase
    const open = () => Effect.acquireRelease(Effect.promise(() => openPostgres({ connectionString: url })), (db) => Effect.promise(() => db.destroy()))
    const db = yield* open()
    yield* Effect.promise(() => migrateToLatest(db))
    const nodes = [SqlStorage.make(db, PostgresEngine), SqlStorage.make(yield* open(), PostgresEngine)] as const
    const client = Records.client()
    yield* nodes[0].transaction("write", (unit) => unit.insertClient(client))
    const connect = Effect.acquireRelease(
      Effect.promise(async () => {
        const connection = new pg.Client({ connectionString: url })
        await connection.connect()
        return connection
      }),
      (connection) => Effect.promise(() => connection.end())
    )
    return { db, nodes, client, connect }
  })

  const event = (clientId: Ids.ClientId, n: number): DomainEvent.DomainEvent => ({
    id: crypto.randomUUID() as DomainEvent.DomainEvent["id"],
    type: n % 3 === 0 ? "account.created" : "account.approved",
    clientId,
    entityType: "account",
    entityId: `00000000-0000-7000-9000-${String(n % 7).padStart(12, "0")}`,
    statusBefore: null,
    statusAfter: null,
    actor: { kind: "system" },
    at: Records.at(n),
    data: {}
  })

  /** `count` of the client's events written in one transaction on a raw connection, its id taken first. */
  const insertEvents = (connection: pg.Client, clientId: string, from: number, count: number) =>
    connection.query(
      `insert into domain_events (id, type, client_id, entity_type, entity_id, status_before, status_after, actor, at, data)
      select gen_random_uuid()::text, case when i % 3 = 0 then 'account.created' else 'account.approved' end, $1,
        'account', '00000000-0000-7000-9000-' || lpad((i % 7)::text, 12, '0'), null, null, '{"kind":"system"}',
        to_char(timestamp '2026-01-01' + i * interval '1 millisecond', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), '{}'
      from generate_series($2::int, $3::int) as i where pg_current_xact_id() is not null`,
      [clientId, from, from + count - 1]
    )

  /** The trail's ids, newest first, as a fresh statement reads them. */
  const expected = async (connection: pg.Client, clientId: string, filter: DomainEvent.TrailFilter): Promise<Array<string>> => {
    const terms = ["client_id = $1"]
    const values: Array<unknown> = [clientId]
    if (filter.types !== undefined) (values.push(filter.types), terms.push(`type = any($${values.length})`))
    if (filter.entityId !== undefined) (values.push(filter.entityId), terms.push(`entity_id = $${values.length}`))
    const { rows } = await connection.query(`select id from domain_events where ${terms.join(" and ")} order by position desc`, values)
    return rows.map((row: { readonly id: string }) => row.id)
  }

  const trailPage = (storage: Storage.Storage["Service"], clientId: string, filter: DomainEvent.TrailFilter, page: Page.PageRequest) =>
    storage.transaction(page.page === 1 ? "lookup" : "read", (unit) => unit.pageEvents(clientId, filter, page))

  const filters: ReadonlyArray<DomainEvent.TrailFilter> = [{}, { types: ["account.created"] }, { entityId: "00000000-0000-7000-9000-000000000003" }]

  /** Every filter's first, middle and last pages and totals on both nodes, against a fresh read. */
  const allExact = (nodes: ReadonlyArray<Storage.Storage["Service"]>, connection: pg.Client, clientId: Ids.ClientId) =>
    Effect.forEach(nodes, (node) =>
      Effect.forEach(filters, (filter) =>
        Effect.gen(function*() {
          const ids = yield* Effect.promise(() => expected(connection, clientId, filter))
          const limit = 50
          const last = Math.max(1, Math.ceil(ids.length / limit))
          for (const page of [1, 2, Math.ceil(last / 2), last]) {
            const found = yield* trailPage(node, clientId, filter, { page, limit })
            assert.deepStrictEqual(
              { ids: found.items.map((item) => item.id), total: found.total },
              { ids: ids.slice((page - 1) * limit, page * limit), total: ids.length },
              JSON.stringify({ filter, page })
            )
          }
        }), { discard: true }), { discard: true })

  it.live("a transaction that took a lower position than committed events is running: every page and total is exact before and after it commits, on two nodes", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, connect, nodes } = yield* withNodes
      const writer = yield* connect
      const held = yield* connect
      const reader = yield* connect
      yield* Effect.promise(() => insertEvents(writer, client.id, 0, 100))
      // The held transaction takes its position now, below every one the writer takes next.
      yield* Effect.promise(async () => {
        await held.query("begin")
        await insertEvents(held, client.id, 100, 1)
      })
      yield* Effect.promise(() => insertEvents(writer, client.id, 101, 3 * STRIDE_POSITIONS + 100))
      // Through the storage too: a write unit whose first write is the events' insert.
      yield* nodes[1].transaction("write", (unit) => Effect.forEach([1, 2, 3], (n) => unit.appendEvent(event(client.id, 10_000 + n)), { discard: true }))
      // Read twice while it runs: the first reads keep what counts they may, the second use them.
      yield* allExact(nodes, reader, client.id)
      yield* allExact(nodes, reader, client.id)
      yield* Effect.promise(() => held.query("commit"))
      yield* allExact(nodes, reader, client.id)
      // More after it, and a rolled-back transaction below them.
      yield* Effect.promise(async () => {
        await held.query("begin")
        await insertEvents(held, client.id, 20_000, 5)
      })
      yield* Effect.promise(() => insertEvents(writer, client.id, 30_000, STRIDE_POSITIONS))
      yield* allExact(nodes, reader, client.id)
      yield* Effect.promise(() => held.query("rollback"))
      yield* allExact(nodes, reader, client.id)
      yield* allExact(nodes, reader, client.id)
    })), 120_000)

  it.live("the events' insert takes its transaction id before the identity's sequence gives a position (its plan), and that sequence hands out one value at a time", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, connect, db } = yield* withNodes
      const connection = yield* connect
      for (const count of [1, 3]) {
        const rows = Array.from({ length: count }, (_, n) => ({
          id: crypto.randomUUID(),
          type: "account.created",
          client_id: client.id,
          entity_type: "account",
          entity_id: "e",
          status_before: null,
          status_after: null,
          actor: "{}",
          at: Records.at(n),
          data: "{}"
        }))
        const compiled = insertEventsTakingId(db, rows).compile()
        const { rows: [plan] } = yield* Effect.promise(() => connection.query(`explain (verbose, format json) ${compiled.sql}`, [...compiled.parameters]))
        // The node that forms the rows, with nextval among its outputs, is gated by the one-time filter: the executor
        // evaluates it before it asks for the first row.
        const nodes: Array<Record<string, unknown>> = []
        const walk = (node: Record<string, unknown>) => {
          nodes.push(node)
          for (const child of (node["Plans"] as Array<Record<string, unknown>> | undefined) ?? []) walk(child)
        }
        walk((plan["QUERY PLAN"] as Array<{ readonly Plan: Record<string, unknown> }>)[0]!.Plan)
        const forming = nodes.find((node) => ((node["Output"] as Array<string> | undefined) ?? []).some((output) => output.startsWith("nextval(")))
        assert.isDefined(forming, JSON.stringify(plan))
        assert.strictEqual(forming!["Node Type"], "Result", JSON.stringify(plan))
        assert.include(String(forming!["One-Time Filter"]), "pg_current_xact_id()", JSON.stringify(plan))
        // And it runs: the rows are in.
        yield* Effect.promise(() => db.executeQuery(compiled))
      }
      const { rows: [sequence] } = yield* Effect.promise(() =>
        connection.query(`select cache_size from pg_sequences where sequencename = pg_get_serial_sequence('domain_events', 'position')::regclass::text`)
      )
      assert.strictEqual(Number(sequence?.cache_size), 1)
    })), 60_000)
})
