/** The SQLite engine: write units take the write lock up front; the lock covers rows, so none are locked singly. */
import type { SqlEngine } from "../SqlEngine.js"
import { classifySqliteError } from "./classifySqliteError.js"

export const SqliteEngine: SqlEngine = {
  name: "sqlite",
  begin: (db, mode) =>
    mode === "read" ? db.startTransaction().setAccessMode("read only").execute() : db.startTransaction().execute(),
  substringPosition: "instr",
  locksRowsForWrite: false,
  classify: classifySqliteError
}
