/**
 * Which positions of the event log a PostgreSQL snapshot holds settled (TrailCounts): those at or below which it
 * holds every event the log will ever have, so that a trail's count up to them holds in every later snapshot.
 *
 * Positions come from a sequence as each insert runs, so a transaction that took a lower one can commit after one
 * that took a higher one: a snapshot that holds position M may still lack an event below it. A snapshot's own
 * fields do not bound those: its `xmax` is one past the latest transaction id to complete, not past the latest one
 * given out, so a transaction that runs with a larger id is in neither its running list nor its `xmin`. What bounds
 * them:
 * - the sequence hands its values out in order (an identity's sequence caches 1 value; a cache would hand each
 *   session a block of its own);
 * - the events' insert takes its transaction's id before it takes a position (`insertEventsTakingId`);
 * - transaction ids are handed out in order too.
 * So where a snapshot S holds position M (its transaction committed before S, and so took M before S), every
 * transaction that took a position at or below M took its id before S was taken. An id X taken after S is larger
 * than every one of theirs; a snapshot whose `xmin` is at least X sees every transaction below X finished, and so
 * holds settled every position up to M.
 *
 * A mark is that pair (M, X): the statement that reads the log's top in S also takes X, its own transaction's id,
 * which is given out as the statement runs, after its snapshot. An id costs a commit record, and ids consumed bring
 * the database's next freezing vacuum nearer, so a node takes a mark at most every `MARK_EVERY_MILLIS` (about ten
 * ids a second per node reading trails; the commit is asynchronous, as the transaction writes nothing else). Every
 * statement that reads the log's top reads its snapshot's `xmin`, and the snapshot holds settled the largest M of
 * the marks whose X is at or below it. A transaction held open (an operator's session that took an id, a backfill, in
 * any database on the server) holds every later snapshot's `xmin` back, and with it what they hold settled: the
 * trail's reads then count more of the log, as without counts kept, until it ends.
 *
 * A process that writes events on its own (an embedder's SQL) must take its transaction's id before the events'
 * positions, as `insertEventsTakingId` does, or write or lock another row first in the same transaction.
 */
import { type AliasedRawBuilder, type Compilable, type Kysely, sql } from "kysely"
import type { Database, DomainEventsTable } from "../schema/Database.js"
import type { SettledPositions } from "../SqlEngine.js"

/** How often a node takes a mark (see above): a trail's counts reach the log's end that much later under writes. */
export const MARK_EVERY_MILLIS = 100

/** How many marks are kept: marks a little older than the newest are the ones a snapshot's xmin reaches. */
export const MAX_MARKS = 32

const XMIN = sql<string>`pg_snapshot_xmin(pg_current_snapshot())::text`.as("snapshot_xmin")
/** The statement's own transaction's id, taken as it runs, and its commit not waited for by the server's WAL flush. */
const MARK = [
  sql<string>`pg_current_xact_id()::text`.as("mark_xid"),
  sql<string>`set_config('synchronous_commit', 'off', true)`.as("mark_commit")
] as const
const WITHOUT_MARK: ReadonlyArray<AliasedRawBuilder<string, string>> = [XMIN]
const WITH_MARK: ReadonlyArray<AliasedRawBuilder<string, string>> = [XMIN, ...MARK]

interface Mark {
  readonly top: number
  readonly xid: bigint
}

export class PostgresSettledPositions implements SettledPositions {
  /** Marks none of which serves every snapshot another does: xid and top both ascending. */
  #marks: ReadonlyArray<Mark> = []
  #markedAt = Number.NEGATIVE_INFINITY

  constructor(
    readonly markEveryMillis: number = MARK_EVERY_MILLIS,
    readonly clock: () => number = () => performance.now()
  ) {}

  columns(): ReadonlyArray<AliasedRawBuilder<string, string>> {
    const now = this.clock()
    if (now - this.#markedAt < this.markEveryMillis) return WITHOUT_MARK
    this.#markedAt = now
    return WITH_MARK
  }

  settledIn(top: number, row: Readonly<Record<string, unknown>>): number {
    const marked = row["mark_xid"]
    if (typeof marked === "string") this.#keep({ top, xid: BigInt(marked) })
    const xmin = BigInt(row["snapshot_xmin"] as string)
    let settled = 0
    for (const mark of this.#marks) {
      if (mark.xid > xmin) break
      settled = mark.top
    }
    // A mark the snapshot may use holds no position it does not (see above); the bound only keeps a broken
    // assumption (a sequence with a cache, say) from counting strides the snapshot lacks.
    return Math.min(settled, top)
  }

  #keep(mark: Mark): void {
    // Served already by a mark of no larger xid and no smaller top.
    if (this.#marks.some((kept) => kept.xid <= mark.xid && kept.top >= mark.top)) return
    const kept = this.#marks.filter((other) => !(other.xid >= mark.xid && other.top <= mark.top))
    let at = kept.findIndex((other) => other.xid > mark.xid)
    if (at < 0) at = kept.length
    kept.splice(at, 0, mark)
    this.#marks = kept.length > MAX_MARKS ? kept.slice(1) : kept
  }
}

/**
 * The events' insert on PostgreSQL: the rows as a VALUES list under a one-time filter on `pg_current_xact_id()`,
 * which the executor evaluates before it forms the first row, and so before the identity's sequence gives a position
 * (plain VALUES would take the position first and the transaction's id only as the row is written, when it is the
 * transaction's first write). The plan is checked by a test (test/SettledPositions.test.ts).
 */
export const insertEventsTakingId = (db: Kysely<Database>, rows: ReadonlyArray<Omit<DomainEventsTable, "position">>): Compilable<unknown> => {
  const columns = Object.keys(rows[0]!) as Array<keyof Omit<DomainEventsTable, "position">>
  const values = sql.join(rows.map((row) => sql`(${sql.join(columns.map((column) => row[column]))})`))
  return db.insertInto("domain_events").columns(columns).expression(
    sql`select * from (values ${values}) as events where pg_current_xact_id() is not null`
  )
}
