/**
 * `pnpm --filter @custody-relay/server run bench:pair`: two builds of the relay side by side, to measure a change
 * against its parent in one run. Each checkout named in BENCH_PAIR (comma-separated paths to work trees, built
 * with `pnpm build`) serves its own database with the demo data (`node packages/server/dist/main.js`, output to a
 * file); the servers take turns, round by round, under autocannon, so the machine's noise falls on all of them.
 * Prints requests per second (median of rounds, min, max) and each one's ratio to the first. Asserts nothing.
 *
 *   git worktree add ../before HEAD~1 && (cd ../before && pnpm install && pnpm build)
 *   BENCH_PAIR=$PWD/../before,$PWD BENCH_SCENARIO=initiate pnpm --filter @custody-relay/server run bench:pair
 *
 * BENCH_SCENARIO: account (GET an account, default), list (GET the accounts), initiate (POST, to the whitelisted
 * address). BENCH_PG_URL: each server on a PostgreSQL database of its own (created and dropped here; rate limits in
 * memory) instead of a SQLite file. BENCH_LOG_LEVEL (default Info), BENCH_DURATION (seconds per round, default 5),
 * BENCH_ROUNDS (default 5), BENCH_WARMUP (seconds, default 10), BENCH_CONNECTIONS (default 10).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"

interface AutocannonResult {
  readonly requests: { readonly average: number }
  readonly non2xx: number
}
type Autocannon = (options: {
  readonly url: string
  readonly connections: number
  readonly duration: number
  readonly method?: string
  readonly headers?: Record<string, string>
  readonly body?: string
}) => Promise<AutocannonResult>
const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon

const trees = (process.env["BENCH_PAIR"] ?? "").split(",").filter((tree) => tree !== "")
const scenario = process.env["BENCH_SCENARIO"] ?? "account"
const pgUrl = process.env["BENCH_PG_URL"]
const logLevel = process.env["BENCH_LOG_LEVEL"] ?? "Info"
const duration = Number(process.env["BENCH_DURATION"] ?? 5)
const rounds = Number(process.env["BENCH_ROUNDS"] ?? 5)
const warmup = Number(process.env["BENCH_WARMUP"] ?? 10)
const connections = Number(process.env["BENCH_CONNECTIONS"] ?? 10)

interface Server {
  readonly tree: string
  readonly child: ChildProcess
  readonly url: string
  readonly headers: Record<string, string>
  readonly account: string
  readonly whitelisted: string
}

const start = (tree: string, logFile: string, env: Record<string, string>): Promise<string> =>
  new Promise((resolve, reject) => {
    const fd = openSync(logFile, "a")
    const child = spawn(process.execPath, [join(tree, "packages/server/dist/main.js")], { env: { ...process.env, ...env }, stdio: ["ignore", fd, fd] })
    closeSync(fd)
    children.push(child)
    const poll = setInterval(() => {
      const output = readFileSync(logFile, "utf8")
      if (output.includes("custody-relay ready")) {
        clearInterval(poll)
        resolve(output)
      }
    }, 50)
    child.once("exit", (code) => {
      clearInterval(poll)
      reject(new Error(`${tree} exited with ${code}:\n${readFileSync(logFile, "utf8")}`))
    })
  })
const children: Array<ChildProcess> = []

const grab = (output: string, pattern: RegExp): string => {
  const found = pattern.exec(output)?.[1]
  if (found === undefined) throw new Error(`not found: ${pattern}\n${output}`)
  return found
}

const load = (server: Server, seconds: number) => {
  if (scenario === "initiate") {
    const body = JSON.stringify({ sourceAccountId: server.account, destinationId: server.whitelisted, destinationType: "external", amount: "0.00001", assetType: "BTC" })
    return autocannon({ url: `${server.url}/relay/v1/transactions/initiate`, connections, duration: seconds, method: "POST", headers: { ...server.headers, "content-type": "application/json" }, body })
  }
  const path = scenario === "list" ? "/relay/v1/accounts" : `/relay/v1/accounts/${server.account}`
  return autocannon({ url: server.url + path, connections, duration: seconds, headers: server.headers })
}

const run = async () => {
  if (trees.length === 0) {
    process.stdout.write("set BENCH_PAIR to the work trees to compare, comma-separated (each built with pnpm build)\n")
    process.exit(2)
  }
  const directory = mkdtempSync(join(tmpdir(), "relay-pair-"))
  const admin = pgUrl === undefined ? undefined : new pg.Client({ connectionString: pgUrl })
  await admin?.connect()
  const databases: Array<string> = []
  try {
    const servers: Array<Server> = []
    for (const tree of trees) {
      let database = join(directory, `${servers.length}.db`)
      if (admin !== undefined && pgUrl !== undefined) {
        const name = `relay_pair_${process.pid}_${servers.length}`
        await admin.query(`CREATE DATABASE ${name}`)
        databases.push(name)
        const url = new URL(pgUrl)
        url.pathname = `/${name}`
        database = url.toString()
      }
      const output = await start(tree, join(directory, `${servers.length}.log`), {
        RELAY_DATABASE: database,
        RELAY_RATE_LIMIT_STORE: "memory",
        PORT: "0",
        RELAY_DEMO: "always",
        RELAY_LOG_LEVEL: logLevel,
        RELAY_RATE_LIMIT: "1000000000"
      })
      servers.push({
        tree,
        child: children.at(-1) as ChildProcess,
        url: grab(output, /listening on (http:\/\/\S+)/),
        headers: { "x-api-key": grab(output, /admin\s+x-api-key: (\S+)/), "x-api-secret": grab(output, /admin\s+x-api-key: \S+\s+x-api-secret: (\S+)/) },
        account: grab(output, /account (\S+)\s+Treasury BTC/),
        whitelisted: grab(output, /whitelisted address (\S+)/)
      })
    }
    process.stdout.write(`\n${cpus().length} CPUs, ${cpus()[0]?.model ?? "?"}; node ${process.version}; ${pgUrl === undefined ? "SQLite" : "PostgreSQL"}; ${scenario}; log level ${logLevel}; ${connections} connections, ${rounds} rounds of ${duration} s after ${warmup} s of warm-up each\n\n`)
    for (const server of servers) await load(server, warmup)
    const results = new Map<Server, Array<number>>(servers.map((server) => [server, []]))
    for (let round = 0; round < rounds; round += 1) {
      for (const server of servers) {
        const result = await load(server, duration)
        if (result.non2xx > 0) throw new Error(`${server.tree}: ${result.non2xx} answers were not 2xx`)
        results.get(server)?.push(result.requests.average)
      }
    }
    const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0
    const first = median(results.get(servers[0] as Server) ?? [])
    process.stdout.write("| tree | req/s (median) | min | max | vs the first |\n|---|---|---|---|---|\n")
    for (const [server, values] of results) {
      process.stdout.write(`| ${server.tree} | ${median(values).toFixed(0)} | ${Math.min(...values).toFixed(0)} | ${Math.max(...values).toFixed(0)} | ${(median(values) / first).toFixed(3)} |\n`)
    }
  } finally {
    for (const child of children) child.kill("SIGTERM")
    await new Promise((resolve) => setTimeout(resolve, 500))
    for (const name of databases) await admin?.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin?.end()
    rmSync(directory, { recursive: true, force: true })
  }
}

run().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
