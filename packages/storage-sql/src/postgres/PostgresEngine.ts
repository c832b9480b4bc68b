/**
 * The PostgreSQL engine. Write units run in READ COMMITTED and lock each record they read by id (FOR NO KEY
 * UPDATE) until they end: a second unit, on this node or another, that reads the same account waits and then sees
 * the first one's committed balance, so one balance is never spent twice. Deadlocks between units that lock in
 * different orders are reported by the server (40P01) and the unit is re-run. Read units see one REPEATABLE READ
 * snapshot, so a page and its total agree; a read-only snapshot never fails to serialize.
 */
import { plainParameters, type SqlEngine } from "../SqlEngine.js"
import { kyselySessions } from "../SqlSession.js"
import { classifyPostgresError } from "./classifyPostgresError.js"

export const PostgresEngine: SqlEngine = {
  name: "postgres",
  begin: (db, mode) =>
    mode === "read"
      ? db.startTransaction().setIsolationLevel("repeatable read").setAccessMode("read only").execute()
      : db.startTransaction().setIsolationLevel("read committed").execute(),
  sessions: (db) => kyselySessions(db, PostgresEngine),
  // PostgreSQL plans an unnamed statement with its values each time anyway; nothing to hide from its planner.
  opaque: plainParameters,
  substringPosition: "strpos",
  locksRowsForWrite: true,
  classify: classifyPostgresError
}
