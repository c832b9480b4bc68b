/**
 * The log lines the relay wrote, kept in a bounded buffer for the test control protocol's `GET /logs` (v1.1),
 * through which the conformance kit checks that no line carries an API secret (AUTH-SEC-1). Only built when the
 * control protocol is mounted. Lines are the same JSON the default logger prints.
 */
import { Logger, LogLevel } from "effect"

export interface LogCapture {
  /** The lines captured since the previous call, oldest first, and forgets them. */
  readonly drain: () => ReadonlyArray<string>
}

export const DEFAULT_CAPACITY = 5_000

/**
 * A logger that records every entry it is given and passes those at `outputLevel` or above on to `output`. The
 * runtime's minimum level decides what it is given: the handler sets it to the lower of the output level and the
 * most verbose request line's (RequestLine.MOST_VERBOSE), so the kit scans each request's line even when the
 * deployment only prints warnings: more lines to scan is a stronger check, never a weaker one.
 */
export const make = (
  output: Logger.Logger<unknown, unknown>,
  outputLevel: LogLevel.LogLevel,
  capacity = DEFAULT_CAPACITY
): { readonly capture: LogCapture; readonly logger: Logger.Logger<unknown, void> } => {
  let lines: Array<string> = []
  const logger = Logger.make<unknown, void>((entry) => {
    lines.push(Logger.formatJson.log(entry))
    if (lines.length > capacity) lines.splice(0, lines.length - capacity)
    if (LogLevel.isGreaterThanOrEqualTo(entry.logLevel, outputLevel)) output.log(entry)
  })
  return {
    logger,
    capture: {
      drain: () => {
        const drained = lines
        lines = []
        return drained
      }
    }
  }
}

/** The more verbose of two levels: what the runtime must let through for both the output and the capture. */
export const lowerOf = (a: LogLevel.LogLevel, b: LogLevel.LogLevel): LogLevel.LogLevel =>
  LogLevel.isLessThan(a, b) ? a : b
