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

export const now: Effect.Effect<Timestamp> = Effect.map(Clock.currentTimeMillis, fromMillis)
