/**
 * `pnpm --filter @custody-relay/server run bench:rate-limit`: what counting rate-limit windows costs a read on
 * PostgreSQL, by store. One relay server per store (memory, database, synced, redis) on one PostgreSQL database, GET
 * account under autocannon, the servers taking turns round by round so the machine's noise falls on all of them;
 * prints requests per second (median of rounds) and each store's ratio to `memory` (no shared counting at all),
 * then each relay's own CPU time a request (its process only: what PostgreSQL's backends or Redis spend on the count
 * is not in it). It measures and prints; it asserts nothing.
 *
 * Needs BENCH_PG_URL (a server where it may create and drop a database, e.g. postgres://postgres@127.0.0.1:5432/postgres)
 * and BENCH_REDIS_URL (default redis://127.0.0.1:6379). BENCH_DURATION (seconds per round, default 5),
 * BENCH_ROUNDS (default 3), BENCH_WARMUP (seconds, default 10), BENCH_CONNECTIONS (default 10).
 */
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { autocannon, demoOf, fromSource, grab, READY, startServer, takeTurns, turnsTable, turnSettingsFromEnv } from "./BenchProcess.js"

const pgUrl = process.env["BENCH_PG_URL"]
const redisUrl = process.env["BENCH_REDIS_URL"] ?? "redis://127.0.0.1:6379"
const { duration, rounds, warmup, connections } = turnSettingsFromEnv({ rounds: 3 })
const serverMain = fileURLToPath(new URL("../src/main.ts", import.meta.url))

const main = async () => {
  if (pgUrl === undefined) {
    process.stdout.write("set BENCH_PG_URL (e.g. postgres://postgres@127.0.0.1:5432/postgres)\n")
    process.exit(2)
  }
  const name = `relay_bench_${process.pid}`
  const admin = new pg.Client({ connectionString: pgUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  const url = new URL(pgUrl)
  url.pathname = `/${name}`
  const common = { RELAY_DATABASE: url.toString(), PORT: "0", RELAY_LOG_LEVEL: "Warn", RELAY_RATE_LIMIT: "1000000000" }
  const servers: Array<{ store: string; child: ChildProcess; url: string; headers: Record<string, string>; account: string }> = []
  const directory = mkdtempSync(join(tmpdir(), "relay-rate-limit-bench-"))
  try {
    // The first server seeds the demo; the others serve the same data.
    for (const store of ["memory", "database", "synced", "redis"]) {
      const started = await startServer({
        command: [...fromSource, serverMain],
        logFile: join(directory, `${store}.log`),
        ready: READY,
        env: { ...common, RELAY_RATE_LIMIT_STORE: store, RELAY_REDIS_URL: redisUrl, RELAY_DEMO: servers.length === 0 ? "always" : "never" }
      })
      const seeded = servers[0]
      const printed = seeded === undefined ? demoOf(started.output) : undefined
      servers.push({
        store,
        child: started.child,
        url: grab(started.output, /listening on (http:\/\/\S+)/),
        headers: seeded?.headers ?? printed?.headers ?? {},
        account: seeded?.account ?? printed?.account ?? ""
      })
    }
    process.stdout.write(`\n${cpus().length} CPUs, ${cpus()[0]?.model ?? "?"}; node ${process.version}; PostgreSQL; GET account; ${connections} connections, ${rounds} rounds of ${duration} s after ${warmup} s of warm-up each\n\n`)
    const load = (server: (typeof servers)[number], seconds: number) =>
      autocannon({ url: `${server.url}/relay/v1/accounts/${server.account}`, connections, duration: seconds, headers: server.headers })
    const results = await takeTurns(servers, load, { warmup, rounds, duration, pidOf: (server) => server.child.pid })
    process.stdout.write(turnsTable(results, (server) => server.store, servers[0] as (typeof servers)[number], "store"))
  } finally {
    for (const server of servers) server.child.kill("SIGTERM")
    await new Promise((resolve) => setTimeout(resolve, 1000))
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin.end()
    rmSync(directory, { recursive: true, force: true })
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
