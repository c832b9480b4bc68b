/**
 * Builders of the Storage port's one error, `Storage.StorageError`, one per reason. The engines' classifiers
 * decide which reason a driver error is; these only wrap it, keeping the driver's error as the cause.
 */
import { Storage } from "@custody-relay/core"

const messageOf = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

export const conflict = (cause: unknown): Storage.StorageError =>
  new Storage.StorageError({ reason: new Storage.StorageConflict({ message: messageOf(cause), cause }) })

export const unavailable = (cause: unknown): Storage.StorageError =>
  new Storage.StorageError({ reason: new Storage.StorageUnavailable({ message: messageOf(cause), cause }) })

/** The connection was lost while committing: the unit may or may not have committed, so it is not re-run. */
export const commitOutcomeUnknown = (cause: unknown): Storage.StorageError =>
  new Storage.StorageError({
    reason: new Storage.StorageUnavailable({ message: `commit outcome unknown: ${messageOf(cause)}`, cause, outcomeUnknown: true })
  })

/** A statement the database did not answer in time: it may have run, or may yet, so it is not re-run. */
export const unanswered = (message: string): Storage.StorageError =>
  new Storage.StorageError({ reason: new Storage.StorageUnavailable({ message, cause: null, outcomeUnknown: true, timedOut: true }) })

/**
 * The database did not answer within a bound, where nothing it may have done outlives the connection (a connection
 * that did not open, a round trip before COMMIT): not re-run, since a re-run would wait as long again.
 */
export const timedOut = (cause: unknown): Storage.StorageError =>
  new Storage.StorageError({ reason: new Storage.StorageUnavailable({ message: messageOf(cause), cause, timedOut: true }) })

export const constraintViolated = (constraint: string, cause: unknown): Storage.StorageError =>
  new Storage.StorageError({
    reason: new Storage.StorageConstraintViolated({ constraint, message: messageOf(cause), cause })
  })

export const fault = (cause: unknown): Storage.StorageError =>
  new Storage.StorageError({ reason: new Storage.StorageFault({ message: messageOf(cause), cause }) })

/**
 * Failures that are not the database's answer but the way to it: the socket, the pool, a closed handle. Both
 * engines share them; node's system errors carry a `code` such as `ECONNREFUSED`.
 */
const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH"
])
const UNREACHABLE_MESSAGES = [
  "Connection terminated",
  "timeout exceeded when trying to connect",
  "Client has encountered a connection error",
  "Cannot use a pool after calling end",
  "driver has already been destroyed",
  "The database connection is not open",
  "Cannot open database",
  "Postgres connection has been discarded"
]

export const isUnreachable = (cause: unknown): boolean => {
  if (!(cause instanceof Error)) return false
  const code = "code" in cause ? cause.code : undefined
  if (typeof code === "string" && UNREACHABLE_CODES.has(code)) return true
  return UNREACHABLE_MESSAGES.some((fragment) => cause.message.includes(fragment))
}

/** The driver error's `code` property when it has a string one (SQLSTATE for pg, `SQLITE_*` for better-sqlite3). */
export const codeOf = (cause: unknown): string | undefined => {
  if (typeof cause !== "object" || cause === null || !("code" in cause)) return undefined
  return typeof cause.code === "string" ? cause.code : undefined
}

/**
 * Whether `cause` is an error the database itself sent about the statement: a SQLite result code, or a PostgreSQL
 * error message (pg's DatabaseError carries the server's `severity`) other than a connection exception (class 08,
 * which a pooler such as PgBouncer sends when it lost the server connection a statement was out on). A node socket
 * error's code (EPIPE, ECONNRESET) is the network's, never an answer.
 */
const isDatabaseAnswer = (cause: unknown): boolean => {
  const code = codeOf(cause)
  if (code === undefined) return false
  if (code.startsWith("SQLITE_")) return true
  const severity = typeof cause === "object" && cause !== null && "severity" in cause ? cause.severity : undefined
  return typeof severity === "string" && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith("08")
}

/** pg's errors for a statement it refused to send on a connection that had already failed or was closed. */
const NOT_SENT_MESSAGES = ["is not queryable", "Cannot use a pool after calling end"]

/**
 * Whether a statement sent on its own (autocommit: it is its own commit) that failed so may have been run: its
 * connection was lost or went unanswered after it was sent, with no answer from the database. An error the database
 * sent (isDatabaseAnswer: such as 57P01 from a backend terminated before or while it ran) means it did not commit,
 * since a statement that fails rolls back; a client that refused to send it never sent it.
 */
export const mayHaveRun = (error: Storage.StorageError, cause: unknown): boolean => {
  if (!error.isUnavailable || isDatabaseAnswer(cause)) return false
  return !(cause instanceof Error && NOT_SENT_MESSAGES.some((fragment) => cause.message.includes(fragment)))
}
