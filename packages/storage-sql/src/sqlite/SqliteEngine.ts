/**
 * The SQLite engine: write units take the write lock up front; the lock covers rows, so none are locked singly.
 * Units run straight on better-sqlite3 when the database was opened by openSqlite (see SqliteSession).
 */
import { sql } from "kysely"
import { castParameters, type SqlEngine } from "../SqlEngine.js"
import { kyselyAutocommit, kyselySessions } from "../SqlSession.js"
import { classifySqliteError } from "./classifySqliteError.js"
import * as SqliteSession from "./SqliteSession.js"

export const SqliteEngine: SqlEngine = {
  name: "sqlite",
  begin: (db, mode) =>
    mode === "read" ? db.startTransaction().setAccessMode("read only").execute() : db.startTransaction().execute(),
  sessions: (db) => {
    const handle = SqliteSession.handleOf(db)
    return handle === undefined ? kyselySessions(db, SqliteEngine) : SqliteSession.sessions(handle)
  },
  // Through the driver, which takes the write lock in turn with the units (WriteLockDriver).
  autocommit: kyselyAutocommit,
  opaque: castParameters,
  substringPosition: "instr",
  locksRowsForWrite: false,
  runsOnEventLoop: true,
  joinsLaterally: false,
  logSettling: undefined,
  checkedPerRow: (column) => sql`+${sql.ref(column)}`,
  classify: classifySqliteError,
  listChanges: {
    query: () => SqliteSession.DATA_VERSION,
    sighting: (rows) => ({ _tag: "DataVersion", version: SqliteSession.dataVersionOf(rows) })
  }
}
