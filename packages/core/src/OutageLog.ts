/**
 * A dependency's outage as the log tells it: the database for the outbox worker and for a synced rate limiter's
 * rounds, Redis for the rate limiter that counts there. One line when it begins, one every `remindEveryMillis` while
 * it lasts (with the failures met and the seconds it has lasted), and one when it ends: an outage of an hour is a few
 * lines, not one for each poll, round or request that met it.
 */
import { Cause, Clock, Effect, type LogLevel } from "effect"
import * as Storage from "./Storage.js"

/** While an outage lasts, one line this often says so. */
export const REMIND_EVERY_MILLIS = 60_000

export interface Messages {
  /** Said at the first failure of an outage. */
  readonly began: string
  /** Said every `remindEveryMillis` while it lasts. */
  readonly continues: string
  /** Said at the first success after it. */
  readonly ended: string
}

/** A failure as its line says it. */
export interface Failure {
  readonly level: Extract<LogLevel.LogLevel, "Warn" | "Error">
  readonly detail: string
}

/**
 * A failure as its line says it: storage unavailable or busy (a race lost past every re-run) in one line, the error's
 * message, as it is an outage to wait out and not a fault; anything else at Error with its cause in full.
 */
export const failureOf = (cause: Cause.Cause<unknown>): Failure => {
  const error = Storage.transientErrorIn(cause)
  return error !== undefined ? { level: "Warn", detail: error.message } : { level: "Error", detail: Cause.pretty(cause) }
}

export interface OutageLog {
  /** Notes a failure: said if it begins an outage, or if a reminder is due. */
  readonly failed: (failure: Failure) => Effect.Effect<void>
  /** Notes a success: says that the outage ended, if one was on. Check `isOn` first where this is on a hot path. */
  readonly succeeded: Effect.Effect<void>
  /** Failures since the last success: 0 when no outage is on. */
  readonly failures: () => number
  readonly isOn: () => boolean
}

export const make = (messages: Messages, remindEveryMillis: number = REMIND_EVERY_MILLIS): OutageLog => {
  let failures = 0
  let beganAtMillis = 0
  let saidAtMillis = 0
  const lasting = (nowMillis: number) => ({ failures, outageSeconds: Math.round((nowMillis - beganAtMillis) / 1000) })
  return {
    failed: (failure) =>
      Effect.flatMap(Clock.currentTimeMillis, (nowMillis) => {
        failures++
        if (failures === 1) {
          beganAtMillis = saidAtMillis = nowMillis
          return Effect.logWithLevel(failure.level)(messages.began, failure.detail)
        }
        if (nowMillis - saidAtMillis < remindEveryMillis) return Effect.void
        saidAtMillis = nowMillis
        return Effect.logWithLevel(failure.level)(messages.continues, failure.detail).pipe(Effect.annotateLogs(lasting(nowMillis)))
      }),
    succeeded: Effect.suspend(() =>
      failures === 0 ? Effect.void : Effect.flatMap(Clock.currentTimeMillis, (nowMillis) => {
        // Another fiber's success may have ended it meanwhile.
        if (failures === 0) return Effect.void
        const annotations = lasting(nowMillis)
        failures = 0
        return Effect.logInfo(messages.ended).pipe(Effect.annotateLogs(annotations))
      })
    ),
    failures: () => failures,
    isOn: () => failures > 0
  }
}
