/**
 * The handler's default log output: one JSON object per line through `console.log`, the shape of Effect's
 * `Logger.formatJson` (`{message, level, timestamp, cause, annotations, spans, fiberId}`), at a cost the default
 * level can afford. At Info the relay writes a line for every request, and `Logger.consoleJson` cost a quarter of a
 * GET's throughput with its output going to a file (`pnpm --filter @custody-relay/server run bench:logging`): a
 * redacting, cycle-safe serialisation and a write system call per line. Here:
 *
 * - An entry whose message and annotations are all plain values (every line the relay writes without a cause) is
 *   serialised with `JSON.stringify` directly: plain values hold nothing to redact and no cycle. Any other entry
 *   goes through `Logger.formatJson` as before, so a `Redacted` value is never printed whatever is logged.
 * - Lines below Warn are gathered and written together once per timer tick (a millisecond or so), one `console.log`
 *   for all of them; a line at Warn or above is written at once, after what was gathered, so nothing a crash
 *   needs to explain waits in memory. `flush` writes what is gathered (the handler calls it when disposed).
 */
import { Logger, LogLevel, References } from "effect"

const isPlain = (value: unknown): boolean => {
  const type = typeof value
  return type === "string" || type === "number" || type === "boolean" || value === null
}

/** The entry as `Logger.formatJson` prints it when every value in it is plain, else undefined. */
const plainLine = (entry: Logger.Options<unknown>): string | undefined => {
  if (entry.cause.reasons.length > 0) return undefined
  const messages = Array.isArray(entry.message) ? entry.message : [entry.message]
  if (!messages.every(isPlain)) return undefined
  const annotations = entry.fiber.getRef(References.CurrentLogAnnotations)
  for (const key in annotations) if (!isPlain(annotations[key])) return undefined
  const spans: Record<string, number> = {}
  const now = entry.date.getTime()
  for (const [label, startedAt] of entry.fiber.getRef(References.CurrentLogSpans)) spans[label] = now - startedAt
  return lineOf(messages.length === 1 ? messages[0] : messages, entry.logLevel.toUpperCase(), entry.date, annotations, spans, entry.fiber.id)
}

/** The one shape of a line, `Logger.formatJson`'s. */
const lineOf = (message: unknown, level: string, date: Date, annotations: object, spans: object, fiberId: number): string =>
  JSON.stringify({ message, level, timestamp: date.toISOString(), annotations, spans, fiberId: `#${fiberId}` })

export interface JsonLogLines {
  readonly logger: Logger.Logger<unknown, void>
  /**
   * Gathers an Info line of plain values without an Effect log entry: the line `Effect.logInfo(message)` would
   * print under exactly these annotations and no span, from fiber `fiberId`. For the one line every request writes
   * (see Handler), where Effect's entry was most of what the line cost.
   */
  readonly info: (message: string, annotations: Readonly<Record<string, string | number>>, fiberId: number) => void
  /** Writes the lines gathered so far. */
  readonly flush: () => void
}

export const make = (write: (text: string) => void = (text) => console.log(text)): JsonLogLines => {
  let gathered = ""
  let timer: ReturnType<typeof setTimeout> | undefined
  const flush = () => {
    if (timer !== undefined) clearTimeout(timer)
    timer = undefined
    if (gathered === "") return
    const text = gathered
    gathered = ""
    write(text)
  }
  const gather = (line: string) => {
    gathered = gathered === "" ? line : `${gathered}\n${line}`
    timer ??= setTimeout(flush, 0)
  }
  const logger = Logger.make<unknown, void>((entry) => {
    const line = plainLine(entry) ?? Logger.formatJson.log(entry)
    if (LogLevel.isGreaterThanOrEqualTo(entry.logLevel, "Warn")) {
      flush()
      write(line)
      return
    }
    gather(line)
  })
  const info = (message: string, annotations: Readonly<Record<string, string | number>>, fiberId: number) =>
    gather(lineOf(message, "INFO", new Date(), annotations, {}, fiberId))
  return { logger, info, flush }
}
