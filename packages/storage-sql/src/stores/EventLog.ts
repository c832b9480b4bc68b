/**
 * The domain event log (core `DomainEvent`) on SQL: one row per event, `actor` and `data` as JSON text, in the
 * order of `position`, the engine's own sequence.
 */
import { type DomainEvent, Page, type Storage } from "@custody-relay/core"
import { Effect } from "effect"
import { type Compilable, type Expression, type ExpressionBuilder, sql, type SqlBool } from "kysely"
import type { Database } from "../schema/Database.js"
import type { OpaqueParameters } from "../SqlEngine.js"
import {
  countOf,
  emptyPage,
  LIST_TOTAL,
  matchesNothing,
  type Op,
  pageOf,
  type PendingEvent,
  refuseWrite,
  type RowsRead,
  type Statements,
  type StoreArguments,
  TRAIL_IN_STRIDE
} from "../SqlUnit.js"
import type { StoreStatements } from "../StoreStatements.js"
import type { RangeReads } from "../StrideTimes.js"
import type { LogEnd, StrideCounts, TrailReads } from "../TrailCounts.js"

type EventRow = { readonly [Column in keyof Database["domain_events"]]: Column extends "position" ? number | string : Database["domain_events"][Column] }

const decode = (row: EventRow): DomainEvent.LoggedEvent => ({
  position: Number(row.position),
  id: row.id,
  type: row.type as DomainEvent.EventType,
  clientId: row.client_id as DomainEvent.DomainEvent["clientId"],
  entityType: row.entity_type as DomainEvent.EntityType,
  entityId: row.entity_id,
  statusBefore: row.status_before,
  statusAfter: row.status_after,
  actor: JSON.parse(row.actor) as DomainEvent.Actor,
  at: row.at as DomainEvent.DomainEvent["at"],
  data: JSON.parse(row.data) as Record<string, unknown>
})

/**
 * Writes the events `read` holds for its unit in one insert, and forgets them; nothing when it holds none. Runs
 * before the unit commits (SqlStorage) and before the unit reads the log, so a unit always sees its own events. The
 * insert is a later write (Statements.writeLater): on PostgreSQL it goes with the COMMIT or the read, one round trip.
 * What is pending is taken when the effect runs, not when it is made, so one effect serves a unit's every flush.
 */
export const flushEvents = (writeLater: Statements["writeLater"], writes: StoreStatements["writes"], read: RowsRead): Effect.Effect<void, Storage.StorageError> =>
  Effect.suspend(() => {
    const pending = read.pending_events
    if (pending.length === 0) return Effect.void
    const rows = pending.splice(0)
    if (rows.length <= EVENTS_PER_INSERT) return writeLater(writes.insertEvents(rows), rows.length, "domain_events", true)
    const parts: Array<Array<PendingEvent>> = []
    for (let at = 0; at < rows.length; at += EVENTS_PER_INSERT) parts.push(rows.slice(at, at + EVENTS_PER_INSERT))
    return Effect.forEach(parts, (part) => writeLater(writes.insertEvents(part), part.length, "domain_events", true), { discard: true })
  })

/**
 * The most events one insert writes. An event binds ten values, and SQLite binds at most 32,766 in a statement: a unit
 * that appended more than 3,276 events would fail as a whole. A command appends a few.
 */
export const EVENTS_PER_INSERT = 1_000

const stridesOf = (found: ReadonlyArray<{ readonly stride: number | string; readonly count: number | string }>) =>
  found.map((row) => ({ stride: Number(row.stride), count: Number(row.count) }))

/** A trail's key among TrailCounts' kept counts: its client and filter, the types in one order. */
const trailKeyOf = (clientId: string | null, filter: DomainEvent.TrailFilter): string =>
  JSON.stringify([clientId, filter.entityType, filter.entityId, filter.types === undefined ? [] : [...filter.types].sort(), filter.from, filter.to])

export const store = (
  { db, engine, mode, read, statements, compiled: { writes }, trailCounts, settledPositions, readOffLoop }: StoreArguments
): DomainEvent.EventStore => {
  const { first, rows, writeLater } = statements
  const flush = flushEvents(writeLater, writes, read)
  const flushed = <A, E>(query: Effect.Effect<A, E>) => Effect.andThen(flush, query)
  return {
  appendEvent(event) {
    if (mode !== "write") return refuseWrite(mode)
    read.pending_events.push({
      id: event.id,
      type: event.type,
      client_id: event.clientId,
      entity_type: event.entityType,
      entity_id: event.entityId,
      status_before: event.statusBefore,
      status_after: event.statusAfter,
      actor: JSON.stringify(event.actor),
      at: event.at,
      data: JSON.stringify(event.data)
    })
    return Effect.void
  },
  pageEvents(clientId, filter, request) {
    if (matchesNothing(filter)) return Effect.succeed(emptyPage)
    const { integer } = engine.opaque
    // `clientByRow`: the client is checked on each row read, not sought in the client's index (see the trail's reads).
    // `values`: how the filter's values are bound, when not as a list's are (`opaque`, the types and times plain).
    const whereWith = (clientByRow: boolean, filter: DomainEvent.TrailFilter, values?: OpaqueParameters) =>
    (eb: ExpressionBuilder<Database, "domain_events">): Expression<SqlBool> => {
      const { text } = values ?? engine.opaque
      const plain = <T extends string>(value: T): Expression<T> | T => values === undefined ? value : values.text(value)
      const terms: Array<Expression<SqlBool>> = []
      if (clientId !== null) terms.push(clientByRow ? eb(engine.checkedPerRow("client_id"), "=", text(clientId)) : eb("client_id", "=", text(clientId)))
      if (filter.id !== undefined) terms.push(eb("id", "=", text(filter.id)))
      if (filter.entityType !== undefined) terms.push(eb("entity_type", "=", text(filter.entityType)))
      if (filter.entityId !== undefined) terms.push(eb("entity_id", "=", text(filter.entityId)))
      if (filter.types !== undefined && filter.types.length > 0) terms.push(eb("type", "in", filter.types.map(plain)))
      if (filter.from !== undefined) terms.push(sql<SqlBool>`${sql.ref("at")} >= ${plain(filter.from)}`)
      if (filter.to !== undefined) terms.push(sql<SqlBool>`${sql.ref("at")} <= ${plain(filter.to)}`)
      return eb.and(terms)
    }
    // One event by id has no trail to count (its unique index answers); a write unit's own events are not committed.
    if (filter.id === undefined && (mode === "read" || (mode === "lookup" && Page.offset(request) === 0))) {
      // A record's trail goes through the entity's index, which holds the record's events and no others; SQLite would
      // seek the client's index instead and check the entity on every event of the client (SqlEngine.checkedPerRow).
      const byEntity = filter.entityId !== undefined
      const trailWhere = whereWith(byEntity, filter)
      const positionIn = (eb: ExpressionBuilder<Database, "domain_events">, after: number, upTo: number, values = engine.opaque): Expression<SqlBool> =>
        eb.and([eb("position", ">", values.integer(after)), eb("position", "<=", values.integer(upTo))])
      const betweenWhere = (where: typeof trailWhere, after: number, upTo: number, values?: OpaqueParameters) =>
      (eb: ExpressionBuilder<Database, "domain_events">): Expression<SqlBool> => eb.and([where(eb), positionIn(eb, after, upTo, values)])
      const between = (after: number, upTo: number) => betweenWhere(trailWhere, after, upTo)
      const positionsBetween = (after: number, upTo: number, limit: number, offset: number) =>
        db.selectFrom("domain_events").select("position").where(between(after, upTo)).orderBy("position", "asc")
          .limit(integer(limit)).offset(integer(offset))
      const counted = (after: number, upTo: number) =>
        db.selectFrom("domain_events").select((eb) => eb.fn.countAll<number | string>().as("total")).where(between(after, upTo))
      const top = db.selectFrom("domain_events").select((eb) => eb.fn.max("position").as("top"))
      const strideOf = (stride: number) => sql<number | string>`(${sql.ref("position")} - 1) / ${sql.lit(stride)}`.as("stride")
      const timed = filter.from !== undefined || filter.to !== undefined
      // The trail is the client's whole log (or the whole log): no term beyond the client and the position.
      const wholeLog = !byEntity && !timed && filter.entityType === undefined && (filter.types === undefined || filter.types.length === 0)
      // A record's events are few next to the log, whatever else the filter asks; a client's index holds the client.
      const indexHolds = byEntity || wholeLog
      // A trail's first counts per stride that read the table itself (a filter no index holds; the base trail's times
      // for a time range) bind their values as the engine plans such reads best (SqlEngine.plannedForValues). A time
      // range's count within its edge strides, asked for each new range, reads a few strides and keeps the list's.
      const countValues = indexHolds ? undefined : engine.plannedForValues
      const countWhere = whereWith(byEntity, filter, countValues)
      // A record's base trail is held by the entity's index, however many of its events a time range keeps.
      const baseValues = byEntity ? undefined : engine.plannedForValues
      const perStride = (after: number, upTo: number, stride: number) =>
        db.selectFrom("domain_events")
          .select((eb) => [strideOf(stride), eb.fn.countAll<number | string>().as("count")])
          .where(betweenWhere(countWhere, after, upTo, countValues)).groupBy(sql`1`)
      // A time range's trail is counted per stride from its base trail's stride times (StrideTimes).
      const range = { from: filter.from, to: filter.to }
      const { from: _from, to: _to, ...baseFilter } = filter
      const baseWhere = whereWith(byEntity, baseFilter, baseValues)
      const rangeReads = (run: <R>(query: Compilable<R>) => Op<ReadonlyArray<R>>): RangeReads => ({
        basePerStride: (after, upTo, stride) =>
          Effect.map(
            run(
              db.selectFrom("domain_events")
                .select((eb) => [strideOf(stride), eb.fn.countAll<number | string>().as("count"), eb.fn.min("at").as("earliest"), eb.fn.max("at").as("latest")])
                .where(betweenWhere(baseWhere, after, upTo, baseValues)).groupBy(sql`1`)
            ),
            (found) => found.map((row) => ({ stride: Number(row.stride), count: Number(row.count), earliest: row.earliest, latest: row.latest }))
          ),
        perStrideWithin: (ranges, stride) =>
          Effect.map(
            run(
              db.selectFrom("domain_events")
                .select((eb) => [strideOf(stride), eb.fn.countAll<number | string>().as("count")])
                .where((eb) => eb.and([trailWhere(eb), eb.or(ranges.map(([after, upTo]) => positionIn(eb, after, upTo)))]))
                .groupBy(sql`1`)
            ),
            stridesOf
          )
      })
      const countedPerStride = (run: <R>(query: Compilable<R>) => Op<ReadonlyArray<R>>): StrideCounts =>
        timed
          ? (after, upTo, stride) =>
            trailCounts.strideTimes.countPerStride(trailKeyOf(clientId, baseFilter), range, rangeReads(run), after, upTo, stride)
          : (after, upTo, stride) => Effect.map(run(perStride(after, upTo, stride)), stridesOf)
      // The log's end in a statement's snapshot (see TrailCounts.LogEnd), from the row of a statement that selects the
      // top as `topColumn` and what the engine reads beside it (SqlEngine.logSettling).
      const endOf = (row: Readonly<Record<string, unknown>> | undefined, topColumn: string): LogEnd => {
        const at = Number(row?.[topColumn] ?? 0)
        return { top: at, settled: settledPositions === undefined || row === undefined ? at : settledPositions.settledIn(at, row) }
      }
      // The client's index (client_id, position) then holds all that a page's skipped events are judged on.
      const clientOnly = wholeLog && clientId !== null
      const reads: TrailReads<EventRow> = {
        indexHolds,
        timeRange: timed,
        top: () => Effect.map(first(settledPositions === undefined ? top : top.select(settledPositions.columns())), (row) => endOf(row, "top")),
        topWithTail: (after, upTo) =>
          Effect.map(
            first(top.select([counted(after, upTo).as("trail_tail"), ...(settledPositions?.columns() ?? [])])),
            (row) => ({ ...endOf(row, "top"), tail: Number(row?.trail_tail ?? 0) })
          ),
        count: (after, upTo) => Effect.map(first(counted(after, upTo)), countOf),
        newestWithTail: (after, stride, upTo, newerThan, limit) => {
          const newest = db.selectFrom("domain_events").selectAll().where(between(newerThan, upTo)).orderBy("position", "desc").limit(integer(limit))
          // The counts as a one-row table the page joins: the answer has a row, and the counts, when the page is empty.
          const counts = db.selectNoFrom([
            counted(after, after + stride).as(TRAIL_IN_STRIDE),
            counted(after + stride, upTo).as("trail_beyond"),
            top.as("trail_top"),
            ...(settledPositions?.columns() ?? [])
          ]).as("trail")
          return Effect.map(
            rows(
              db.selectFrom(counts).leftJoin(newest.as("e"), (join) => join.onTrue())
                .selectAll("e").selectAll("trail")
                .orderBy("e.position", "desc")
            ),
            (found) => ({
              rows: found.flatMap((row) => (row.position === null ? [] : [row as EventRow])),
              inStride: Number(found[0]?.[TRAIL_IN_STRIDE] ?? 0),
              beyond: Number(found[0]?.trail_beyond ?? 0),
              end: endOf(found[0], "trail_top")
            })
          )
        },
        between: (after, upTo, limit, offset) =>
          rows(
            clientOnly
              // A deferred join: the events a page skips (up to a stride's worth) are passed over in the client's index
              // alone, and only the page's own rows are read from the table. Measured at a million events, a page deep
              // in a stride: 0.31 against 0.25 ms on PostgreSQL, which fetched each skipped row from the heap; on SQLite
              // 69 against 63 µs, and 155 against 61 once an ANALYZE makes its planner walk the table (docs/benchmarks.md).
              ? db.selectFrom("domain_events").selectAll()
                .where("position", "in", positionsBetween(after, upTo, limit, offset))
                .orderBy("position", "asc")
              : db.selectFrom("domain_events").selectAll().where(between(after, upTo)).orderBy("position", "asc").limit(integer(limit)).offset(integer(offset))
          ),
        atPositions: (positions) =>
          rows(db.selectFrom("domain_events").selectAll().where("position", "in", positions.map(integer)).orderBy("position", "desc")),
        readsShareRoundTrip: !engine.runsOnEventLoop,
        // Where statements run in the database, a unit counts the strides it lacks in one statement (see TrailCounts).
        ...(engine.runsOnEventLoop ? {} : { countPerStride: countedPerStride(rows) }),
        ...(readOffLoop === undefined ? {} : {
          offLoop: {
            countPerStride: countedPerStride((query) => readOffLoop(query.compile())),
            positionsBetween: (after, upTo, limit, offset) =>
              Effect.map(
                readOffLoop(positionsBetween(after, upTo, limit, offset).compile()),
                (found) => found.map((row) => Number(row.position))
              )
          }
        })
      }
      const trailKey = trailKeyOf(clientId, filter)
      return Effect.map(
        mode === "lookup" ? trailCounts.firstPage(trailKey, request.limit, reads) : trailCounts.page(trailKey, request, reads),
        (page) => ({ items: page.items.map(decode), total: page.total })
      )
    }
    const where = whereWith(false, filter)
    const total = db.selectFrom("domain_events").select((eb) => eb.fn.countAll<number | string>().as("total")).where(where)
    return flushed(pageOf({
      // The page and its total in one statement (see StoreStatements' firstPage).
      first: (limit) =>
        rows(db.selectFrom("domain_events").selectAll().select(total.as(LIST_TOTAL)).where(where).orderBy("position", "desc").limit(integer(limit))),
      rows: (limit, offset, fromOldest) =>
        rows(
          db.selectFrom("domain_events").selectAll().where(where).orderBy("position", fromOldest ? "asc" : "desc")
            .limit(integer(limit)).offset(integer(offset))
        ),
      count: () => Effect.map(first(total), countOf)
    }, decode, request, mode))
  },
  listEvents(filter, afterPosition, limit) {
    const { integer, text } = engine.opaque
    return flushed(Effect.map(
      rows(
        db.selectFrom("domain_events").selectAll()
          .where("position", ">", integer(afterPosition))
          .$if(filter.clientId !== undefined, (qb) => qb.where("client_id", "=", text(filter.clientId ?? "")))
          .$if(filter.entityId !== undefined, (qb) => qb.where("entity_id", "=", text(filter.entityId ?? "")))
          .orderBy("position")
          .limit(integer(limit))
      ),
      (found) => found.map(decode)
    ))
  }
  }
}
