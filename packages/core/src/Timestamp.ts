/**
 * Instants, written as ISO 8601 strings in UTC with milliseconds (GEN-TIME-1). The time comes from Effect's
 * Clock, never `Date.now`, so tests drive it with TestClock.
 */
import { Clock, Effect, Schema } from "effect"

export const Timestamp = Schema.String.check(
  Schema.isPattern(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
).pipe(Schema.brand("Timestamp"))
export type Timestamp = typeof Timestamp.Type

export const fromMillis = (millis: number): Timestamp => new Date(millis).toISOString() as Timestamp

/** An instant as a caller may write it: ISO 8601 in UTC, milliseconds optional (GEN-TIME-1's form). */
export const WRITTEN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?Z$/

/** What a caller is told when an instant is not written so. */
export const WRITTEN_HINT = "must be an ISO 8601 time in UTC, e.g. 2026-01-31T12:00:00.000Z"

/**
 * The Timestamp an instant written by a caller names (see WRITTEN), or undefined when it names none. A date or time
 * that does not exist (February 30th, 24:00) names none: `Date.parse` would roll it over into the next month or day,
 * and a stretch would quietly cover more than the caller wrote.
 */
export const parse = (text: string): Timestamp | undefined => {
  if (!WRITTEN.test(text)) return undefined
  const millis = Date.parse(text)
  if (Number.isNaN(millis)) return undefined
  const parsed = fromMillis(millis)
  // The written fields, to the second, read back unchanged only if they named a real instant.
  return parsed.slice(0, 19) === text.slice(0, 19) ? parsed : undefined
}

export const now: Effect.Effect<Timestamp> = Effect.map(Clock.currentTimeMillis, fromMillis)
