/**
 * `pnpm --filter @custody-relay/server run bench:rate-limit`: what counting rate-limit windows costs a read on
 * PostgreSQL, by store. One relay server per store (memory, database, synced, redis) on one PostgreSQL database, GET
 * account under autocannon, the servers taking turns round by round so the machine's noise falls on all of them;
 * prints requests per second (median of rounds) and each store's ratio to `memory` (no shared counting at all).
 * It measures and prints; it asserts nothing.
 *
 * Needs BENCH_PG_URL (a server where it may create and drop a database, e.g. postgres://postgres@127.0.0.1:5432/postgres)
 * and BENCH_REDIS_URL (default redis://127.0.0.1:6379). BENCH_DURATION (seconds per round, default 5),
 * BENCH_ROUNDS (default 3), BENCH_WARMUP (seconds, default 10), BENCH_CONNECTIONS (default 10).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createRequire } from "node:module"
import { cpus } from "node:os"
import { fileURLToPath } from "node:url"
import pg from "pg"

interface AutocannonResult {
  readonly requests: { readonly average: number }
  readonly non2xx: number
}
type Autocannon = (options: { readonly url: string; readonly connections: number; readonly duration: number; readonly headers?: Record<string, string> }) => Promise<AutocannonResult>
const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon

const pgUrl = process.env["BENCH_PG_URL"]
const redisUrl = process.env["BENCH_REDIS_URL"] ?? "redis://127.0.0.1:6379"
const duration = Number(process.env["BENCH_DURATION"] ?? 5)
const rounds = Number(process.env["BENCH_ROUNDS"] ?? 3)
const warmup = Number(process.env["BENCH_WARMUP"] ?? 10)
const connections = Number(process.env["BENCH_CONNECTIONS"] ?? 10)
const tsx = fileURLToPath(new URL("../../../node_modules/.bin/tsx", import.meta.url))
const serverMain = fileURLToPath(new URL("../src/main.ts", import.meta.url))

const start = (env: Record<string, string>): Promise<{ child: ChildProcess; output: string }> =>
  new Promise((resolve, reject) => {
    const child = spawn(tsx, ["--conditions=@custody-relay/source", serverMain], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    const collect = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      if (output.includes("custody-relay ready")) resolve({ child, output })
    }
    child.stdout?.on("data", collect)
    child.stderr?.on("data", collect)
    child.once("exit", (code) => reject(new Error(`exited with ${code}:\n${output}`)))
  })

const grab = (output: string, pattern: RegExp): string => {
  const found = pattern.exec(output)?.[1]
  if (found === undefined) throw new Error(`not found: ${pattern}\n${output}`)
  return found
}

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
  try {
    // The first server seeds the demo; the others serve the same data.
    for (const store of ["memory", "database", "synced", "redis"]) {
      const started = await start({ ...common, RELAY_RATE_LIMIT_STORE: store, RELAY_REDIS_URL: redisUrl, RELAY_DEMO: servers.length === 0 ? "always" : "never" })
      const seeded = servers[0]
      servers.push({
        store,
        child: started.child,
        url: grab(started.output, /listening on (http:\/\/\S+)/),
        headers: seeded?.headers ?? { "x-api-key": grab(started.output, /admin\s+x-api-key: (\S+)/), "x-api-secret": grab(started.output, /admin\s+x-api-key: \S+\s+x-api-secret: (\S+)/) },
        account: seeded?.account ?? grab(started.output, /account (\S+)\s+Treasury BTC/)
      })
    }
    process.stdout.write(`\n${cpus().length} CPUs, ${cpus()[0]?.model ?? "?"}; node ${process.version}; PostgreSQL; GET account; ${connections} connections, ${rounds} rounds of ${duration} s after ${warmup} s of warm-up each\n\n`)
    for (const server of servers) await autocannon({ url: `${server.url}/relay/v1/accounts/${server.account}`, connections, duration: warmup, headers: server.headers })
    const results = new Map<string, Array<number>>(servers.map((server) => [server.store, []]))
    for (let round = 0; round < rounds; round += 1) {
      for (const server of servers) {
        const result = await autocannon({ url: `${server.url}/relay/v1/accounts/${server.account}`, connections, duration, headers: server.headers })
        if (result.non2xx > 0) throw new Error(`${server.store}: ${result.non2xx} answers were not 2xx`)
        results.get(server.store)?.push(result.requests.average)
      }
    }
    const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0
    const memory = median(results.get("memory") ?? [])
    process.stdout.write("| store | req/s (median) | min | max | vs memory |\n|---|---|---|---|---|\n")
    for (const [store, values] of results) {
      process.stdout.write(`| ${store} | ${median(values).toFixed(0)} | ${Math.min(...values).toFixed(0)} | ${Math.max(...values).toFixed(0)} | ${(median(values) / memory).toFixed(2)} |\n`)
    }
  } finally {
    for (const server of servers) server.child.kill("SIGTERM")
    await new Promise((resolve) => setTimeout(resolve, 1000))
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin.end()
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
