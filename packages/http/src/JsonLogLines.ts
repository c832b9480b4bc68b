/**
 * The handler's default log output: one JSON object per line on stdout, the shape of Effect's
 * `Logger.formatJson` (`{message, level, timestamp, cause, annotations, spans, fiberId}`), at a cost the default
 * level can afford. The relay writes a line for every request (at Info or Debug, see RequestLine), and at a line
 * per request `Logger.consoleJson` cost a quarter of a GET's throughput with its output going to a file
 * (`pnpm --filter @custody-relay/server run bench:logging`): a redacting, cycle-safe serialisation and a write
 * system call per line. Here:
 *
 * - An entry whose message and annotations are all plain values (every line the relay writes without a cause) is
 *   serialised with `JSON.stringify` directly: plain values hold nothing to redact and no cycle. Any other entry
 *   goes through `Logger.formatJson` as before, so a `Redacted` value is never printed whatever is logged.
 * - The line is put together around one `JSON.stringify` of its annotations, with the timestamp's ISO text kept
 *   for the millisecond it names: `JSON.stringify` of the whole entry and a `toISOString` per line cost 2.5 times
 *   as much (1.0 µs against 0.39 µs a line, and 3.3% of a GET's CPU profile at Info).
 * - Lines below Warn are gathered and written together every GATHER_MILLIS (or sooner, past GATHER_BYTES), in one
 *   write to stdout for all of them; a line at Warn or above is written at once, after what was gathered, so
 *   nothing a crash needs to explain waits in memory. `flush` writes what is gathered (the handler calls it when
 *   disposed). Where there is a `process.stdout` the lines go to it directly: `console.log` added its own call
 *   (1.8% of the profile), and a write per millisecond its system call (2.6%).
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
  return lineOf(messages.length === 1 ? messages[0] : messages, entry.logLevel.toUpperCase(), now, annotations, spans, entry.fiber.id)
}

/** How long an Info line may wait to be written with others, and how much may wait before a write. */
export const GATHER_MILLIS = 10
export const GATHER_BYTES = 64 * 1024

let isoMillis = Number.NaN
let isoText = ""
/** `new Date(millis).toISOString()`, worked out once per millisecond. */
const isoOf = (millis: number): string => {
  if (millis !== isoMillis) {
    isoText = new Date(millis).toISOString()
    isoMillis = millis
  }
  return isoText
}

/**
 * The one shape of a line, `Logger.formatJson`'s: `{message, level, timestamp, annotations, spans, fiberId}`. `level`
 * is one of Effect's level names, which need no escaping.
 */
const lineOf = (message: unknown, level: string, millis: number, annotations: object, spans: object, fiberId: number): string =>
  `{"message":${JSON.stringify(message)},"level":"${level}","timestamp":"${isoOf(millis)}","annotations":${JSON.stringify(annotations)},"spans":${JSON.stringify(spans)},"fiberId":"#${fiberId}"}`

/** One write to stdout where there is one (node, Bun, Deno's node compatibility), else `console.log`. */
const toStdout = (): ((text: string) => void) => {
  const stdout = (globalThis as { readonly process?: { readonly stdout?: { readonly write?: unknown } } }).process?.stdout
  if (stdout === undefined || typeof stdout.write !== "function") return (text) => console.log(text)
  const out = stdout as { write(text: string): unknown }
  return (text) => {
    out.write(`${text}\n`)
  }
}

export interface JsonLogLines {
  readonly logger: Logger.Logger<unknown, void>
  /**
   * Gathers a line of plain values below Warn without an Effect log entry: the line
   * `Effect.logWithLevel(level)(message)` would print under exactly these annotations and no span, from fiber
   * `fiberId`. For the one line each request writes (see Handler and RequestLine), where Effect's entry was most of
   * what the line cost.
   */
  readonly plain: (
    level: "Debug" | "Info",
    message: string,
    annotations: Readonly<Record<string, string | number>>,
    fiberId: number
  ) => void
  /** Writes the lines gathered so far. */
  readonly flush: () => void
}

export const make = (write: (text: string) => void = toStdout()): JsonLogLines => {
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
    if (gathered.length >= GATHER_BYTES) flush()
    else timer ??= setTimeout(flush, GATHER_MILLIS)
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
  const plain = (level: "Debug" | "Info", message: string, annotations: Readonly<Record<string, string | number>>, fiberId: number) =>
    gather(lineOf(message, level === "Info" ? "INFO" : "DEBUG", Date.now(), annotations, {}, fiberId))
  return { logger, plain, flush }
}
