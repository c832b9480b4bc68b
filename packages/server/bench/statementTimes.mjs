/**
 * Preloaded into a relay server by statements.bench.ts (`node --import`): times every statement the server's main
 * thread runs through better-sqlite3, by connection (the read-write one, or the read-only one lookups use) and SQL
 * text. On SIGUSR2 it writes what it gathered since the last signal to RELAY_BENCH_STATEMENTS_OUT, one JSON array per
 * statement ([connection, sql, runs, nanoseconds]), and starts afresh.
 *
 * The timing is around better-sqlite3's `run`, `get` and `all` calls, so it holds the binding's own work (binding
 * parameters, making the rows' objects) as well as SQLite's; what it adds itself (two clock readings and a map
 * update) is outside the figure it records. The server's worker threads (WAL checkpoints, first deep walks) are not
 * timed: a signal reaches the main thread only.
 */
import { writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { isMainThread } from "node:worker_threads"

const out = process.env["RELAY_BENCH_STATEMENTS_OUT"]
if (isMainThread && out !== undefined) {
  const Database = createRequire(import.meta.url)("better-sqlite3")
  /** @type {Map<string, { connection: string, sql: string, runs: number, nanos: bigint }>} */
  const times = new Map()
  const prepare = Database.prototype.prepare
  Database.prototype.prepare = function (source, ...rest) {
    const statement = prepare.call(this, source, ...rest)
    const connection = this.readonly ? "read-only" : "read-write"
    const sql = String(source).replace(/\s+/g, " ").trim()
    const key = `${connection}\u0000${sql}`
    for (const method of ["run", "get", "all"]) {
      const original = statement[method]
      statement[method] = function (...parameters) {
        const started = process.hrtime.bigint()
        try {
          return original.apply(this, parameters)
        } finally {
          const taken = process.hrtime.bigint() - started
          const time = times.get(key)
          if (time === undefined) times.set(key, { connection, sql, runs: 1, nanos: taken })
          else {
            time.runs += 1
            time.nanos += taken
          }
        }
      }
    }
    return statement
  }
  process.on("SIGUSR2", () => {
    const lines = [...times.values()].map(({ connection, sql, runs, nanos }) => JSON.stringify([connection, sql, runs, Number(nanos)]))
    times.clear()
    writeFileSync(out, lines.join("\n"))
  })
}
