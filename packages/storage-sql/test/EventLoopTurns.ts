/**
 * What the deep-page and audit-trail tests share to show that a long read leaves the event loop turns: SQLite's
 * sessions with their off-loop reads counted, and a lookup asked for on the next turn after a read began.
 */
import type { Storage } from "@custody-relay/core"
import { Effect, Option } from "effect"
import type { CompiledQuery } from "kysely"
import { SqliteEngine } from "../src/sqlite/SqliteEngine.js"
import type { SqlEngine } from "../src/SqlEngine.js"
import type { CredentialCheck } from "../src/SqlSession.js"
import * as StorageFailure from "../src/StorageFailure.js"

/**
 * SQLite's sessions with their off-loop reads counted, or failing (a worker that died) when `fail` says so;
 * `beforeRead` runs before each. `readUnits` counts the read units opened.
 */
export const offLoopCounted = (fail = false) => {
  const counted: { reads: number; readUnits: number; beforeRead?: () => void } = { reads: 0, readUnits: 0 }
  const engine: SqlEngine = {
    ...SqliteEngine,
    sessions: (db) => {
      const open = SqliteEngine.sessions(db)
      const readOffLoop = open.readOffLoop
      const opening = (mode: Storage.UnitMode, check?: CredentialCheck) => {
        if (mode === "read") counted.readUnits++
        return open(mode, check)
      }
      return Object.assign(opening, open, readOffLoop === undefined ? {} : {
        readOffLoop: <R>(query: CompiledQuery<R>) => {
          counted.reads++
          counted.beforeRead?.()
          return fail ? Effect.fail(StorageFailure.conflict(new Error("the read worker ended"))) : readOffLoop(query)
        }
      })
    }
  }
  return { counted, engine }
}

/**
 * Runs `read` while counting the event loop's turns, with `lookup` asked for on the next turn, after `read` began:
 * what `read` gave, the turns taken meanwhile, and which finished first ("lookup" when the lookup found its record).
 */
export const withLookupOnNextTurn = <A, E>(
  read: Effect.Effect<A, E>,
  lookup: Effect.Effect<Option.Option<unknown>, unknown>
): Effect.Effect<{ readonly value: A; readonly turns: number; readonly finished: ReadonlyArray<string> }, E> =>
  Effect.gen(function*() {
    let turns = 0
    let ticking = true
    const tick = () => {
      turns++
      if (ticking) setImmediate(tick)
    }
    setImmediate(tick)
    const finished: Array<string> = []
    setImmediate(() => {
      void Effect.runPromise(lookup).then((found) => {
        if (Option.isSome(found)) finished.push("lookup")
      })
    })
    const value = yield* read
    finished.push("read")
    ticking = false
    return { value, turns, finished }
  })
