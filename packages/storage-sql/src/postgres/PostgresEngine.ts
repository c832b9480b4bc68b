/**
 * The PostgreSQL engine. Write units run in READ COMMITTED and lock each record they read by id (FOR NO KEY
 * UPDATE) until they end: a second unit, on this node or another, that reads the same account waits and then sees
 * the first one's committed balance, so one balance is never spent twice. Deadlocks between units that lock in
 * different orders are reported by the server (40P01) and the unit is re-run. Read units see one REPEATABLE READ
 * snapshot, so a page and its total agree; a read-only snapshot never fails to serialize.
 */
import { CompiledQuery, sql } from "kysely"
import { LIST_CHANGES_KEPT_MILLIS } from "../PageBoundaries.js"
import { literalParameters, plainParameters, type SqlEngine } from "../SqlEngine.js"
import { classifyPostgresError } from "./classifyPostgresError.js"
import { isolation, postgresAutocommit, postgresSessions } from "./PostgresSession.js"
import { insertEventsTakingId, PostgresSettledPositions } from "./SettledPositions.js"

export const PostgresEngine: SqlEngine = {
  name: "postgres",
  begin: async (db, mode) => {
    const { accessMode, level, then } = isolation[mode]
    const begin = db.startTransaction().setIsolationLevel(level)
    const unit = await (accessMode === undefined ? begin : begin.setAccessMode(accessMode)).execute()
    if (then === undefined) return unit
    try {
      await unit.executeQuery(CompiledQuery.raw(then))
    } catch (cause) {
      await unit.rollback().execute().catch(() => undefined)
      throw cause
    }
    return unit
  },
  // BEGIN with the first statement, writes with the next one (see PostgresSession).
  sessions: (db) => postgresSessions(db, PostgresEngine),
  autocommit: postgresAutocommit,
  // Its planner does not plan a statement again when another value is bound (SqlEngine.castParameters).
  opaque: plainParameters,
  plannedForValues: literalParameters,
  substringPosition: "strpos",
  locksRowsForWrite: true,
  runsOnEventLoop: false,
  joinsLaterally: true,
  logSettling: { record: () => new PostgresSettledPositions(), insertEvents: insertEventsTakingId },
  checkedPerRow: (column) => sql.ref(column),
  classify: classifyPostgresError,
  listChanges: {
    // The read unit's snapshot (REPEATABLE READ: the unit's one snapshot), and migration 8's log of the client's
    // list changes by the transactions `unseenBy` did not see committed: from its next transaction id on, and those
    // running when it was taken (two ranges of the client's index). None when there is no `unseenBy` (a null
    // compares to nothing).
    query: (clientId, unseenBy) =>
      CompiledQuery.raw(
        `select now.s::text as snapshot, c.created_at, c.id
        from (select pg_current_snapshot() as s) as now
        left join transaction_list_changes as c on c.client_id = $1 and (c.xid >= $2::xid8 or c.xid = any($3::xid8[]))`,
        unseenBy === undefined ? [clientId, null, null] : [clientId, unseenBy.xmax.toString(), `{${[...unseenBy.running].join(",")}}`]
      ),
    sighting: (rows, unseenBy) => {
      const [first] = rows
      if (first === undefined) throw new Error("pg_current_snapshot() answered no row")
      const snapshot = first["snapshot"] as string
      // The snapshot's text is xmin:xmax:running,running,...
      const [, xmax, running] = snapshot.split(":")
      return {
        _tag: "Snapshot",
        unseenBy,
        xmax: BigInt(xmax!),
        running: (running ?? "").split(",").filter((xid) => xid !== "").map(BigInt),
        snapshot,
        changes: rows.flatMap((row) =>
          row["id"] === null ? [] : [{ created_at: row["created_at"] as string, id: row["id"] as string }]
        )
      }
    },
    prune: CompiledQuery.raw(
      `delete from transaction_list_changes where recorded_at < statement_timestamp() - interval '${LIST_CHANGES_KEPT_MILLIS / 1000} seconds'`
    )
  }
}
