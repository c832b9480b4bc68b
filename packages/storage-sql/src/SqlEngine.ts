/**
 * What differs between the engines once kysely has smoothed the SQL: how a unit of work begins and reaches the
 * connection, whether reads in a write unit lock their rows, and how a driver error maps to a `StorageError` reason. Everything else (the unit's
 * queries, retries, migrations' shape) is written once over this interface.
 */
import type { Storage } from "@custody-relay/core"
import {
  type AliasedRawBuilder,
  type Compilable,
  type CompiledQuery,
  type ControlledTransaction,
  type Expression,
  type Kysely,
  PostgresIntrospector,
  sql,
  SqliteIntrospector
} from "kysely"
import type { SeenCommits, Sighting } from "./PageBoundaries.js"
import type { Database, DomainEventsTable } from "./schema/Database.js"
import type { Autocommit, SessionOpener } from "./SqlSession.js"

export type EngineName = "sqlite" | "postgres"

export interface SqlEngine {
  readonly name: EngineName
  /**
   * Starts a transaction for a unit. SQLite takes the database's write lock up front for a write unit (BEGIN
   * IMMEDIATE), so two writers never both read and then collide; PostgreSQL runs write units in READ COMMITTED
   * with row locks and read units on one REPEATABLE READ snapshot, so a page and its total agree. A lookup unit
   * begins none (see SqlSession).
   */
  readonly begin: (db: Kysely<Database>, mode: Exclude<Storage.UnitMode, "lookup">) => Promise<ControlledTransaction<Database>>
  /** How the storage's units of work open their transactions on `db` (see SqlSession). */
  readonly sessions: (db: Kysely<Database>) => SessionOpener
  /** How a statement that commits on its own, outside any unit, runs on `db` (see SqlSession.Autocommit). */
  readonly autocommit: (db: Kysely<Database>) => Autocommit
  /**
   * Whether a write unit's reads by id lock the row they return (SELECT ... FOR NO KEY UPDATE) until the unit
   * ends. PostgreSQL needs it so two nodes cannot both read one balance and both spend it; SQLite's write lock
   * already covers the whole database.
   */
  readonly locksRowsForWrite: boolean
  /**
   * Whether statements run on the process's event loop (SQLite: better-sqlite3 is synchronous), so that every other
   * request waits while one runs; a deep page's walk then leaves the loop turns (see PageBoundaries).
   */
  readonly runsOnEventLoop: boolean
  /**
   * Whether a subquery in FROM may read the columns of the tables before it (`CROSS JOIN LATERAL`): PostgreSQL does,
   * SQLite does not. A walk's keys a step apart are read step by step from each other where it does, and numbered
   * along the list where it does not (StoreStatements).
   */
  readonly joinsLaterally: boolean
  /**
   * How a list query binds its filter values and LIMIT/OFFSET: as parameters the planner does not read while it
   * plans, on SQLite (see {@link castParameters}); as plain parameters on PostgreSQL.
   */
  readonly opaque: OpaqueParameters
  /**
   * How a statement that reads a large part of a table once binds its values: an audit trail's counts per stride
   * where the trail's filter or its times are not in an index (EventLog), so that the table itself is read. Written
   * into the statement on PostgreSQL (see {@link literalParameters}); absent on SQLite, whose planner keeps no
   * statistics to weigh values against (the relay runs no ANALYZE): such statements bind as a list's do.
   */
  readonly plannedForValues?: OpaqueParameters
  /** The engine's `position of needle in haystack` function; both take (haystack, needle) and answer 0 for none. */
  readonly substringPosition: "instr" | "strpos"
  readonly classify: (cause: unknown) => Storage.StorageError
  /**
   * How a read unit that pages deep learns what other writers changed since the process's page boundaries were
   * kept (see PageBoundaries): SQLite's data version, or PostgreSQL's snapshot and the client's list changes.
   */
  readonly listChanges: ListChanges
  /**
   * How the audit trail learns which log positions a unit's snapshot holds settled (see TrailCounts), where a snapshot
   * may hold an event and lack one at a lower position (PostgreSQL, whose positions come from a sequence as each insert
   * runs: postgres/SettledPositions); undefined where positions are given in commit order (SQLite), so that a snapshot
   * holds settled every position it holds.
   */
  readonly logSettling: LogSettling | undefined
  /**
   * A column the planner checks on each row read rather than seeking in its index: SQLite's unary `+`, where its
   * planner would seek the client's index for a record's trail (EventLog); the column itself on PostgreSQL, whose
   * planner weighs the indexes by their statistics.
   */
  readonly checkedPerRow: (column: string) => Expression<unknown>
}

/** See SqlEngine.logSettling. */
export interface LogSettling {
  /** A storage's record of what its snapshots of the log held settled. */
  readonly record: () => SettledPositions
  /** The events' insert, as the rule needs it. */
  readonly insertEvents: (db: Kysely<Database>, rows: ReadonlyArray<Omit<DomainEventsTable, "position">>) => Compilable<unknown>
}

/** What a storage's snapshots of the log hold settled (see SqlEngine.logSettling). */
export interface SettledPositions {
  /** What the next statement that reads the log's top selects beside it, for `settledIn`. */
  columns(): ReadonlyArray<AliasedRawBuilder<string, string>>
  /**
   * The largest position the snapshot of a statement that selected `columns()` holds settled, from the statement's row
   * and the top it read; what the row says is recorded for later snapshots.
   */
  settledIn(top: number, row: Readonly<Record<string, unknown>>): number
}

/** One statement, run in the read unit after its snapshot is taken, and what its rows say. */
export interface ListChanges {
  /** `unseenBy`: the snapshot the client's boundaries are kept in, whose unseen changes they ask for (PageBoundaries.keptSnapshot). */
  readonly query: (clientId: string, unseenBy: SeenCommits | undefined) => CompiledQuery<Readonly<Record<string, unknown>>>
  readonly sighting: (rows: ReadonlyArray<Readonly<Record<string, unknown>>>, unseenBy: SeenCommits | undefined) => Sighting
  /** Deletes what no node can still ask for, where the engine keeps a log (PostgreSQL; SqlLayer runs it). */
  readonly prune?: CompiledQuery
}

/** Which engine a kysely instance talks to, read from its dialect's introspector (public API, no query). */
export const engineNameOf = <DB>(db: Kysely<DB>): EngineName => {
  if (db.introspection instanceof PostgresIntrospector) return "postgres"
  if (db.introspection instanceof SqliteIntrospector) return "sqlite"
  throw new Error("@custody-relay/storage-sql supports kysely's SQLite and PostgreSQL dialects only")
}

export interface OpaqueParameters {
  /** Keeps the value's type (a branded id, a status union), so kysely still checks it against the column. */
  readonly text: <T extends string>(value: T) => Expression<T>
  readonly integer: (value: number) => Expression<number>
}

/**
 * Parameters SQLite's planner cannot read: each behind a CAST, which it does not look through.
 *
 * While it plans a statement, SQLite reads the value bound to some parameters (a LIMIT, an OFFSET, the value of a
 * `column = ?` that an index it weighs does not cover) and marks them, so that binding another value re-plans the
 * statement. better-sqlite3 clears a statement's bindings after every run, which SQLite counts as a change: every
 * list query was parsed and planned again on each run: 17 to 48 µs more per statement where measured, several times
 * what the page's reads cost (docs/benchmarks.md, fourth round). The CAST changes neither the value nor the plan (the same index is used), only
 * whether the planner peeks. `IN (...)` lists and `instr` needles are not read, so they need none.
 */
export const castParameters: OpaqueParameters = {
  text: <T extends string>(value: T) => sql<T>`cast(${value} as text)`,
  integer: (value) => sql<number>`cast(${value} as integer)`
}

/** The characters of the ids, event types and instants written into a statement (see literalParameters). */
const LITERAL_TEXT = /^[\w.:-]*$/

/**
 * Values written into the statement, for PostgreSQL's rare statements that read much of a table (see
 * SqlEngine.plannedForValues).
 *
 * A read unit's statements run on generic plans (PostgresSession's `isolation`), and a generic plan cannot tell a trail
 * that is most of the log from one that is a sliver of it. For the counts of a client that owns most of the log, with a
 * filter no index holds, the generic plan walks the log's key and fetches the rows one by one through the shared
 * buffers, which a scan of that kind is free to fill: at a million events and the default 128 MB, one count pushed
 * every other page out of the cache (the indexes, the accounts) and took 247 to 415 ms. Planned for its values, the
 * same count reads the table in one sequential scan, which PostgreSQL keeps to a ring of 32 buffers (the cache stayed
 * as it was), in 164 to 269 ms; for a client with a sliver of the log the planner picks the client's index
 * (docs/benchmarks.md, "a trail's first count planned for its values, and no JIT for generic plans"). Each such
 * statement has a text of its own, parsed and planned at its run and kept by name like any other until statements
 * used more recently push it out (PreparedStatements): these counts run once per trail and node, then once per 2,048
 * new events of the trail, and the planning is nothing beside the count.
 *
 * Only the forms the relay writes (ids, event types, instants, positions) are written in; any other value (an
 * embedder's filter the HTTP layer did not check) is bound as a parameter, so the statement still answers exactly, on a
 * plan that does not know that value.
 */
export const literalParameters: OpaqueParameters = {
  text: <T extends string>(value: T) => (typeof value === "string" && LITERAL_TEXT.test(value) ? sql.lit(value) : sql.val(value)),
  integer: (value) => (Number.isSafeInteger(value) ? sql.lit(value) : sql.val(value))
}

/** Plain parameters, for engines whose planner does not re-plan on rebinding. */
export const plainParameters: OpaqueParameters = {
  text: <T extends string>(value: T) => sql.val(value),
  integer: (value) => sql.val(value)
}
