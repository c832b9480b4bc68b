/**
 * Counts better-sqlite3 statement calls on every connection of this process, for a test's scope: the prototype's
 * `method` is wrapped while the scope is open and put back when it closes.
 */
import BetterSqlite3 from "better-sqlite3"
import { Effect } from "effect"

/** What a counted call is made on: the statement's SQL, and its connection. */
export interface CountedStatement {
  readonly source: string
  readonly database: { readonly readonly: boolean }
}

/** Counts the calls of `method` on statements that `matches` accepts. */
export const countedStatements = (method: "all" | "run", matches: (statement: CountedStatement) => boolean) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const probe = new BetterSqlite3(":memory:")
      const prototype = Object.getPrototypeOf(probe.prepare("select 1")) as Record<typeof method, (...parameters: Array<unknown>) => unknown>
      probe.close()
      const original = prototype[method]
      const counter = { calls: 0, restore: () => void (prototype[method] = original) }
      prototype[method] = function(this: CountedStatement, ...parameters) {
        if (matches(this)) counter.calls++
        return original.apply(this, parameters)
      }
      return counter
    }),
    (counter) => Effect.sync(counter.restore)
  )
