/**
 * `pnpm --filter @custody-relay/server run bench:logging`: what the default log level costs. Two relay servers, each
 * on its own SQLite file with the demo data, one at Info (the default: a line per command, per refusal and per slow
 * read, none for a successful read; see http's RequestLine) and one at Warn (no line per request), each writing
 * its output to a file as a deployment would (the bench never reads it while it measures). BENCH_LEVELS (default
 * Info,Warn) names the servers' levels, the last one the reference.
 * BENCH_SCENARIO (account, list, initiate, initiate-keyed or transactions; default account) under autocannon, the servers taking
 * turns round by round so the machine's noise falls on all; prints requests per second (median of rounds), what each
 * level costs against the last, and the bytes of log the first server wrote per request. Asserts nothing.
 *
 * BENCH_RELAY=built runs dist/main.js with node (run `pnpm build` first); else from source (BenchProcess.fromSource).
 * BENCH_LOG_SINK=pipe sends each server's output through a pipe to a `cat` that writes the file, as a container
 * runtime or a service manager reads it (default: file, the server writes the file itself).
 * BENCH_DURATION (seconds per round, default 5), BENCH_ROUNDS (default 5), BENCH_WARMUP (seconds, default 10),
 * BENCH_CONNECTIONS (default 10).
 *
 * Two identical servers differ by a few percent a request (each process's heap and code land differently), more
 * than a line costs, so the turns above bound the line's cost but cannot resolve it. BENCH_WHERE=profile measures it
 * directly instead: one server from source at the first of BENCH_LEVELS, under V8's sampling profiler (`--cpu-prof`,
 * a sample every 100 µs), loaded for BENCH_WARMUP and then BENCH_DURATION seconds; of the samples of the last
 * BENCH_DURATION seconds in which the server was busy, the share spent in http's JsonLogLines module (building,
 * gathering and writing lines) and everything it called. From source only: in the built chunks a module's
 * functions carry no name of it.
 */
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { cpuMicros, type DemoServer, demoLoad, demoOf, demoPrepared, demoScenarioOf, fromSource, READY, startServer, takeTurns, turnsTable, turnSettingsFromEnv } from "./BenchProcess.js"

const { duration, rounds, warmup, connections } = turnSettingsFromEnv({ rounds: 5 })
const scenario = demoScenarioOf(process.env["BENCH_SCENARIO"], "account")
const built = process.env["BENCH_RELAY"] === "built"
const main = fileURLToPath(new URL(built ? "../dist/main.js" : "../src/main.ts", import.meta.url))
// BENCH_LEVELS=Warn,Warn runs the same level twice: what the two servers differ by with no difference between them.
const levels = (process.env["BENCH_LEVELS"] ?? "Info,Warn").split(",")
const sink = process.env["BENCH_LOG_SINK"] ?? "file"
if (sink !== "file" && sink !== "pipe") throw new Error(`BENCH_LOG_SINK must be file or pipe, not ${sink}`)
const command: [string, ...Array<string>] = built ? [process.execPath, main] : [...fromSource, main]

/** A server's environment: its own SQLite file with the demo data, at `level`, never rate-limited. */
const serverEnv = (database: string, level: string) => ({ RELAY_DATABASE: database, PORT: "0", RELAY_DEMO: "always", RELAY_LOG_LEVEL: level, RELAY_RATE_LIMIT: "1000000000" })
const outputText = sink === "pipe" ? "through a pipe to cat, to a file" : "to a file"

const where = process.env["BENCH_WHERE"] ?? "servers"
if (where !== "servers" && where !== "profile") throw new Error(`BENCH_WHERE must be servers or profile, not ${where}`)

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
      const started = await startServer({ command, logFile: log, ready: READY, through: sink, env: serverEnv(join(directory, `${servers.length}.db`), level) })
      const server = { level: `${level} (server ${servers.length + 1})`, child: started.child, log, ...demoOf(started.output) }
      await demoPrepared(scenario, server)
      servers.push(server)
    }
    process.stdout.write(`\n${cpus().length} CPUs, ${cpus()[0]?.model ?? "?"}; node ${process.version}; relay ${built ? "built, with node" : "from source"}; SQLite; ${scenario}; ${connections} connections, ${rounds} rounds of ${duration} s after ${warmup} s of warm-up each; output ${outputText}\n\n`)
    const logBefore = statSync(servers[0]?.log ?? "").size
    // Every request of server 1, warm-up included, for the bytes of log each one wrote.
    let requestsAtFirst = 0
    const load = async (server: Server, seconds: number) => {
      const result = await demoLoad(scenario, server, { seconds, connections })
      if (server === servers[0]) requestsAtFirst += result.requests.total
      return result
    }
    const results = await takeTurns(servers, load, { warmup, rounds, duration, pidOf: (server) => server.child.pid })
    const bytesPerRequest = (statSync(servers[0]?.log ?? "").size - logBefore) / requestsAtFirst
    process.stdout.write(turnsTable(results, (server) => server.level, servers.at(-1) as Server, "log level"))
    process.stdout.write(`\nserver 1 wrote ${bytesPerRequest.toFixed(0)} bytes of log per request\n`)
  } finally {
    for (const server of servers) server.child.kill("SIGTERM")
    await new Promise((resolve) => setTimeout(resolve, 500))
    rmSync(directory, { recursive: true, force: true })
  }
}

interface CpuProfile {
  readonly nodes: ReadonlyArray<{ readonly id: number; readonly callFrame: { readonly url: string; readonly functionName: string }; readonly children?: ReadonlyArray<number> }>
  readonly startTime: number
  readonly endTime: number
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

/**
 * Of `profile`'s busy samples (idle ones left out) in its last `windowMicros`, the share taken in functions of
 * modules whose URL matches `module`, or in what they called.
 */
const shareIn = (profile: CpuProfile, module: RegExp, windowMicros: number): number => {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]))
  const parents = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id)
  const within = (id: number) => {
    for (let at: number | undefined = id; at !== undefined; at = parents.get(at)) {
      if (module.test(nodes.get(at)?.callFrame.url ?? "")) return true
    }
    return false
  }
  // Each delta is the time from the sample before (from startTime for the first); a sample stands for the time until
  // the next one.
  let busy = 0
  let inModule = 0
  let at = profile.startTime
  profile.samples.forEach((id, index) => {
    at += profile.timeDeltas[index] ?? 0
    const micros = profile.timeDeltas[index + 1] ?? 0
    if (at < profile.endTime - windowMicros || nodes.get(id)?.callFrame.functionName === "(idle)") return
    busy += micros
    if (within(id)) inModule += micros
  })
  return inModule / busy
}

const profiled = async () => {
  if (built) throw new Error("BENCH_WHERE=profile runs the server from source (the built chunks carry no module names)")
  const directory = mkdtempSync(join(tmpdir(), "relay-logging-profile-"))
  const level = levels[0] ?? "Info"
  try {
    const started = await startServer({
      command: [process.execPath, "--import", "tsx", "--conditions=@custody-relay/source", "--cpu-prof", `--cpu-prof-dir=${directory}`, "--cpu-prof-interval=100", main],
      logFile: join(directory, "server.log"),
      ready: READY,
      through: sink,
      env: serverEnv(join(directory, "relay.db"), level)
    })
    const server = demoOf(started.output)
    await demoPrepared(scenario, server)
    await demoLoad(scenario, server, { seconds: warmup, connections })
    const before = cpuMicros(started.child.pid)
    const result = await demoLoad(scenario, server, { seconds: duration, connections })
    const cpuPerRequest = ((cpuMicros(started.child.pid) ?? 0) - (before ?? 0)) / result.requests.total
    const exited = new Promise((resolve) => started.child.once("exit", resolve))
    started.child.kill("SIGINT")
    await exited
    // The main thread's profile (thread 0); the checkpoint worker writes one of its own.
    const file = readdirSync(directory).find((name) => /\.0\.\d+\.cpuprofile$/.test(name))
    if (file === undefined) throw new Error(`no profile of the main thread in ${directory}: ${readdirSync(directory).join(", ")}`)
    const profile = JSON.parse(readFileSync(join(directory, file), "utf8")) as CpuProfile
    const share = shareIn(profile, /\/JsonLogLines\.ts$/, duration * 1_000_000)
    process.stdout.write(
      `\n${cpus().length} CPUs, ${cpus()[0]?.model ?? "?"}; node ${process.version}; relay from source (tsx's loader), under --cpu-prof; SQLite; ${scenario}; ${connections} connections; ${warmup} s of warm-up, then ${duration} s profiled; log level ${level}; output ${outputText}\n\n` +
        `${result.requests.average.toFixed(0)} requests a second; CPU ${cpuPerRequest.toFixed(1)} µs a request (every thread)\n` +
        `the main thread's busy time in JsonLogLines.ts and what it called: ${(share * 100).toFixed(2)}%\n`
    )
  } finally {
    rmSync(directory, { recursive: true, force: true })
  }
}

;(where === "profile" ? profiled : run)().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
