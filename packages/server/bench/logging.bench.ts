/**
 * `pnpm --filter @custody-relay/server run bench:logging`: what the default log level costs. Two relay servers, each
 * on its own SQLite file with the demo data, one at Info (the default: a line per command, per refusal and per slow
 * read, none for a successful read; see http's RequestLine) and one at Warn (no line per request), each writing
 * its output to a file as a deployment would (the bench never reads it while it measures). BENCH_LEVELS (default
 * Info,Warn) names the servers' levels, the last one the reference.
 * BENCH_SCENARIO (account, list or initiate; default account) under autocannon, the servers taking turns round by
 * round so the machine's noise falls on all; prints requests per second (median of rounds), what each level costs
 * against the last, and the bytes of log the first server wrote per request. Asserts nothing.
 *
 * BENCH_RELAY=built runs dist/main.js with node (run `pnpm build` first); else from source with tsx.
 * BENCH_LOG_SINK=pipe sends each server's output through a pipe to a `cat` that writes the file, as a container
 * runtime or a service manager reads it (default: file, the server writes the file itself).
 * BENCH_DURATION (seconds per round, default 5), BENCH_ROUNDS (default 5), BENCH_WARMUP (seconds, default 10),
 * BENCH_CONNECTIONS (default 10).
 */
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type DemoServer, demoLoad, demoOf, demoScenarioOf, READY, startServer, takeTurns, turnsTable, turnSettingsFromEnv } from "./BenchProcess.js"

const { duration, rounds, warmup, connections } = turnSettingsFromEnv({ rounds: 5 })
const scenario = demoScenarioOf(process.env["BENCH_SCENARIO"], "account")
const built = process.env["BENCH_RELAY"] === "built"
const tsx = fileURLToPath(new URL("../../../node_modules/.bin/tsx", import.meta.url))
const main = fileURLToPath(new URL(built ? "../dist/main.js" : "../src/main.ts", import.meta.url))
// BENCH_LEVELS=Warn,Warn runs the same level twice: what the two servers differ by with no difference between them.
const levels = (process.env["BENCH_LEVELS"] ?? "Info,Warn").split(",")
const sink = process.env["BENCH_LOG_SINK"] ?? "file"
if (sink !== "file" && sink !== "pipe") throw new Error(`BENCH_LOG_SINK must be file or pipe, not ${sink}`)
const command: [string, ...Array<string>] = built ? [process.execPath, main] : [tsx, "--conditions=@custody-relay/source", main]

interface Server extends DemoServer {
  readonly level: string
  readonly child: ChildProcess
  readonly log: string
}

const run = async () => {
  const directory = mkdtempSync(join(tmpdir(), "relay-logging-bench-"))
  const servers: Array<Server> = []
  try {
    for (const level of levels) {
      const log = join(directory, `${servers.length}.log`)
      const started = await startServer({ command, logFile: log, ready: READY, through: sink, env: { RELAY_DATABASE: join(directory, `${servers.length}.db`), PORT: "0", RELAY_DEMO: "always", RELAY_LOG_LEVEL: level, RELAY_RATE_LIMIT: "1000000000" } })
      servers.push({ level: `${level} (server ${servers.length + 1})`, child: started.child, log, ...demoOf(started.output) })
    }
    process.stdout.write(`\n${cpus().length} CPUs, ${cpus()[0]?.model ?? "?"}; node ${process.version}; relay ${built ? "built, with node" : "from source with tsx"}; SQLite; ${scenario}; ${connections} connections, ${rounds} rounds of ${duration} s after ${warmup} s of warm-up each; output ${sink === "pipe" ? "through a pipe to cat, to a file" : "to a file"}\n\n`)
    const logBefore = statSync(servers[0]?.log ?? "").size
    // Every request of server 1, warm-up included, for the bytes of log each one wrote.
    let requestsAtFirst = 0
    const load = async (server: Server, seconds: number) => {
      const result = await demoLoad(scenario, server, { seconds, connections })
      if (server === servers[0]) requestsAtFirst += result.requests.total
      return result
    }
    // Built, the server is the process started; from source it runs in a child of tsx's, out of the bench's sight.
    const results = await takeTurns(servers, load, { warmup, rounds, duration, pidOf: (server) => built ? server.child.pid : undefined })
    const bytesPerRequest = (statSync(servers[0]?.log ?? "").size - logBefore) / requestsAtFirst
    process.stdout.write(turnsTable(results, (server) => server.level, servers.at(-1) as Server, "log level"))
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
