/**
 * `pnpm --filter @custody-relay/server run bench:statements`: where a request's time goes in SQLite. The built relay
 * server (`pnpm build` first) on a SQLite file with the demo data, its statements timed by a preload
 * (bench/statementTimes.mjs), under autocannon for one scenario. Prints, per request: each statement the server ran
 * on its main thread, on which connection, how many times, its microseconds a run and a request; then the total, and
 * the server's CPU time a request (its threads, user and system, from /proc) to set it against. Asserts nothing.
 * A request's first statement also carries what any first read costs (caches gone cold since the last request, the
 * read's locks), so a statement's figure is not what leaving it out would save (docs/benchmarks.md).
 *
 * BENCH_SCENARIO: initiate (default), initiate-keyed (each under an Idempotency-Key of its own), account (GET an
 * account), list (GET the accounts) or transactions (GET a first page of twenty). BENCH_WARMUP (seconds, default 10; not counted), BENCH_DURATION (seconds measured, default 5),
 * BENCH_CONNECTIONS (default 10), BENCH_LOG_LEVEL (default Info). Each statement carries the timing's own cost (two
 * clock readings and a map update, outside the figures), so the server is a little slower than without it: compare
 * runs of this bench with each other, not with `bench:http`.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { cpuMicros, demoLoad, demoOf, demoPrepared, demoScenarioOf, READY, startServer, turnSettingsFromEnv } from "./BenchProcess.js"

const scenario = demoScenarioOf(process.env["BENCH_SCENARIO"], "initiate")
const { duration, warmup, connections } = turnSettingsFromEnv({ rounds: 1 })
const logLevel = process.env["BENCH_LOG_LEVEL"] ?? "Info"
const main = fileURLToPath(new URL("../dist/main.js", import.meta.url))
const preload = fileURLToPath(new URL("./statementTimes.mjs", import.meta.url))

/** Asks the preload for what it timed since the last ask, and waits until it has written it. */
const takeTimes = async (pid: number, file: string): Promise<Array<[string, string, number, number]>> => {
  const before = existsSync(file) ? statSync(file).mtimeMs : -1
  process.kill(pid, "SIGUSR2")
  for (let waited = 0; waited < 5_000; waited += 20) {
    if (existsSync(file) && statSync(file).mtimeMs !== before) break
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  const text = readFileSync(file, "utf8")
  return text === "" ? [] : text.split("\n").map((line) => JSON.parse(line) as [string, string, number, number])
}

const run = async () => {
  if (!existsSync(main)) throw new Error("run `pnpm build` first: this bench runs the built server")
  const directory = mkdtempSync(join(tmpdir(), "relay-statements-"))
  const timesFile = join(directory, "times.jsonl")
  const started = await startServer({
    command: [process.execPath, "--import", preload, main],
    logFile: join(directory, "server.log"),
    ready: READY,
    env: {
      RELAY_DATABASE: join(directory, "relay.db"),
      RELAY_RATE_LIMIT_STORE: "memory",
      PORT: "0",
      RELAY_DEMO: "always",
      RELAY_LOG_LEVEL: logLevel,
      RELAY_RATE_LIMIT: "1000000000",
      RELAY_BENCH_STATEMENTS_OUT: timesFile
    }
  })
  const pid = started.child.pid
  try {
    if (pid === undefined) throw new Error("the server has no pid")
    const server = demoOf(started.output)
    await demoPrepared(scenario, server)
    await demoLoad(scenario, server, { seconds: warmup, connections })
    await takeTimes(pid, timesFile)
    const cpuBefore = cpuMicros(pid) ?? Number.NaN
    const result = await demoLoad(scenario, server, { seconds: duration, connections })
    const cpu = (cpuMicros(pid) ?? Number.NaN) - cpuBefore
    const times = await takeTimes(pid, timesFile)
    if (result.non2xx + result.errors > 0) throw new Error(`${result.non2xx} answers were not 2xx, ${result.errors} errors`)
    const requests = result.requests.total
    process.stdout.write(
      `\n${cpus().length} CPUs, ${cpus()[0]?.model ?? "?"}; node ${process.version}; SQLite file; ${scenario}; log level ${logLevel}; ` +
        `${connections} connections, ${duration} s after ${warmup} s of warm-up\n\n` +
        `${requests} requests (${(requests / duration).toFixed(0)} a second); the server's CPU time ${(cpu / requests).toFixed(1)} µs a request\n\n`
    )
    const rows = times
      .map(([connection, sql, runs, nanos]) => ({ connection, sql, perRequest: runs / requests, microsARun: nanos / runs / 1000, microsARequest: nanos / requests / 1000 }))
      .sort((a, b) => b.microsARequest - a.microsARequest)
    const shown = (sql: string) => (sql.length > 110 ? `${sql.slice(0, 107)}...` : sql).replaceAll("|", "\\|")
    const lines = [
      "| statement | connection | runs a request | µs a run | µs a request |",
      "|---|---|---|---|---|",
      ...rows.map((row) => `| \`${shown(row.sql)}\` | ${row.connection} | ${row.perRequest.toFixed(2)} | ${row.microsARun.toFixed(1)} | ${row.microsARequest.toFixed(1)} |`)
    ]
    const total = rows.reduce((sum, row) => sum + row.microsARequest, 0)
    lines.push(`| all statements | | ${rows.reduce((sum, row) => sum + row.perRequest, 0).toFixed(2)} | | **${total.toFixed(1)}** (${((total / (cpu / requests)) * 100).toFixed(0)}% of the server's CPU time) |`)
    process.stdout.write(`${lines.join("\n")}\n`)
  } finally {
    started.child.kill("SIGTERM")
    await new Promise((resolve) => setTimeout(resolve, 500))
    rmSync(directory, { recursive: true, force: true })
  }
}

run().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
