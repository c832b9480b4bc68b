/**
 * The audit trail's totals and pages on SQLite from counts kept per stride of the log (TrailCounts): exact, first
 * and deep, for every filter, as the log grows here and through another connection; counted off the event loop (the
 * read worker) or on it in short units, so a request begun after a trail's first count is answered first.
 */
import { assert, describe, it } from "@effect/vitest"
import type { DomainEvent, Page, Storage } from "@custody-relay/core"
import type { Database as BetterSqliteDatabase } from "better-sqlite3"
import { Cause, Effect } from "effect"
import * as fc from "fast-check"
import type { CompiledQuery } from "kysely"
import { SqliteEngine } from "../src/sqlite/SqliteEngine.js"
import type { SqlEngine } from "../src/SqlEngine.js"
import * as SqlStorage from "../src/SqlStorage.js"
import * as StorageFailure from "../src/StorageFailure.js"
import { farWalkOf, isWalkPause } from "../src/PageBoundaries.js"
import {
  CountTurnHeld,
  isCountTurnWanted,
  isReadUnitWanted,
  MAX_RANGE_TRAILS,
  MAX_TRAILS,
  SPAN_ON_LOOP,
  STRIDE_POSITIONS,
  TrailCounts,
  type TrailReads,
  UNTURNED_COUNT_STRIDES
} from "../src/TrailCounts.js"
import { isWanted, migratedSqliteFile } from "./Dialects.js"
import { offLoopCounted, withLookupOnNextTurn } from "./EventLoopTurns.js"
import { queryPlanOf, recording } from "./Recording.js"
import * as Records from "./Records.js"

const TYPES = ["transaction.initiated", "funds.reserved", "account.created"] as const
const ENTITIES = 50

/**
 * `count` events written straight into the file by `other`, numbered from `from`: every fourth of `otherClient`, the
 * rest of `client`, about a millisecond apart from 2026-01-01, their types and entities in turn.
 */
const insertEvents = (other: BetterSqliteDatabase, client: string, otherClient: string, from: number, count: number) =>
  other.prepare(`
    with recursive n(i) as (select ? union all select i + 1 from n where i < ?)
    insert into domain_events (id, type, client_id, entity_type, entity_id, status_before, status_after, actor, at, data)
    select printf('00000000-0000-7000-8000-%012x', i),
      case i % 3 when 0 then '${TYPES[0]}' when 1 then '${TYPES[1]}' else '${TYPES[2]}' end,
      case when i % 4 = 0 then ? else ? end,
      case when i % 3 = 2 then 'account' else 'transaction' end,
      printf('00000000-0000-7000-9000-%012x', i % ${ENTITIES}), null, null, '{"kind":"system"}',
      strftime('%Y-%m-%dT%H:%M:%fZ', 1767225600 + i / 1000.0, 'unixepoch'), '{}'
    from n
  `).run(from, from + count - 1, otherClient, client)

/** A storage on a new SQLite file (`readWorker` as given), a client with `rows` events, and `other`, a second connection. */
const withEvents = (rows: number, readWorker: boolean, engine: SqlEngine = SqliteEngine) =>
  Effect.gen(function*() {
    const { db, filename } = yield* migratedSqliteFile("trail.db", { readWorker })
    const storage = SqlStorage.make(db, engine)
    const client = Records.client()
    const otherClient = Records.client()
    yield* storage.transaction("write", (unit) => Effect.andThen(unit.insertClient(client), unit.insertClient(otherClient)))
    const { default: BetterSqlite3 } = yield* Effect.promise(() => import("better-sqlite3"))
    const other = yield* Effect.acquireRelease(Effect.sync(() => new BetterSqlite3(filename)), (other) => Effect.sync(() => other.close()))
    insertEvents(other, client.id, otherClient.id, 1, rows)
    return { storage, client, otherClient, other }
  })

/**
 * The next turn of the event loop: lookups share a read transaction for the rest of a turn (LookupSnapshot; a
 * request's credential check ends it sooner when another connection committed), so another connection's writes are
 * looked up from the next.
 */
const nextTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/** What the trail holds, newest first, as the other connection reads it. */
const expectedIds = (other: BetterSqliteDatabase, clientId: string | null, filter: DomainEvent.TrailFilter): Array<string> => {
  const terms: Array<string> = []
  const values: Array<string> = []
  if (clientId !== null) (terms.push("client_id = ?"), values.push(clientId))
  if (filter.entityType !== undefined) (terms.push("entity_type = ?"), values.push(filter.entityType))
  if (filter.entityId !== undefined) (terms.push("entity_id = ?"), values.push(filter.entityId))
  if (filter.types !== undefined) (terms.push(`type in (${filter.types.map(() => "?").join(", ")})`), values.push(...filter.types))
  if (filter.from !== undefined) (terms.push("at >= ?"), values.push(filter.from))
  if (filter.to !== undefined) (terms.push("at <= ?"), values.push(filter.to))
  const rows = other.prepare(`select id from domain_events ${terms.length === 0 ? "" : `where ${terms.join(" and ")}`} order by position desc`).all(...values)
  return (rows as Array<{ readonly id: string }>).map((row) => row.id)
}

/** A page of the trail as the audit trail reads it: the first in a lookup unit, a later one in a read unit (Storage.unitForPage). */
const trailPage = (storage: Storage.Storage["Service"], clientId: string | null, filter: DomainEvent.TrailFilter, page: Page.PageRequest) =>
  storage.transaction(page.page === 1 ? "lookup" : "read", (unit) => unit.pageEvents(clientId, filter, page))

const filters: ReadonlyArray<DomainEvent.TrailFilter> = [
  {},
  { entityType: "account" },
  { entityId: "00000000-0000-7000-9000-000000000007" },
  { types: [TYPES[1], TYPES[0]] },
  { from: "2026-01-01T00:00:05.000Z", to: "2026-01-01T00:00:20.000Z" }
]

describe.skipIf(!isWanted("sqlite-file"))("SQL storage: the audit trail's totals and pages from counts kept per stride (SQLite file, PAGE-1, PAGE-4)", () => {
  for (const readWorker of [true, false]) {
    it.live(`every filter's first, deep and last pages and totals are exact as the log grows, here and through another connection (${readWorker ? "read worker" : "no read worker"})`, () =>
      Effect.gen(function*() {
        // Seven strides and a part, so pages fall on both sides of stride ends.
        const rows = 7 * STRIDE_POSITIONS + 1_500
        const { client, other, otherClient, storage } = yield* withEvents(rows, readWorker)
        const checkPages = Effect.gen(function*() {
          for (const clientId of [client.id, null]) {
            for (const filter of filters) {
              const all = expectedIds(other, clientId, filter)
              const limit = 20
              const last = Math.max(1, Math.ceil(all.length / limit))
              for (const page of new Set([1, 2, Math.ceil(last / 3), Math.ceil(last / 2), last - 1, last, last + 1].filter((page) => page >= 1))) {
                const found = yield* trailPage(storage, clientId, filter, { page, limit })
                assert.deepStrictEqual(
                  { ids: found.items.map((event) => event.id), total: found.total },
                  { ids: all.slice((page - 1) * limit, page * limit), total: all.length },
                  `${clientId} ${JSON.stringify(filter)} page ${page}`
                )
              }
            }
          }
        })
        yield* checkPages
        // An event appended through the store, then a stride and more by another connection (another process).
        const appended = {
          id: crypto.randomUUID(),
          type: "account.created",
          clientId: client.id,
          entityType: "account",
          entityId: "00000000-0000-7000-9000-000000000007",
          statusBefore: null,
          statusAfter: null,
          actor: { kind: "system" },
          at: "2026-01-01T00:00:10.000Z",
          data: {}
        } as unknown as DomainEvent.DomainEvent
        yield* storage.transaction("write", (unit) => unit.appendEvent(appended))
        yield* checkPages
        insertEvents(other, client.id, otherClient.id, rows + 10, STRIDE_POSITIONS + 700)
        yield* nextTurn
        yield* checkPages
      }), 120_000)
  }

  for (const way of ["off the event loop (the read worker)", "on it, pausing (no read worker)"] as const) {
    it.live(`a trail's first count leaves the event loop turns, counting ${way}: a lookup begun after it answers first, the total is exact, and a later read counts only what was added`, () =>
      Effect.gen(function*() {
        // About 195 strides: counting them takes several milliseconds on any machine, so the first unit leaves the loop.
        const rows = 400_000
        const { counted, engine } = offLoopCounted()
        const { client, other, otherClient, storage } = yield* withEvents(rows, way.startsWith("off"), engine)
        const all = expectedIds(other, client.id, {})
        const { finished, turns, value: first } = yield* withLookupOnNextTurn(
          trailPage(storage, client.id, {}, { page: 1, limit: 20 }),
          storage.transaction("lookup", (unit) => unit.getClient(otherClient.id))
        )
        assert.deepStrictEqual(finished, ["lookup", "read"])
        assert.isAtLeast(turns, 1, "the count's units ran in separate turns of the event loop")
        assert.deepStrictEqual({ ids: first.items.map((event) => event.id), total: first.total }, { ids: all.slice(0, 20), total: all.length })
        // Off the event loop the strides left after the first unit's millisecond are one read of the worker.
        assert.strictEqual(counted.reads, way.startsWith("off") ? 1 : 0)
        // Later reads, a deep page's too, count only the events added since: no read leaves the loop again. Less than a
        // stride is added, so at most one stride is new, and a unit always counts its first on the loop (more would
        // leave it once they took longer than UNIT_MILLIS, which depends on the machine).
        insertEvents(other, client.id, otherClient.id, rows + 1, STRIDE_POSITIONS - 100)
        yield* nextTurn
        const grown = expectedIds(other, client.id, {})
        const middle = Math.ceil(grown.length / 40)
        const deep = yield* trailPage(storage, client.id, {}, { page: middle, limit: 20 })
        assert.deepStrictEqual({ ids: deep.items.map((event) => event.id), total: deep.total }, { ids: grown.slice((middle - 1) * 20, middle * 20), total: grown.length })
        assert.strictEqual(counted.reads, way.startsWith("off") ? 1 : 0)
      }), 120_000)
  }
})

/** A storage on a new SQLite file whose every select is recorded (`issued`), a client, and `count` events of it in turn of TYPES. */
const recordingStorage = (count: number, entityOf: (i: number) => string) =>
  Effect.gen(function*() {
    const { db, issued, storage } = yield* recording(/^select/)
    const client = Records.client()
    yield* storage.transaction("write", (unit) => unit.insertClient(client))
    // A thousand a unit: a unit's events go in one insert, within SQLite's limit of bound values.
    for (let from = 0; from < count; from += 1_000) {
      yield* storage.transaction("write", (unit) =>
        Effect.forEach(Array.from({ length: Math.min(1_000, count - from) }, (_, i) => from + i), (i) =>
          unit.appendEvent({
            id: crypto.randomUUID(),
            type: TYPES[i % 3],
            clientId: client.id,
            entityType: "transaction",
            entityId: entityOf(i),
            statusBefore: null,
            statusAfter: null,
            actor: { kind: "system" },
            at: "2026-01-01T00:00:10.000Z",
            data: {}
          } as unknown as DomainEvent.DomainEvent)))
    }
    issued.length = 0
    const planOf = (query: CompiledQuery) => Effect.map(queryPlanOf(db, query), (plan) => plan.rows.map((row) => row.detail))
    return { client, issued, planOf, storage }
  })

const RECORD = "00000000-0000-7000-9000-000000000007"

describe.skipIf(!isWanted("sqlite-file"))("SQL storage: a record's trail, and a first page that must count (SQLite file, PAGE-1)", () => {
  it.live("a record's trail in a large log: counted once, then each first page is one statement through the entity's index", () =>
    Effect.gen(function*() {
      // Three of the record's events among 7,000 of its client's: three strides and more.
      const { client, issued, planOf, storage } = yield* recordingStorage(7_000, (i) => (i % 2_500 === 0 ? RECORD : crypto.randomUUID()))
      const first = yield* trailPage(storage, client.id, { entityId: RECORD }, { page: 1, limit: 20 })
      assert.strictEqual(first.total, 3)
      issued.length = 0
      const again = yield* trailPage(storage, client.id, { entityId: RECORD }, { page: 1, limit: 20 })
      assert.deepStrictEqual(again, first)
      assert.strictEqual(issued.length, 1, issued.map((query) => query.sql).join("\n"))
      const plan = yield* planOf(issued[0]!)
      for (const detail of plan.filter((detail) => detail.includes("domain_events"))) {
        assert.match(detail, /USING (COVERING )?INDEX domain_events_entity|^SEARCH domain_events$/, plan.join(" | "))
      }
    }))

  it.live("a lookup whose shared read transaction is older than the trail's counts asks for a read unit, and its page and total agree", () =>
    Effect.gen(function*() {
      const { counted: units, engine } = offLoopCounted()
      const { client, other, otherClient, storage } = yield* withEvents(STRIDE_POSITIONS, true, engine)
      // Within one turn: a lookup opens the reader's shared transaction (LookupSnapshot), another connection then
      // writes a stride and more, and a read unit (on the writer's connection, which sees them) counts that stride:
      // one stride, which a unit always counts on the loop, so the turn does not end before the next lookup.
      const before = yield* trailPage(storage, client.id, {}, { page: 1, limit: 20 })
      insertEvents(other, client.id, otherClient.id, STRIDE_POSITIONS + 1, STRIDE_POSITIONS + 100)
      const all = expectedIds(other, client.id, {})
      const counted = yield* trailPage(storage, client.id, {}, { page: 2, limit: 20 })
      assert.deepStrictEqual({ ids: counted.items.map((event) => event.id), total: counted.total }, { ids: all.slice(20, 40), total: all.length })
      // The lookup, still on the older transaction, sees a log that ends before the counts do: it must not add them
      // to its rows. It runs again as a read unit, whose snapshot is the newest.
      const opened = units.readUnits
      const again = yield* trailPage(storage, client.id, {}, { page: 1, limit: 20 })
      // (More than one when that unit itself ran again, a lost race or a pause.)
      assert.isAbove(units.readUnits, opened, "the lookup ran again as a read unit")
      assert.notDeepEqual(before.total, all.length)
      assert.deepStrictEqual({ ids: again.items.map((event) => event.id), total: again.total }, { ids: all.slice(0, 20), total: all.length })
    }))

  it.live("a lookup that lost a race, then asks for a read unit in its re-run, runs as one (its page exact)", () =>
    Effect.gen(function*() {
      const { client, storage } = yield* recordingStorage(7_000, () => RECORD)
      let runs = 0
      const found = yield* storage.transaction("lookup", (unit) =>
        runs++ === 0 ? Effect.fail(StorageFailure.conflict(new Error("a lost race"))) : unit.pageEvents(client.id, {}, { page: 1, limit: 20 }))
      assert.strictEqual(found.total, 7_000)
      assert.strictEqual(found.items.length, 20)
      // The lost race, the lookup again (it asks for a read unit), the read unit (again after each pause, should its
      // counting outlast UNIT_MILLIS on a slow machine). Retried as a lookup, it would have run 9 times or more.
      assert.isAtLeast(runs, 3)
      assert.isBelow(runs, 9)
    }))
})

describe.skipIf(!isWanted("sqlite-file"))("SQL storage: the audit trail's statements read a range of positions through an index (SQLite query plans)", () => {
  it.live("every statement a trail's pages issue, for every filter, with and without a client, seeks a range of positions in an index or the log's own key", () =>
    Effect.gen(function*() {
      // Enough events that later pages have rows to read.
      const { client, issued, planOf, storage } = yield* recordingStorage(90, () => RECORD)
      for (const filter of [...filters, { entityId: RECORD, types: [TYPES[0]] }]) {
        for (const clientId of [client.id, null]) {
          yield* trailPage(storage, clientId, filter, { page: 1, limit: 20 })
          yield* trailPage(storage, clientId, filter, { page: 3, limit: 20 })
        }
      }
      const statements = issued.filter((query) => query.sql.includes("domain_events"))
      assert.isAtLeast(statements.length, 24)
      assert.isTrue(statements.some((query) => /order by "position" asc limit/.test(query.sql)), "a later page's rows were read")
      for (const query of statements) {
        // A page whose skipped events its index holds reads its own rows by their positions (EventLog's deferred join).
        const byPosition = /"position" in \(select/.test(query.sql) ? /|=\?/.source : ""
        const seeks = new RegExp(
          `^SEARCH domain_events( USING (COVERING )?INDEX domain_events_\\w+ \\(\\w+=\\? AND position>\\?( AND position<\\?)?\\)| USING INTEGER PRIMARY KEY \\(rowid(>\\?( AND rowid<\\?)?${byPosition})\\))?$`
        )
        for (const detail of (yield* planOf(query)).filter((detail) => detail.includes("domain_events"))) {
          // The log's largest position is its key's last entry ("SEARCH domain_events", no range).
          assert.match(detail, seeks, query.sql)
        }
      }
    }))
})

describe.skipIf(!isWanted("sqlite-file"))("SQL storage: a sparse trail's page is found off the event loop (SQLite file, PAGE-4)", () => {
  it.live("a page of a trail whose events lie far apart in the log has its positions read on the worker, then its rows by position; it is exact, and a lookup begun after it answers first", () =>
    Effect.gen(function*() {
      const { counted, engine } = offLoopCounted()
      const { client, other, otherClient, storage } = yield* withEvents(1, true, engine)
      // 21 rare events, each after 4,500 others: the trail's 20 newest lie across 45 strides.
      const rare = other.prepare(`
        insert into domain_events (id, type, client_id, entity_type, entity_id, status_before, status_after, actor, at, data)
        values (?, 'account.approved', ?, 'account', ?, null, null, '{"kind":"system"}', '2026-01-01T01:00:00.000Z', '{}')
      `)
      for (let i = 0; i < 21; i++) {
        insertEvents(other, client.id, otherClient.id, 2 + i * 4_501, 4_500)
        rare.run(crypto.randomUUID(), client.id, crypto.randomUUID())
      }
      const filter: DomainEvent.TrailFilter = { types: ["account.approved"] }
      const all = expectedIds(other, client.id, filter)
      const { finished, value: first } = yield* withLookupOnNextTurn(
        trailPage(storage, client.id, filter, { page: 1, limit: 20 }),
        storage.transaction("lookup", (unit) => unit.getClient(otherClient.id))
      )
      assert.deepStrictEqual(finished, ["lookup", "read"])
      assert.deepStrictEqual({ ids: first.items.map((event) => event.id), total: first.total }, { ids: all.slice(0, 20), total: 21 })
      // The strides' count, then the page's positions.
      assert.strictEqual(counted.reads, 2)
      const second = yield* trailPage(storage, client.id, filter, { page: 2, limit: 20 })
      assert.deepStrictEqual({ ids: second.items.map((event) => event.id), total: second.total }, { ids: all.slice(20), total: 21 })
      // Other events appended since leave the page's positions where they were: the kept ones serve it, no read leaves
      // the loop again.
      insertEvents(other, client.id, otherClient.id, 200_000, 500)
      yield* nextTurn
      const again = yield* trailPage(storage, client.id, filter, { page: 1, limit: 20 })
      assert.deepStrictEqual({ ids: again.items.map((event) => event.id), total: again.total }, { ids: all.slice(0, 20), total: 21 })
      assert.strictEqual(counted.reads, 2)
    }), 120_000)
})

/**
 * TrailReads over a log held in an array (whether each position is the trail's), for tests without SQL. The unit's
 * snapshot lacks the positions `hidden` holds (their transactions running, or rolled back) and holds settled those up
 * to `settled()` (its top when absent). `inUnit`: strides are counted in the unit, as where statements run in the
 * database (PostgreSQL). `onLoop` is told of each read in the unit with the positions it may pass, `onLookup` of each
 * first page's `after`, `onFar` of each read off the loop (offered when `offLoop`), `onCounted` of the positions each
 * count in the unit reads (`count`, `countPerStride`).
 */
const readsOfLog = (
  log: ReadonlyArray<boolean>,
  options: {
    readonly indexHolds: boolean
    readonly offLoop: boolean
    readonly inUnit?: boolean
    readonly hidden?: ReadonlySet<number>
    readonly settled?: () => number
    readonly onLoop?: (after: number, upTo: number) => void
    readonly onCounted?: (after: number, upTo: number) => void
    readonly onLookup?: (after: number) => void
    readonly onFar?: () => void
    /** Reads issued together share a round trip (PostgreSQL): a later page is guessed at; as `inUnit` when absent. */
    readonly shareRoundTrip?: boolean
    /** The trail is a time range's (TrailReads.timeRange). */
    readonly timeRange?: boolean
    /** Told of each read in the unit, by its name in TrailReads. */
    readonly onRead?: (read: keyof TrailReads<number>) => void
  }
): TrailReads<number> => {
  const hidden = options.hidden ?? new Set<number>()
  const held = (after: number, upTo: number) => {
    const found: Array<number> = []
    for (let position = after + 1; position <= Math.min(upTo, log.length); position++) if (log[position - 1] && !hidden.has(position)) found.push(position)
    return found
  }
  const end = () => {
    let top = log.length
    while (top > 0 && hidden.has(top)) top--
    return { top, settled: options.settled?.() ?? top }
  }
  const perStride = (after: number, upTo: number, size: number) => {
    const per = new Map<number, number>()
    for (const position of held(after, upTo)) per.set(Math.floor((position - 1) / size), (per.get(Math.floor((position - 1) / size)) ?? 0) + 1)
    return [...per].map(([k, count]) => ({ stride: k, count }))
  }
  const onLoop = (after: number, upTo: number) => options.onLoop?.(after, upTo)
  const onRead = (read: keyof TrailReads<number>) => options.onRead?.(read)
  return {
    indexHolds: options.indexHolds,
    timeRange: options.timeRange ?? false,
    readsShareRoundTrip: options.shareRoundTrip ?? options.inUnit === true,
    top: () => Effect.sync(() => (onRead("top"), end())),
    topWithTail: (after, upTo) =>
      Effect.sync(() => {
        onRead("topWithTail")
        onLoop(after, upTo)
        return { ...end(), tail: held(after, upTo).length }
      }),
    count: (after, upTo) => Effect.sync(() => (onRead("count"), onLoop(after, upTo), options.onCounted?.(after, upTo), held(after, upTo).length)),
    newestWithTail: (after, size, upTo, newerThan, limit) =>
      Effect.sync(() => {
        onRead("newestWithTail")
        onLoop(Math.min(after, newerThan), upTo)
        options.onLookup?.(after)
        return {
          rows: held(newerThan, upTo).reverse().slice(0, limit),
          inStride: held(after, after + size).length,
          beyond: held(after + size, upTo).length,
          end: end()
        }
      }),
    between: (after, upTo, limit, offset) => Effect.sync(() => (onRead("between"), onLoop(after, upTo), held(after, upTo).slice(offset, offset + limit))),
    atPositions: (positions) => Effect.sync(() => (onRead("atPositions"), [...positions].sort((a, b) => b - a))),
    ...(options.inUnit === true
      ? {
        countPerStride: (after: number, upTo: number, size: number) =>
          Effect.sync(() => (onRead("countPerStride"), options.onCounted?.(after, upTo), perStride(after, upTo, size)))
      }
      : {}),
    ...(options.offLoop
      ? {
        offLoop: {
          countPerStride: (after: number, upTo: number, size: number) => Effect.sync(() => (options.onFar?.(), perStride(after, upTo, size))),
          positionsBetween: (after: number, upTo: number, limit: number, offset: number) =>
            Effect.sync(() => (options.onFar?.(), held(after, upTo).slice(offset, offset + limit)))
        }
      }
      : {})
  }
}

/**
 * A page as the storage reads it (SqlStorage): a first page in a lookup, then as a read unit if it asks for one; a
 * unit that stops with a far walk runs again after its reads, one that pauses runs again. Where long counts take
 * turns (`takesTurns`, PostgreSQL), a read unit runs without a turn, and again holding one when it asks; `onRun` is
 * told before each run whether it holds one.
 */
const runPage = (
  counts: TrailCounts,
  reads: TrailReads<number>,
  request: Page.PageRequest,
  turns: { readonly takesTurns: boolean; readonly onRun?: (turnHeld: boolean) => void } = { takesTurns: false }
): Page.Page<number> => {
  let lookup = request.page === 1
  let turnHeld = !turns.takesTurns
  for (let runs = 0; runs < 1_000; runs++) {
    turns.onRun?.(turnHeld)
    const unit = lookup ? counts.firstPage("trail", request.limit, reads) : counts.page("trail", request, reads)
    const exit = Effect.runSync(Effect.exit(Effect.provideService(unit, CountTurnHeld, turnHeld)))
    if (exit._tag === "Success") return exit.value
    const error = exit.cause.reasons[0]?._tag === "Fail" ? (exit.cause.reasons[0] as { readonly error: unknown }).error : undefined
    const far = farWalkOf(error)
    if (far !== undefined) Effect.runSync(far)
    else if (isCountTurnWanted(error) && !turnHeld) turnHeld = true
    else if (isReadUnitWanted(error)) lookup = false
    else if (!isWalkPause(error)) throw error ?? Cause.squash(exit.cause)
  }
  throw new Error("the unit never finished")
}

/** The trail's positions in `log`, newest first. */
const newestFirst = (log: ReadonlyArray<boolean>): Array<number> => log.flatMap((is, i) => (is ? [i + 1] : [])).reverse()

/**
 * A model: TrailCounts over a log held in an array (each event's position and whether the trail holds it), with a
 * stride of 4 positions, against the slice of the trail's events. Reads note the positions they may pass, so the test
 * also checks that, with reads off the loop, none on it passes more than SPAN_ON_LOOP strides', however sparse the
 * trail and however far the log grew since it was last counted, unless the index holds the filter.
 */
describe("TrailCounts against a model of the log (PAGE-1, PAGE-4)", () => {
  type Step =
    | { readonly kind: "append"; readonly count: number; readonly every: number }
    | { readonly kind: "page"; readonly page: number; readonly limit: number }

  const step: fc.Arbitrary<Step> = fc.oneof(
    { weight: 2, arbitrary: fc.record({ kind: fc.constant("append" as const), count: fc.integer({ min: 1, max: 60 }), every: fc.constantFrom(1, 2, 7, 25, 0) }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant("page" as const), page: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 30 })), limit: fc.integer({ min: 1, max: 9 }) }) }
  )

  it.effect("every page and total is the model's slice, through appends, with and without reads off the loop, counting in units of any length, later pages guessed at where reads share a round trip", () =>
    Effect.sync(() =>
      fc.assert(
        fc.property(fc.array(step, { minLength: 1, maxLength: 40 }), fc.boolean(), fc.boolean(), fc.integer({ min: 0, max: 3 }), fc.boolean(), (steps, offLoop, indexHolds, unitSteps, shareRoundTrip) => {
          const stride = 4
          const log: Array<boolean> = []
          let passedOnLoop = 0
          let ticks = 0
          // Each count or read advances the clock by one: a unit counts `unitSteps + 1` strides before it stops.
          const counts = new TrailCounts(stride, unitSteps + 0.5, () => ticks)
          const reads = readsOfLog(log, {
            indexHolds,
            offLoop,
            // Reads share a round trip where statements run in the database, which has no read worker.
            shareRoundTrip: shareRoundTrip && !offLoop,
            onLoop: (after, upTo) => {
              ticks++
              passedOnLoop = Math.max(passedOnLoop, Math.min(upTo, log.length) - after)
            }
          })
          for (const next of steps) {
            if (next.kind === "append") {
              // Every `every`th position is the trail's; none when `every` is 0.
              for (let i = 0; i < next.count; i++) log.push(next.every > 0 && log.length % next.every === 0)
              continue
            }
            passedOnLoop = 0
            const found = runPage(counts, reads, next)
            const all = newestFirst(log)
            const offset = (next.page - 1) * next.limit
            assert.deepStrictEqual(found, { items: all.slice(offset, offset + next.limit), total: all.length })
            // With reads off the loop, none on it passes more than SPAN_ON_LOOP strides' positions (where the index
            // holds the filter a read passes only the trail's events, and is not bounded so).
            if (offLoop && !indexHolds) assert.isAtMost(passedOnLoop, SPAN_ON_LOOP * stride, JSON.stringify(next))
          }
        }),
        { numRuns: 500 }
      )
    ))

  it.effect("every page and total is the model's slice where a snapshot lacks events below its top, holding settled only what no running transaction can still add to, read in snapshots old and new, long counts taking turns or not; a unit without a turn counts at most UNTURNED_COUNT_STRIDES strides' positions (PostgreSQL)", () =>
    Effect.sync(() => {
      type Change =
        | { readonly kind: "append"; readonly count: number; readonly every: number; readonly running: boolean }
        | { readonly kind: "end"; readonly oldest: number; readonly commit: boolean }
        | { readonly kind: "page"; readonly page: number; readonly limit: number; readonly lag: number; readonly age: number }
      const change: fc.Arbitrary<Change> = fc.oneof(
        {
          weight: 2,
          arbitrary: fc.record({
            kind: fc.constant("append" as const),
            // Mostly short appends: a lookup answers only within two strides of the counts' end. Now and then a long
            // one, past what a unit counts without a turn.
            count: fc.oneof(
              { weight: 3, arbitrary: fc.integer({ min: 1, max: 3 }) },
              { weight: 3, arbitrary: fc.integer({ min: 1, max: 10 }) },
              { weight: 1, arbitrary: fc.integer({ min: UNTURNED_COUNT_STRIDES * 4, max: UNTURNED_COUNT_STRIDES * 10 }) }
            ),
            every: fc.constantFrom(1, 2, 7, 0),
            running: fc.boolean()
          })
        },
        { weight: 1, arbitrary: fc.record({ kind: fc.constant("end" as const), oldest: fc.integer({ min: 0, max: 3 }), commit: fc.boolean() }) },
        {
          weight: 3,
          arbitrary: fc.record({
            kind: fc.constant("page" as const),
            page: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 20 })),
            limit: fc.integer({ min: 1, max: 9 }),
            lag: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 12 })),
            age: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 4 }))
          })
        }
      )
      // What a snapshot holds: the log's length when it was taken, and the positions of the transactions running
      // then (appended, not committed) or rolled back.
      interface Snapshot {
        readonly length: number
        readonly running: ReadonlyArray<number>
        readonly hidden: ReadonlySet<number>
      }
      fc.assert(
        fc.property(fc.array(change, { minLength: 1, maxLength: 60 }), fc.boolean(), fc.boolean(), (changes, indexHolds, takesTurns) => {
          const stride = 4
          // The positions counted by the unit's current run, and whether it holds a turn.
          let counted = 0
          let turnHeld = true
          const log: Array<boolean> = []
          const running: Array<number> = []
          const hidden = new Set<number>()
          // The snapshots taken after each change, newest last: a unit may read in one taken a few changes ago (it
          // began before them), after units on newer ones kept their counts.
          const taken: Array<Snapshot> = []
          const counts = new TrailCounts(stride, Number.POSITIVE_INFINITY)
          for (const next of changes) {
            if (next.kind === "append") {
              for (let i = 0; i < next.count; i++) {
                log.push(next.every > 0 && log.length % next.every === 0)
                if (next.running) {
                  running.push(log.length)
                  hidden.add(log.length)
                }
              }
            } else if (next.kind === "end") {
              // One running transaction's positions (the `oldest`th's), committed or rolled back.
              const at = running[Math.min(next.oldest, running.length - 1)]
              if (at !== undefined) {
                running.splice(running.indexOf(at), 1)
                if (next.commit) hidden.delete(at)
              }
            } else {
              const snapshot = taken[Math.max(0, taken.length - 1 - next.age)] ?? { length: 0, running: [], hidden: new Set<number>() }
              const seen = log.slice(0, snapshot.length)
              // It holds settled up to its first running transaction's position (and its top), less a lag: an engine
              // may learn it late, and say less, never more.
              const settled = () => {
                let top = seen.length
                while (top > 0 && snapshot.hidden.has(top)) top--
                return Math.max(0, Math.min(top, (snapshot.running[0] ?? Number.POSITIVE_INFINITY) - 1) - next.lag)
              }
              const onCounted = (after: number, upTo: number) => {
                counted += upTo - after
                if (!turnHeld) assert.isAtMost(counted, UNTURNED_COUNT_STRIDES * stride, JSON.stringify(next))
              }
              const reads = readsOfLog(seen, { indexHolds, offLoop: false, inUnit: true, hidden: snapshot.hidden, settled, onCounted })
              const onRun = (held: boolean) => {
                counted = 0
                turnHeld = held
              }
              const found = runPage(counts, reads, next, { takesTurns, onRun })
              const all = seen.flatMap((is, i) => (is && !snapshot.hidden.has(i + 1) ? [i + 1] : [])).reverse()
              const offset = (next.page - 1) * next.limit
              assert.deepStrictEqual(found, { items: all.slice(offset, offset + next.limit), total: all.length }, JSON.stringify(next))
            }
            taken.push({ length: log.length, running: [...running], hidden: new Set(hidden) })
          }
        }),
        { numRuns: 1_000 }
      )
    }))

  it.effect("a lookup keeps no stride's count its snapshot holds but not settled: a transaction still running below (PostgreSQL)", () =>
    Effect.gen(function*() {
      const log = Array.from({ length: 5 }, () => true)
      const hidden = new Set([1])
      const counts = new TrailCounts(4, Number.POSITIVE_INFINITY)
      const reads = readsOfLog(log, { indexHolds: true, offLoop: false, inUnit: true, hidden, settled: () => (hidden.size === 0 ? log.length : 0) })
      assert.deepStrictEqual(yield* counts.firstPage("trail", 1, reads), { items: [5], total: 4 })
      // Position 1's transaction commits: the stride (0, 4] now holds 4 events, not the 3 the first lookup saw.
      hidden.delete(1)
      assert.deepStrictEqual(yield* counts.firstPage("trail", 1, reads), { items: [5], total: 5 })
    }))

  it.effect("a lookup in a snapshot that does not hold the counted strides settled (taken before a commit below them) asks for a read unit, which counts what it holds (PostgreSQL)", () =>
    Effect.gen(function*() {
      const log = Array.from({ length: 12 }, () => true)
      const counts = new TrailCounts(4, Number.POSITIVE_INFINITY)
      // A unit on a new snapshot counts the three strides.
      assert.deepStrictEqual(yield* counts.page("trail", { page: 1, limit: 2 }, readsOfLog(log, { indexHolds: true, offLoop: false, inUnit: true })), {
        items: [12, 11],
        total: 12
      })
      // A unit that began earlier, while position 2's transaction ran, reads next.
      const older = readsOfLog(log, { indexHolds: true, offLoop: false, inUnit: true, hidden: new Set([2]), settled: () => 1 })
      const asked = yield* Effect.flip(counts.firstPage("trail", 2, older))
      assert.isTrue(isReadUnitWanted(asked))
      assert.deepStrictEqual(yield* counts.page("trail", { page: 6, limit: 2 }, older), { items: [1], total: 11 })
    }))

  it.effect("a first page's lookup keeps the next stride's count when its snapshot holds it whole, and the next lookup counts from there", () =>
    Effect.gen(function*() {
      const stride = 4
      const log: Array<boolean> = Array.from({ length: 14 }, () => true)
      const asked: Array<number> = []
      const counts = new TrailCounts(stride, Number.POSITIVE_INFINITY)
      const reads = readsOfLog(log, { indexHolds: true, offLoop: false, onLookup: (after) => asked.push(after) })
      // A read unit counts the three whole strides.
      yield* counts.page("trail", { page: 1, limit: 2 }, reads)
      log.push(...Array.from({ length: 6 }, () => true))
      // The log now ends at 20: the lookup counts (12, 16] apart and keeps it, as its snapshot holds 16.
      assert.deepStrictEqual(yield* counts.firstPage("trail", 2, reads), { items: [20, 19], total: 20 })
      assert.deepStrictEqual(yield* counts.firstPage("trail", 2, reads), { items: [20, 19], total: 20 })
      assert.deepStrictEqual(asked, [12, 16])
    }))

  it.effect("a later page of a trail read before is one round trip where reads share one: the log's end with the events after the kept strides, and the page guessed at beside it (PostgreSQL, PAGE-1)", () =>
    Effect.gen(function*() {
      const log: Array<boolean> = Array.from({ length: 30 }, (_, i) => i % 2 === 0)
      const issued: Array<string> = []
      const counts = new TrailCounts(4, Number.POSITIVE_INFINITY)
      const reads = readsOfLog(log, { indexHolds: true, offLoop: false, inUnit: true, onRead: (read) => issued.push(read) })
      const pageOf = (page: number) => {
        const all = newestFirst(log)
        return { items: all.slice((page - 1) * 3, page * 3), total: all.length }
      }
      // Read first: the log's end, the strides counted, the events after them, the page.
      assert.deepStrictEqual(yield* counts.page("trail", { page: 2, limit: 3 }, reads), pageOf(2))
      assert.deepStrictEqual(issued, ["top", "countPerStride", "count", "between"])
      // One of the trail's events more since, before the next stride's end: the guess at the page as it was at the
      // last total holds it at the new one, and nothing else is read.
      log.push(true)
      issued.length = 0
      assert.deepStrictEqual(yield* counts.page("trail", { page: 4, limit: 3 }, reads), pageOf(4))
      assert.deepStrictEqual(issued, ["topWithTail", "between"])
      // More events than the guess's margin since: its rows no longer hold the page, which is read as before.
      log.push(...Array.from({ length: 20 }, () => true))
      issued.length = 0
      assert.deepStrictEqual(yield* counts.page("trail", { page: 4, limit: 3 }, reads), pageOf(4))
      assert.deepStrictEqual(issued, ["topWithTail", "between", "countPerStride", "count", "between"])
    }))

  it.effect("a later page's guess is not used when the unit's snapshot does not hold settled the stride it was ranked from (PostgreSQL, PAGE-1)", () =>
    Effect.gen(function*() {
      const log: Array<boolean> = Array.from({ length: 16 }, () => true)
      const counts = new TrailCounts(4, Number.POSITIVE_INFINITY)
      assert.deepStrictEqual(yield* counts.page("trail", { page: 2, limit: 2 }, readsOfLog(log, { indexHolds: true, offLoop: false, inUnit: true })), {
        items: [14, 13],
        total: 16
      })
      // A unit that began while position 3's transaction ran: the guess, ranked from the kept count of (0, 12],
      // would be one event off; the unit reads the page from what its snapshot holds settled.
      const issued: Array<string> = []
      const older = readsOfLog(log, { indexHolds: true, offLoop: false, inUnit: true, hidden: new Set([3]), settled: () => 2, onRead: (read) => issued.push(read) })
      assert.deepStrictEqual(yield* counts.page("trail", { page: 2, limit: 2 }, older), { items: [14, 13], total: 15 })
      assert.deepStrictEqual(issued, ["topWithTail", "between", "count", "between"])
    }))

  it.effect("where reads do not share a round trip (SQLite), a later page of a trail read before counts the events after the kept strides in the read that learns the log's end, and guesses nothing", () =>
    Effect.gen(function*() {
      const log: Array<boolean> = Array.from({ length: 30 }, () => true)
      const issued: Array<string> = []
      const counts = new TrailCounts(4, Number.POSITIVE_INFINITY)
      const reads = readsOfLog(log, { indexHolds: false, offLoop: false, onRead: (read) => issued.push(read) })
      yield* counts.page("trail", { page: 2, limit: 3 }, reads)
      log.push(true)
      issued.length = 0
      const all = newestFirst(log)
      assert.deepStrictEqual(yield* counts.page("trail", { page: 3, limit: 3 }, reads), { items: all.slice(6, 9), total: all.length })
      assert.deepStrictEqual(issued, ["topWithTail", "between"])
    }))

  it.effect("time ranges' trails are kept apart: however many are read, they push out no other trail's counts", () =>
    Effect.gen(function*() {
      const log: Array<boolean> = Array.from({ length: 40 }, () => true)
      const issued: Array<string> = []
      const counts = new TrailCounts(4, Number.POSITIVE_INFINITY)
      const reads = readsOfLog(log, { indexHolds: true, offLoop: false, inUnit: true, onRead: (read) => issued.push(read) })
      yield* counts.page("trail", { page: 2, limit: 3 }, reads)
      assert.include(issued, "countPerStride")
      const ranges = readsOfLog(log, { indexHolds: false, offLoop: false, inUnit: true, timeRange: true })
      for (let i = 0; i < MAX_TRAILS + MAX_RANGE_TRAILS; i++) yield* counts.page(`range ${i}`, { page: 2, limit: 3 }, ranges)
      issued.length = 0
      yield* counts.page("trail", { page: 3, limit: 3 }, reads)
      assert.notInclude(issued, "countPerStride")
      assert.notInclude(issued, "count")
    }))

  it.effect("a far count that another request's counting overtook meanwhile still adds the strides it counted beyond it", () =>
    Effect.gen(function*() {
      const stride = 4
      const log = Array.from({ length: 400 }, (_, i) => i % 3 === 0)
      let farReads = 0
      const counts = new TrailCounts(stride, 0, () => 0)
      const reads = readsOfLog(log, { indexHolds: true, offLoop: true, onFar: () => farReads++ })
      // Each unit counts one stride (no time left), then stops to count the rest off the loop.
      const first = yield* Effect.flip(counts.page("trail", { page: 1, limit: 5 }, reads))
      const second = yield* Effect.flip(counts.page("trail", { page: 1, limit: 5 }, reads))
      // The first's far count ends after the second counted a stride on the loop: what it counted beyond is kept, and
      // the first request's unit, run again, needs no other count.
      yield* farWalkOf(first)!
      const all = newestFirst(log)
      assert.deepStrictEqual(yield* counts.page("trail", { page: 30, limit: 3 }, reads), { items: all.slice(87, 90), total: all.length })
      assert.strictEqual(farReads, 1)
      // The second's, ending last, adds nothing and changes nothing.
      yield* farWalkOf(second)!
      assert.deepStrictEqual(yield* counts.page("trail", { page: 30, limit: 3 }, reads), { items: all.slice(87, 90), total: all.length })
    }))
})
