/**
 * What every store of a unit of work is made from (see SqlStorage.makeUnit): the unit's statements over its
 * session, the statements compiled once per storage, the rows a write unit read, and the helpers each store
 * shares (decoding an optional row, a page and its total, an update that writes only what changed).
 */
import { type Idempotency, Page, type Storage, type Webhook } from "@custody-relay/core"
import { Effect, Option } from "effect"
import type { Compilable, Kysely } from "kysely"
import type { ApiUsersAtVersion } from "./ApiUsersAtVersion.js"
import type { KeptApiUsers } from "./KeptApiUsers.js"
import type { ApiUsersTable, AccountsTable, Database, DomainEventsTable, OutboxEntriesTable, TransactionsTable, WhitelistedAddressesTable } from "./schema/Database.js"
import type { PageBoundaries } from "./PageBoundaries.js"
import type { TrailCounts } from "./TrailCounts.js"
import type { SettledPositions, SqlEngine } from "./SqlEngine.js"
import type { SessionOpener, SqlSession, WriteCheck } from "./SqlSession.js"
import type { StoreStatements } from "./StoreStatements.js"
import * as StorageFailure from "./StorageFailure.js"

export type Op<A> = Effect.Effect<A, Storage.StorageError>

/**
 * How a unit's statements reach its session: each is built with kysely, compiled, and executed by the session.
 * `affected` counts the rows a write changed; a write is refused before it reaches the database in a read unit,
 * as the memory store refuses it.
 */
export interface Statements {
  readonly rows: <R>(query: Compilable<R>) => Op<ReadonlyArray<R>>
  readonly first: <R>(query: Compilable<R>) => Op<R | undefined>
  readonly write: (query: Compilable<unknown>) => Op<number>
  /**
   * A write that must change `expected` rows and whose answer the unit does not wait for: where the session can,
   * it goes with the unit's next statement (SqlSession.queue), else it runs at once. Any other count fails the
   * unit, as a fault, when the answer arrives. `sure` says the database itself guarantees the count or fails the
   * statement: an insert without ON CONFLICT writes all its rows or fails, and an update by id of a row the unit
   * read holds it locked (RowsRead); only such a write may go with the COMMIT, since nothing can fail it after.
   */
  readonly writeLater: (query: Compilable<unknown>, expected: number, subject: string, sure: boolean) => Op<void>
}

const writeRefused = { lookup: new Error("a lookup unit of work attempted a write"), read: new Error("a read unit of work attempted a write") }

/** What a write through a unit of `mode` that may not write does: it dies before reaching the database. */
export const refuseWrite = (mode: Exclude<Storage.UnitMode, "write">) => Effect.die(writeRefused[mode])

/** The check of a write that must change `expected` rows of `subject`. */
export const changesExactly = (expected: number, subject: string): WriteCheck => (affected) =>
  affected === expected ? undefined : StorageFailure.fault(new Error(`write of ${subject} changed ${affected} rows, not ${expected}`))

/** `check`'s verdict on a write that changed `affected` rows. */
const judged = (check: WriteCheck, affected: number): Op<void> => {
  const refused = check(affected)
  return refused === undefined ? Effect.void : Effect.fail(refused)
}

export const statementsOf = (session: SqlSession, mode: Storage.UnitMode): Statements => ({
  rows(query) {
    return Effect.map(session.execute(query.compile()), (result) => result.rows)
  },
  first(query) {
    return Effect.map(session.execute(query.compile()), (result) => result.rows[0])
  },
  write(query) {
    return mode === "write"
      ? Effect.map(session.execute(query.compile()), (result) => Number(result.numAffectedRows ?? 0n))
      : refuseWrite(mode)
  },
  writeLater(query, expected, subject, sure) {
    if (mode !== "write") return refuseWrite(mode)
    const check = changesExactly(expected, subject)
    if (session.queue !== undefined) return session.queue(query.compile(), check, sure)
    return Effect.flatMap(session.execute(query.compile()), (result) => judged(check, Number(result.numAffectedRows ?? 0n)))
  }
})

/** An update that matched no row: the core updates only records it read in the same unit, so this is a bug. */
export const expectOneRow = (table: string, key: string) => (updated: number): Op<void> =>
  judged(changesExactly(1, `${table} ${key}`), updated)

export const countOf = (row: { readonly total: number | string | bigint } | undefined): number => Number(row?.total ?? 0)

/** `row` decoded, or none when the query found no row. */
export const optional = <Row, A>(decode: (row: Row) => A) => (row: Row | undefined): Option.Option<A> =>
  row === undefined ? Option.none() : Option.some(decode(row))

/** The column a list's first page carries its total in (StoreStatements' `firstPage`; PostgresSession reads it too). */
export const LIST_TOTAL = "list_total"

/**
 * The column the audit trail's first page carries the count of its next stride in (its total's part, EventLog's
 * `newestWithTail`; PostgresSession reads it too, as it does `LIST_TOTAL`).
 */
export const TRAIL_IN_STRIDE = "trail_in_stride"

/**
 * A row of a list's first page, with the list's total beside it (StoreStatements' `firstPage`). Kysely types a
 * scalar subquery as nullable; a count never is.
 */
export type WithListTotal<Row> = Row & { readonly [LIST_TOTAL]: number | string | bigint | null }

/** How a store reads a list, for {@link pageOf}. */
export interface PageReads<Row> {
  /** The first `limit` rows in the list's order, each with the list's total: one statement. */
  readonly first: (limit: number) => Op<ReadonlyArray<WithListTotal<Row>>>
  /** `limit` rows from `offset`, in the list's order, or in the reverse order when `fromOldest`. */
  readonly rows: (limit: number, offset: number, fromOldest: boolean) => Op<ReadonlyArray<Row>>
  readonly count: () => Op<number>
  /**
   * Reads a later page another way (see PageBoundaries): the effect reads what the page needs before the total is
   * known, issued together with the count (one round trip on PostgreSQL), and gives the read of the page of a list
   * of `total` rows.
   */
  readonly laterPage?: () => Op<(total: number) => Op<ReadonlyArray<Row>>>
}

const laterPageInLookup = new Error("a lookup unit of work asked for a page after the first: a later page and its total need a read unit's snapshot")

/**
 * The page of `request` and the total. The first page and the total are one statement, so they agree in any unit
 * of work, a lookup's too (Storage.unitForPage). Every later page counts first and then reads from whichever end
 * of the list is nearer, so no page walks past more than half the list: the database steps over every row a page
 * skips (an index walk, about 47 ns a row on SQLite), and the last page of a million rows read newest first skips
 * them all (docs/benchmarks.md, sixth round). The total and the rows of a later page come from one snapshot (the
 * read unit), so the two ends agree; in a lookup unit, which has none, a later page is a defect.
 */
export const pageOf = <Row, A>(
  reads: PageReads<Row>,
  decode: (row: Row) => A,
  request: Page.PageRequest,
  mode: Storage.UnitMode
): Op<Page.Page<A>> => {
  const offset = Page.offset(request)
  if (offset === 0) {
    return Effect.map(reads.first(request.limit), (found) => ({
      items: found.map(decode),
      total: Number(found[0]?.list_total ?? 0)
    }))
  }
  if (mode === "lookup") return Effect.die(laterPageInLookup)
  const { laterPage } = reads
  // Issued in the same tick, in this order (one pipeline on PostgreSQL). Both read inside the read unit's one
  // snapshot, whichever takes it: PostgreSQL's REPEATABLE READ snapshot, or SQLite's read transaction, which
  // `PRAGMA data_version` begins as a SELECT does.
  const counted: Op<readonly [number, ((total: number) => Op<ReadonlyArray<Row>>) | undefined]> = laterPage === undefined
    ? Effect.map(reads.count(), (total) => [total, undefined] as const)
    : Effect.all([reads.count(), laterPage()], { concurrency: 2 })
  return Effect.flatMap(counted, ([total, later]) => {
    const end = Math.min(offset + request.limit, total)
    if (end <= offset) return Effect.succeed({ items: [], total })
    return Effect.map(
      later !== undefined ? later(total) : fromNearerEnd(reads.rows, total, offset, end),
      (found) => ({ items: found.map(decode), total })
    )
  })
}

/**
 * The rows [offset, end) of a list of `total` rows, newest first, read from whichever end of the list is nearer, so
 * the read skips at most half the list. `rows` as in {@link PageReads}. Page boundaries fall back on it too.
 */
export const fromNearerEnd = <Row>(
  rows: (limit: number, offset: number, fromOldest: boolean) => Op<ReadonlyArray<Row>>,
  total: number,
  offset: number,
  end: number
): Op<ReadonlyArray<Row>> =>
  total - end < offset
    ? Effect.map(rows(end - offset, total - end, true), (found) => [...found].reverse())
    : rows(end - offset, offset, false)

/**
 * Whether a list filter's values can match no stored row: no stored text holds U+0000 (the core's Text refuses
 * control characters, and PostgreSQL cannot store it), so a filter value holding one matches nothing, as in the
 * memory store, and is answered without a query (PostgreSQL would refuse the parameter; a statement compiled for
 * the filter's shape cannot say "nothing" for one value).
 */
export const matchesNothing = (values: object): boolean =>
  Object.values(values).some((value) => typeof value === "string" && value.includes("\u0000"))

export const emptyPage: Page.Page<never> = { items: [], total: 0 }

/** What each store of a unit is made from. */
export interface StoreArguments {
  /** Builds statements only; every statement runs through `statements`, on the unit's session. */
  readonly db: Kysely<Database>
  readonly statements: Statements
  readonly engine: SqlEngine
  readonly mode: Storage.UnitMode
  readonly compiled: StoreStatements
  /** Where a write unit keeps the rows it read (see RowsRead). */
  readonly read: RowsRead
  /** 1 when reads by id lock their row (a write unit on an engine that locks rows, see SqlEngine), else 0. */
  readonly locking: 0 | 1
  /** The storage's page boundaries, on an engine with a data version (see PageBoundaries). */
  readonly pageBoundaries: PageBoundaries | undefined
  /** The audit trail's counts kept between requests (see TrailCounts). */
  readonly trailCounts: TrailCounts
  /** What the storage's snapshots hold settled of the log, where the engine must learn it (see SqlEngine.logSettling). */
  readonly settledPositions: SettledPositions | undefined
  /** The API users the storage keeps between requests, where its sessions confirm them (see KeptApiUsers). */
  readonly keptApiUsers: KeptApiUsers | undefined
  /** The API users the storage keeps while nothing commits, where its lookups can tell (see ApiUsersAtVersion). */
  readonly apiUsersAtVersion: ApiUsersAtVersion | undefined
  /** Reads a statement off the event loop, outside the unit, where the sessions can (see SessionOpener). */
  readonly readOffLoop: SessionOpener["readOffLoop"]
}

/** An event appended in a write unit and not yet written (see RowsRead.pending_events). */
export type PendingEvent = Omit<DomainEventsTable, "position">

/**
 * The rows a write unit read by id, as it read them. The unit holds them locked (SQLite: the write lock;
 * PostgreSQL: FOR NO KEY UPDATE), so they are what the database holds until the unit itself writes them. An
 * update then sets only the columns it changes (`changedColumns`): an index over unchanged columns is left alone,
 * and so are its pages, which the commit would otherwise write again (a balance update that names every column
 * rewrites five account indexes). Emptied when each unit of work begins.
 */
export type Changes<Row extends { readonly id: unknown }> = Partial<Omit<Row, "id">> & Pick<Row, "id">

export class RowsRead {
  readonly api_users = new Map<string, ApiUsersTable>()
  readonly accounts = new Map<string, AccountsTable>()
  readonly whitelisted_addresses = new Map<string, WhitelistedAddressesTable>()
  readonly transactions = new Map<string, TransactionsTable>()
  /** Outbox entries read by id or leased: settling or leasing one updates it. */
  readonly outbox_entries = new Map<string, OutboxEntriesTable>()
  /**
   * A client's webhook subscriptions as this unit listed them: every event a command appends fans out to them
   * (initiate appends two), and one look per unit serves all (a subscription written in the unit forgets them).
   */
  readonly webhook_subscriptions = new Map<string, ReadonlyArray<Webhook.WebhookSubscription>>()
  /**
   * The events this unit appended and has not written yet: they go in one insert, before the unit commits or
   * reads the log (EventLog.flushEvents). A command appends several (initiate two), one statement and round trip
   * each before.
   */
  readonly pending_events: Array<PendingEvent> = []
  /**
   * The idempotency keys this unit claimed and has not written, by scope and key (stores/IdempotencyKeys.ts): on
   * an engine whose write unit holds the database's write lock, a key's row is written once, with its result.
   */
  readonly idempotency_claims = new Map<string, Idempotency.IdempotencyClaim>()
  clear(): void {
    this.api_users.clear()
    this.accounts.clear()
    this.whitelisted_addresses.clear()
    this.transactions.clear()
    this.outbox_entries.clear()
    this.webhook_subscriptions.clear()
    this.pending_events.length = 0
    this.idempotency_claims.clear()
  }
}

/**
 * What an update of a row to `next` must write: the id and the columns that differ from `before` (the row as this
 * unit read it), or every column when the unit did not read it or nothing differs.
 */
export const changedColumns = <Row extends { readonly id: unknown }>(next: Row, before: object | undefined): Changes<Row> => {
  if (before === undefined) return next
  const was = before as Readonly<Record<PropertyKey, unknown>>
  const changed: Partial<Row> = {}
  let count = 0
  for (const column of Object.keys(next) as Array<keyof Row>) {
    if (next[column] !== was[column]) {
      changed[column] = next[column]
      count++
    }
  }
  return count === 0 ? next : { ...changed, id: next.id }
}

/**
 * A row read by id, decoded; only a write unit updates, so only a write unit keeps it (see RowsRead). Made once
 * per store and unit, as a returned arrow (see SqlStorage.makeUnit on why).
 */
export const keepingRead = <Row extends { readonly id: string }, A>(
  mode: Storage.UnitMode,
  rowsOf: Map<string, Row>,
  decode: (row: Row) => A
) =>
(row: Row | undefined): Option.Option<A> => {
  if (row === undefined) return Option.none()
  if (mode === "write") rowsOf.set(row.id, row)
  return Option.some(decode(row))
}

/**
 * An update of a row read in this unit, writing only the columns that changed and sent with the unit's next
 * statement where the engine can (Statements.writeLater); the kept row becomes what it wrote. A row the unit read
 * in a unit that locks what it reads (`locking`) is sure to be matched; any other update is answered before the
 * unit commits, and one that matched no row fails the unit.
 */
export const updating = (writeLater: Statements["writeLater"], locking: 0 | 1) =>
<Next extends { readonly id: string }>(
  rowsOf: Map<string, object>,
  next: Next,
  statement: (changes: NoInfer<Changes<Next>>) => Compilable<unknown>,
  table: string
): Op<void> => {
  const before = rowsOf.get(next.id)
  if (before !== undefined) rowsOf.set(next.id, { ...before, ...next })
  return writeLater(statement(changedColumns(next, before)), 1, `${table} ${next.id}`, before !== undefined && locking === 1)
}
