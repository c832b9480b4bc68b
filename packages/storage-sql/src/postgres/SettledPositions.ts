/**
 * Which positions of the event log a PostgreSQL snapshot holds settled (TrailCounts): those at or below which it
 * holds every event the log will ever have, so that a trail's count up to them holds in every later snapshot.
 *
 * Positions come from a sequence as each insert runs, so a transaction that took a lower one can commit after one
 * that took a higher one: a snapshot that holds position M may still lack an event below it. What bounds those:
 * - the sequence hands its values out in order (an identity's sequence caches 1 value; a cache would hand each
 *   session a block of its own);
 * - the events' insert takes its transaction's id before it takes a position (`insertEventsTakingId`);
 * - a snapshot lists every transaction id given out before it was taken and not finished then (below its xmax, and
 *   among its running ones at or above its xmin).
 * So where a snapshot S holds position M (its transaction committed before S, and so took M before S), every
 * transaction that took a position below M took its id before S: it had finished when S was taken, or ran then, with
 * an id below S's xmax. A later snapshot whose xmin is at least S's xmax sees every one of those finished: it holds
 * settled every position up to M. A snapshot with no transaction running (xmin = xmax) holds its own top settled.
 *
 * Each snapshot a unit reads the log in leaves a mark (its top and its xmax), and a snapshot holds settled the largest
 * top among the marks whose xmax is at or below its xmin. A transaction held open (an operator's session that wrote,
 * a backfill) holds every later snapshot's xmin back, and with it what they hold settled: the trail's reads then count
 * more of the log, as without counts kept, until it ends.
 *
 * A process that writes events on its own (an embedder's SQL, a release before this one) must take its transaction's
 * id before the events' positions, as `insertEventsTakingId` does, or write another row first in the same transaction.
 */
import { type Compilable, type Kysely, sql } from "kysely"
import type { Database, DomainEventsTable } from "../schema/Database.js"
import type { SnapshotsOfTheLog } from "../SqlEngine.js"

/** How many marks are kept: snapshots a little older than the newest are the ones a unit's xmin reaches. */
export const MAX_MARKS = 32

/** What the unit's statement selects beside the log's top, for `settledIn`: its snapshot's xmin and xmax. */
export const snapshotMarks = [
  sql<string>`pg_snapshot_xmin(pg_current_snapshot())::text`.as("snapshot_xmin"),
  sql<string>`pg_snapshot_xmax(pg_current_snapshot())::text`.as("snapshot_xmax")
] as const

interface Mark {
  readonly top: number
  readonly xmax: bigint
}

export class SettledPositions implements SnapshotsOfTheLog {
  /** Marks none of which serves every snapshot another does: xmax and top both ascending. */
  readonly #marks: Array<Mark> = []

  settledIn(top: number, row: Readonly<Record<string, unknown>>): number {
    const xmin = BigInt(row["snapshot_xmin"] as string)
    const xmax = BigInt(row["snapshot_xmax"] as string)
    let settled = xmin === xmax ? top : 0
    for (const mark of this.#marks) {
      if (mark.xmax > xmin) break
      settled = Math.max(settled, mark.top)
    }
    this.#keep({ top, xmax })
    // A mark the snapshot may use holds no position it does not (see above); the bound only keeps a broken
    // assumption (a sequence with a cache, say) from counting strides the snapshot lacks.
    return Math.min(settled, top)
  }

  #keep(mark: Mark): void {
    const marks = this.#marks
    // Served already by a mark of no larger xmax and no smaller top.
    if (marks.some((kept) => kept.xmax <= mark.xmax && kept.top >= mark.top)) return
    const kept = marks.filter((other) => !(other.xmax >= mark.xmax && other.top <= mark.top))
    let at = kept.findIndex((other) => other.xmax > mark.xmax)
    if (at < 0) at = kept.length
    kept.splice(at, 0, mark)
    if (kept.length > MAX_MARKS) kept.shift()
    marks.splice(0, marks.length, ...kept)
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
