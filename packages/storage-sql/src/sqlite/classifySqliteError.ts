/**
 * better-sqlite3's errors as `StorageError` reasons. The driver's `code` is SQLite's extended result code name.
 * - BUSY / LOCKED: another connection holds the lock past busy_timeout; the unit may succeed when re-run.
 * - CONSTRAINT_UNIQUE / CONSTRAINT_PRIMARYKEY: a duplicate the core's own check did not see (it lost a race).
 * - CANTOPEN / IOERR / FULL / READONLY / PERM: the file or the disk, not the query.
 * Every other constraint (foreign key, NOT NULL, CHECK) means a record the core should never have written, and
 * running it again cannot help: a fault.
 */
import type { Storage } from "@custody-relay/core"
import { fromSqliteMessage } from "../schema/UniqueConstraint.js"
import * as StorageFailure from "../StorageFailure.js"

const startsWithAny = (code: string, prefixes: ReadonlyArray<string>): boolean =>
  prefixes.some((prefix) => code === prefix || code.startsWith(`${prefix}_`))

export const classifySqliteError = (cause: unknown): Storage.StorageError => {
  const code = StorageFailure.codeOf(cause)
  if (code !== undefined) {
    if (startsWithAny(code, ["SQLITE_BUSY", "SQLITE_LOCKED"])) return StorageFailure.conflict(cause)
    if (code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY") {
      return StorageFailure.constraintViolated(fromSqliteMessage(cause instanceof Error ? cause.message : ""), cause)
    }
    if (startsWithAny(code, ["SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_FULL", "SQLITE_READONLY", "SQLITE_PERM"])) {
      return StorageFailure.unavailable(cause)
    }
  }
  return StorageFailure.isUnreachable(cause) ? StorageFailure.unavailable(cause) : StorageFailure.fault(cause)
}
