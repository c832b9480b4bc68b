/**
 * `pnpm --filter @custody-relay/server run bench:logging`: what the default log level costs. Two relay servers, each
 * on its own SQLite file with the demo data, one at Info (the default: one JSON line per request) and one at Warn
 * (no line per request), each writing its output to a file as a deployment would (the bench never reads it while
 * it measures). BENCH_LEVELS (default Info,Warn) names the servers' levels, the last one the reference. GET account under autocannon, the two taking turns round by round so the machine's noise falls
 * on both; prints requests per second (median of rounds) and what Info costs against Warn. Asserts nothing.
 *
 * BENCH_RELAY=built runs dist/main.js with node (run `pnpm build` first); else from source with tsx.
 * BENCH_DURATION (seconds per round, default 5), BENCH_ROUNDS (default 5), BENCH_WARMUP (seconds, default 10),
 * BENCH_CONNECTIONS (default 10).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync } from "node:fs"
import { createRequire } from "node:module"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

interface AutocannonResult {
  readonly requests: { readonly average: number; readonly total: number }
  readonly non2xx: number
}
type Autocannon = (options: { readonly url: string; readonly connections: number; readonly duration: number; readonly headers?: Record<string, string> }) => Promise<AutocannonResult>
const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon

const duration = Number(process.env["BENCH_DURATION"] ?? 5)
const rounds = Number(process.env["BENCH_ROUNDS"] ?? 5)
const warmup = Number(process.env["BENCH_WARMUP"] ?? 10)
const connections = Number(process.env["BENCH_CONNECTIONS"] ?? 10)
const built = process.env["BENCH_RELAY"] === "built"
const tsx = fileURLToPath(new URL("../../../node_modules/.bin/tsx", import.meta.url))
const main = fileURLToPath(new URL(built ? "../dist/main.js" : "../src/main.ts", import.meta.url))
// BENCH_LEVELS=Warn,Warn runs the same level twice: what the two servers differ by with no difference between them.
const levels = (process.env["BENCH_LEVELS"] ?? "Info,Warn").split(",")
const command = built ? [process.execPath, main] : [tsx, "--conditions=@custody-relay/source", main]

const start = (logFile: string, env: Record<string, string>): Promise<{ child: ChildProcess; output: string }> =>
  new Promise((resolve, reject) => {
    const fd = openSync(logFile, "a")
    const child = spawn(command[0] ?? "node", command.slice(1), { env: { ...process.env, ...env }, stdio: ["ignore", fd, fd] })
    closeSync(fd)
    const poll = setInterval(() => {
      const output = readFileSync(logFile, "utf8")
      if (output.includes("custody-relay ready")) {
        clearInterval(poll)
        resolve({ child, output })
      }
    }, 50)
    child.once("exit", (code) => {
      clearInterval(poll)
      reject(new Error(`exited with ${code}:\n${readFileSync(logFile, "utf8")}`))
    })
  })

const grab = (output: string, pattern: RegExp): string => {
  const found = pattern.exec(output)?.[1]
  if (found === undefined) throw new Error(`not found: ${pattern}\n${output}`)
  return found
}

const run = async () => {
  const directory = mkdtempSync(join(tmpdir(), "relay-logging-bench-"))
  const servers: Array<{ level: string; child: ChildProcess; url: string; headers: Record<string, string>; account: string; log: string }> = []
  try {
    for (const level of levels) {
      const log = join(directory, `${servers.length}.log`)
      const started = await start(log, { RELAY_DATABASE: join(directory, `${servers.length}.db`), PORT: "0", RELAY_DEMO: "always", RELAY_LOG_LEVEL: level, RELAY_RATE_LIMIT: "1000000000" })
      servers.push({
        level: `${level} (server ${servers.length + 1})`,
        child: started.child,
        log,
        url: grab(started.output, /listening on (http:\/\/\S+)/),
        headers: { "x-api-key": grab(started.output, /admin\s+x-api-key: (\S+)/), "x-api-secret": grab(started.output, /admin\s+x-api-key: \S+\s+x-api-secret: (\S+)/) },
        account: grab(started.output, /account (\S+)\s+Treasury BTC/)
      })
    }
    process.stdout.write(`\n${cpus().length} CPUs, ${cpus()[0]?.model ?? "?"}; node ${process.version}; relay ${built ? "built, with node" : "from source with tsx"}; SQLite; GET account; ${connections} connections, ${rounds} rounds of ${duration} s after ${warmup} s of warm-up each; output to a file\n\n`)
    for (const server of servers) await autocannon({ url: `${server.url}/relay/v1/accounts/${server.account}`, connections, duration: warmup, headers: server.headers })
    const results = new Map<string, Array<number>>(servers.map((server) => [server.level, []]))
    let requestsAtFirst = 0
    const logBefore = statSync(servers[0]?.log ?? "").size
    for (let round = 0; round < rounds; round += 1) {
      for (const server of servers) {
        const result = await autocannon({ url: `${server.url}/relay/v1/accounts/${server.account}`, connections, duration, headers: server.headers })
        if (result.non2xx > 0) throw new Error(`${server.level}: ${result.non2xx} answers were not 2xx`)
        results.get(server.level)?.push(result.requests.average)
        if (server === servers[0]) requestsAtFirst += result.requests.total
      }
    }
    const bytesPerRequest = (statSync(servers[0]?.log ?? "").size - logBefore) / requestsAtFirst
    const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0
    const last = median(results.get(servers.at(-1)?.level ?? "") ?? [])
    process.stdout.write(`| log level | req/s (median) | min | max | vs ${servers.at(-1)?.level} |\n|---|---|---|---|---|\n`)
    for (const [level, values] of results) {
      process.stdout.write(`| ${level} | ${median(values).toFixed(0)} | ${Math.min(...values).toFixed(0)} | ${Math.max(...values).toFixed(0)} | ${(median(values) / last).toFixed(3)} |\n`)
    }
    process.stdout.write(`\nserver 1 wrote ${bytesPerRequest.toFixed(0)} bytes of log per request\n`)
  } finally {
    for (const server of servers) server.child.kill("SIGTERM")
    await new Promise((resolve) => setTimeout(resolve, 500))
    rmSync(directory, { recursive: true, force: true })
  }
}

run().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
