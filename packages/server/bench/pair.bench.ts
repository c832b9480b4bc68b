/**
 * `pnpm --filter @custody-relay/server run bench:pair`: two builds of the relay side by side, to measure a change
 * against its parent in one run. Each checkout named in BENCH_PAIR (comma-separated paths to work trees, built
 * with `pnpm build`) serves its own database with the demo data (`node packages/server/dist/main.js`, output to a
 * file); the servers take turns, round by round, under autocannon, so the machine's noise falls on all of them.
 * Prints requests per second (median of rounds, min, max) and each one's ratio to the first; on Linux also each
 * server's CPU time a request (all its threads, from /proc) and the first's over each one's. Asserts nothing.
 *
 *   git worktree add ../before HEAD~1 && (cd ../before && pnpm install && pnpm build)
 *   BENCH_PAIR=$PWD/../before,$PWD BENCH_SCENARIO=initiate pnpm --filter @custody-relay/server run bench:pair
 *
 * A tree named twice (BENCH_PAIR=$PWD/../before,$PWD,$PWD/../before) runs two identical servers: what they differ by
 * is the run's own noise, against which the other ratios are read.
 *
 * BENCH_SCENARIO: account (GET an account, default), list (GET the accounts), initiate (POST, to the whitelisted
 * address), initiate-keyed (the same, each under an Idempotency-Key of its own), transactions (GET a first page of twenty, initiated before the warm-up). BENCH_PG_URL: each server on a
 * PostgreSQL database of its own (created and dropped here) instead of a SQLite file. BENCH_RATE_LIMIT_STORE: where
 * the servers count rate limits (RELAY_RATE_LIMIT_STORE: memory, the default here, database, synced, or redis with
 * BENCH_REDIS_URL; each server's demo keys are its own, so are their counts).
 * BENCH_PG_DELAY_MS (with BENCH_PG_URL): each server reaches PostgreSQL through a proxy (delayProxy.mjs, a process
 * of its own) that holds every chunk that many milliseconds each way, as a database on another host would; a round
 * trip then costs twice that more. BENCH_LOG_LEVEL (default Info), BENCH_DURATION (seconds per round, default 5),
 * BENCH_ROUNDS (default 5), BENCH_WARMUP (seconds, default 10), BENCH_CONNECTIONS (default 10).
 */
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { delayProxy, type DemoServer, demoLoad, demoOf, demoPrepared, demoScenarioOf, postgresDatabase, READY, startServer, takeTurns, turnsTable, turnSettingsFromEnv } from "./BenchProcess.js"

const trees = (process.env["BENCH_PAIR"] ?? "").split(",").filter((tree) => tree !== "")
const scenario = demoScenarioOf(process.env["BENCH_SCENARIO"], "account")
const pgUrl = process.env["BENCH_PG_URL"]
const pgDelayMillis = Number(process.env["BENCH_PG_DELAY_MS"] ?? "0")
const logLevel = process.env["BENCH_LOG_LEVEL"] ?? "Info"
const rateLimitStore = process.env["BENCH_RATE_LIMIT_STORE"] ?? "memory"
const redisUrl = process.env["BENCH_REDIS_URL"]
const { duration, rounds, warmup, connections } = turnSettingsFromEnv({ rounds: 5 })

interface Server extends DemoServer {
  readonly tree: string
  readonly pid: number | undefined
}

const children: Array<ChildProcess> = []

const load = (server: Server, seconds: number) => demoLoad(scenario, server, { seconds, connections })

const run = async () => {
  if (trees.length === 0) {
    process.stdout.write("set BENCH_PAIR to the work trees to compare, comma-separated (each built with pnpm build)\n")
    process.exit(2)
  }
  const directory = mkdtempSync(join(tmpdir(), "relay-pair-"))
  const databases: Array<{ readonly drop: () => Promise<void> }> = []
  const proxy = pgUrl === undefined || pgDelayMillis <= 0 ? undefined : await delayProxy(new URL(pgUrl), pgDelayMillis, join(directory, "delay.log"))
  if (proxy !== undefined) children.push(proxy.child)
  const proxyPort = proxy?.port
  try {
    const servers: Array<Server> = []
    for (const tree of trees) {
      let database = join(directory, `${servers.length}.db`)
      if (pgUrl !== undefined) {
        const created = await postgresDatabase(pgUrl, `relay_pair_${process.pid}_${servers.length}`)
        databases.push(created)
        const url = new URL(created.url)
        if (proxyPort !== undefined) {
          url.hostname = "127.0.0.1"
          url.port = proxyPort
        }
        database = url.toString()
      }
      const started = await startServer({
        command: [process.execPath, join(tree, "packages/server/dist/main.js")],
        logFile: join(directory, `${servers.length}.log`),
        ready: READY,
        env: {
          RELAY_DATABASE: database,
          RELAY_RATE_LIMIT_STORE: rateLimitStore,
          ...(redisUrl === undefined ? {} : { RELAY_REDIS_URL: redisUrl }),
          PORT: "0",
          RELAY_DEMO: "always",
          RELAY_LOG_LEVEL: logLevel,
          RELAY_RATE_LIMIT: "1000000000"
        }
      })
      children.push(started.child)
      const server = { tree, pid: started.child.pid, ...demoOf(started.output) }
      await demoPrepared(scenario, server)
      servers.push(server)
    }
    process.stdout.write(`\n${cpus().length} CPUs, ${cpus()[0]?.model ?? "?"}; node ${process.version}; ${pgUrl === undefined ? "SQLite" : pgDelayMillis > 0 ? `PostgreSQL ${pgDelayMillis} ms away each way` : "PostgreSQL"}; ${scenario}; rate limits counted in ${rateLimitStore}; log level ${logLevel}; ${connections} connections, ${rounds} rounds of ${duration} s after ${warmup} s of warm-up each\n\n`)
    const results = await takeTurns(servers, load, { warmup, rounds, duration, pidOf: (server) => server.pid })
    process.stdout.write(turnsTable(results, (server) => server.tree, servers[0] as Server, "tree"))
  } finally {
    for (const child of children) child.kill("SIGTERM")
    await new Promise((resolve) => setTimeout(resolve, 500))
    for (const database of databases) await database.drop()
    rmSync(directory, { recursive: true, force: true })
  }
}

run().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
