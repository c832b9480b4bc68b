/**
 * pg's errors as `StorageError` reasons, by SQLSTATE (`code`).
 * - 40001 serialization_failure, 40P01 deadlock_detected, 55P03 lock_not_available: lost a race; re-run.
 * - A kept statement gone or made invalid by a schema change (PreparedStatements.invalidatesKept): the connection
 *   has forgotten its kept statements; re-run, parsing afresh.
 * - 23505 unique_violation: a duplicate the core's own check did not see; the constraint name comes with it.
 * - Class 08 (connection exception), 57P01-57P03 (shutdown, cannot connect now), 53xxx (insufficient resources),
 *   3D000 (the database does not exist: not yet created or restored) and socket errors: the server, not the query.
 * - A round trip the server did not answer in time (Pipeline's `UnansweredReply`), a connection the pool did not
 *   get within `connectionTimeoutMillis` (a server that does not answer its start-up, or every connection busy), and
 *   57014 query_canceled (a statement the server stopped at `statement_timeout`, or an operator cancelled):
 *   unavailable, and not re-run. A server that has not answered for that long is not expected to answer the re-run
 *   sooner, and each re-run would make the request wait the whole bound again (eight re-runs of a 10 s wait for a
 *   connection would hold a request for 90 s); the caller gets a 503 with Retry-After at once instead.
 * Every other error, other integrity rules included, is a fault: running it again cannot help.
 */
import type { Storage } from "@custody-relay/core"
import * as StorageFailure from "../StorageFailure.js"
import { UnansweredReply } from "./Pipeline.js"
import { invalidatesKept } from "./PreparedStatements.js"

const CONFLICTS = new Set(["40001", "40P01", "55P03"])
const UNAVAILABLE = new Set(["57P01", "57P02", "57P03", "3D000"])
const QUERY_CANCELED = "57014"

/**
 * pg-pool's errors for a connection it did not get within `connectionTimeoutMillis`: every connection busy for that
 * long, or a new one whose start-up the server did not answer.
 */
const CONNECT_TIMEOUTS = ["timeout exceeded when trying to connect", "Connection terminated due to connection timeout"]
const isConnectTimeout = (cause: unknown): boolean =>
  cause instanceof Error && CONNECT_TIMEOUTS.some((message) => cause.message.includes(message))

const constraintOf = (cause: unknown): string =>
  typeof cause === "object" && cause !== null && "constraint" in cause && typeof cause.constraint === "string"
    ? cause.constraint
    : "unknown"

export const classifyPostgresError = (cause: unknown): Storage.StorageError => {
  const code = StorageFailure.codeOf(cause)
  if (cause instanceof UnansweredReply || isConnectTimeout(cause) || code === QUERY_CANCELED) return StorageFailure.timedOut(cause)
  if (code !== undefined) {
    if (CONFLICTS.has(code) || invalidatesKept(cause)) return StorageFailure.conflict(cause)
    if (code === "23505") return StorageFailure.constraintViolated(constraintOf(cause), cause)
    if (UNAVAILABLE.has(code) || code.startsWith("08") || code.startsWith("53")) return StorageFailure.unavailable(cause)
  }
  return StorageFailure.isUnreachable(cause) ? StorageFailure.unavailable(cause) : StorageFailure.fault(cause)
}
