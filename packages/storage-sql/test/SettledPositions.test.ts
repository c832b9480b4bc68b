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
import { insertEventsTakingId, MARK_EVERY_MILLIS, MAX_MARKS, PostgresSettledPositions } from "../src/postgres/SettledPositions.js"
import * as SqlStorage from "../src/SqlStorage.js"
import { STRIDE_POSITIONS } from "../src/TrailCounts.js"
import { isWanted, postgresSkipReason, temporaryPostgresDatabase } from "./Dialects.js"
import * as Records from "./Records.js"

/** A statement's row: its snapshot's xmin, and the id it took when it took a mark. */
const row = (xmin: number, markXid?: number) => ({ snapshot_xmin: String(xmin), ...(markXid === undefined ? {} : { mark_xid: String(markXid) }) })

describe("PostgresSettledPositions: what a snapshot holds settled, from marks of earlier snapshots", () => {
  it("a mark (top, an id taken after its snapshot) serves the snapshots whose xmin reaches its id; nothing else, whatever the snapshot's own fields say", () => {
    const settled = new PostgresSettledPositions(0)
    // A statement that saw top 100 took id 20: until every transaction below 20 has finished, nothing is settled, even
    // where the snapshot shows none running (a transaction with an id above its xmax, a lower position, still runs).
    assert.strictEqual(settled.settledIn(100, row(15, 20)), 0)
    assert.strictEqual(settled.settledIn(150, row(19, 24)), 0)
    // Everything below 20 finished: up to 100 is settled, not 150 (its mark's id, 24, is above this xmin).
    assert.strictEqual(settled.settledIn(180, row(20)), 100)
    assert.strictEqual(settled.settledIn(200, row(24)), 150)
    // An older snapshot, read later (a unit that began earlier), uses only the marks its xmin reaches.
    assert.strictEqual(settled.settledIn(120, row(16)), 0)
    assert.strictEqual(settled.settledIn(160, row(22)), 100)
    // A statement's own mark serves its own snapshot when its id is its xmin: every id below finished before it.
    assert.strictEqual(settled.settledIn(300, row(40, 40)), 300)
  })

  it("takes a mark at most every markEveryMillis, never says more than the snapshot's top, and keeps a bounded number of marks", () => {
    let now = 0
    const timed = new PostgresSettledPositions(100, () => now)
    const marking = (columns: ReadonlyArray<unknown>) => columns.length > 1
    assert.isTrue(marking(timed.columns()))
    now = 99
    assert.isFalse(marking(timed.columns()))
    now = 100
    assert.isTrue(marking(timed.columns()))
    const settled = new PostgresSettledPositions(0)
    for (let n = 1; n <= 4 * MAX_MARKS; n++) settled.settledIn(n * 10, row(n, n + 1))
    // The newest marks are kept: the one of top 1,270 (id 128) serves a snapshot whose xmin is 128.
    assert.strictEqual(settled.settledIn(1_300, row(128)), 1_270)
    // A snapshot every mark serves, with a lower top than theirs (not possible with the sequence handing out values one
    // at a time): its top.
    assert.strictEqual(settled.settledIn(50, row(200)), 50)
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
    if (filter.from !== undefined) (values.push(filter.from), terms.push(`at >= $${values.length}`))
    if (filter.to !== undefined) (values.push(filter.to), terms.push(`at <= $${values.length}`))
    const { rows } = await connection.query(`select id from domain_events where ${terms.join(" and ")} order by position desc`, values)
    return rows.map((row: { readonly id: string }) => row.id)
  }

  const trailPage = (storage: Storage.Storage["Service"], clientId: string, filter: DomainEvent.TrailFilter, page: Page.PageRequest) =>
    storage.transaction(page.page === 1 ? "lookup" : "read", (unit) => unit.pageEvents(clientId, filter, page))

  // The time ranges are counted from their base trails' stride times (StrideTimes), which their edges cut.
  const filters: ReadonlyArray<DomainEvent.TrailFilter> = [
    {},
    { types: ["account.created"] },
    { entityId: "00000000-0000-7000-9000-000000000003" },
    { from: "2026-01-01T00:00:01.000Z", to: "2026-01-01T00:00:05.500Z" },
    { types: ["account.created"], from: "2026-01-01T00:00:02.345Z" }
  ]

  /**
   * Every filter's first, middle and last pages and totals on both nodes, against a fresh read; after a node's next
   * mark is due, so that its reads take marks (PostgresSettledPositions).
   */
  const allExact = (nodes: ReadonlyArray<Storage.Storage["Service"]>, connection: pg.Client, clientId: Ids.ClientId) =>
    Effect.andThen(Effect.sleep(`${MARK_EVERY_MILLIS + 10} millis`), Effect.forEach(nodes, (node) =>
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
        }), { discard: true }), { discard: true }))

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

  it.live("a transaction that took its id after others and its position before theirs (above the xmax of snapshots taken while it runs) is running: every page and total is exact, on two nodes", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, connect, nodes } = yield* withNodes
      const [writer, other, early, held, late, reader] = yield* Effect.all(Array.from({ length: 6 }, () => connect))
      const query = (connection: pg.Client, text: string) => Effect.promise(() => connection.query(text))
      yield* Effect.promise(() => insertEvents(writer!, client.id, 0, STRIDE_POSITIONS - 2))
      // `other` and `early` take ids; `held` takes a larger one and position 2047; `early` then takes 2048 and 2049,
      // and commits. Snapshots now show no transaction running below their xmax, and `held` above it.
      yield* query(other!, "begin")
      yield* query(other!, "select pg_current_xact_id()")
      yield* query(early!, "begin")
      yield* query(early!, "select pg_current_xact_id()")
      yield* query(held!, "begin")
      yield* Effect.promise(() => insertEvents(held!, client.id, 100_000, 1))
      yield* Effect.promise(() => insertEvents(early!, client.id, 200_000, 2))
      yield* query(early!, "commit")
      yield* allExact(nodes, reader!, client.id)
      // A later id completes, so that `held` is among the running of later snapshots, below their xmax.
      yield* query(other!, "commit")
      yield* query(late!, "begin")
      yield* query(late!, "select pg_current_xact_id()")
      yield* query(late!, "commit")
      yield* allExact(nodes, reader!, client.id)
      yield* query(held!, "commit")
      yield* allExact(nodes, reader!, client.id)
      yield* Effect.promise(() => insertEvents(writer!, client.id, 300_000, 2 * STRIDE_POSITIONS))
      yield* allExact(nodes, reader!, client.id)
    })), 120_000)

  it.live("marks taken on a quiet log let a node's snapshots hold the whole log settled, so its reads use the counts", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client, connect, nodes } = yield* withNodes
      const writer = yield* connect
      yield* Effect.promise(() => insertEvents(writer, client.id, 0, 3 * STRIDE_POSITIONS))
      const answers: Array<{ readonly top: number; readonly settled: number }> = []
      const settledIn = PostgresSettledPositions.prototype.settledIn
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          PostgresSettledPositions.prototype.settledIn = function(this: PostgresSettledPositions, top, row) {
            const settled = settledIn.call(this, top, row)
            answers.push({ top, settled })
            return settled
          }
        }),
        () => Effect.sync(() => (PostgresSettledPositions.prototype.settledIn = settledIn))
      )
      // Two reads a mark apart are enough on a quiet server; a transaction another test holds open on the same server
      // (in any database: a snapshot's xmin is the server's) holds it back until it ends, so this reads on until then.
      for (let read = 0; read < 2 || (answers.at(-1)?.settled !== 3 * STRIDE_POSITIONS && read < 300); read++) {
        yield* Effect.sleep(`${MARK_EVERY_MILLIS + 10} millis`)
        yield* trailPage(nodes[0], client.id, {}, { page: 40, limit: 50 })
      }
      assert.deepStrictEqual(answers.at(-1), { top: 3 * STRIDE_POSITIONS, settled: 3 * STRIDE_POSITIONS })
    })), 90_000)

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
