/**
 * `pnpm bench:http`: the relay server (`pnpm start`'s program: node:http adapter, handler, SQLite file) against
 * a minimal hand-written baseline (bench/baseline.ts) on the same database file, side by side in one run, for
 * GET account, GET list and POST initiate. Prints one table with every server of the run side by side (requests a
 * second, the ratios the goals read: relay / baseline, bound / baseline, relay again / relay, relay / each peer),
 * one of their latencies, and one of their CPU time a request with the same ratios (BenchProcess.sideBySideTables).
 * It measures and prints; it asserts nothing (never a timed test).
 *
 * Every server of a scenario is warmed up, then they take turns for BENCH_ROUNDS rounds (default 3), so the
 * machine's noise falls on all of them; each figure is a server's median round, and an answer other than 2xx stops
 * the bench. A single run of one server after another moved the peers' figures by a quarter between runs.
 *
 * A second relay server, the same program on a file of its own ("relay again"), takes its turns too: what two
 * identical servers differ by in this run, so a ratio a few points from a goal can be read against the machine's
 * noise (the two files differ only in that the baseline's initiations go to the first relay's). BENCH_AGAIN=0
 * leaves it out.
 *
 * Settings: BENCH_DURATION (seconds per round, default 10), BENCH_ROUNDS (default 3), BENCH_WARMUP (seconds of
 * unmeasured load before the rounds, default 20: the relay's Effect code needs tens of thousands of calls before
 * the JIT settles), BENCH_CONNECTIONS (default 10), BENCH_SCENARIOS (which to run, comma-separated names as printed,
 * e.g. "POST initiate"; default all), BENCH_PEERS=0 (leaves the peers out), BENCH_LOG_LEVEL (the relay's
 * RELAY_LOG_LEVEL, default Info, the server's own default: one log line per request; each server's output goes
 * to a file in the temporary directory, never read by the bench while it measures).
 *
 * It also runs a bound (server/bench/memoryRelay.ts): the same server on the in-memory storage, no SQL at all, sent
 * the same request on its own demo data. Its ratio to the baseline is the most the relay could reach on that
 * request if storage cost nothing.
 *
 * And the peers (../shared/bench-peer, when it is there, or BENCH_PEER=<dir>): the conventional Fastify + Kysely +
 * zod service a team would write instead, and the same with its prepared-statement cache, each on its own seeded
 * SQLite file, installed with `npm ci` into a temporary copy. They are references to beat, run as they come.
 */
import type { ChildProcess } from "node:child_process"
import { execFileSync } from "node:child_process"
import { cpSync, existsSync, mkdtempSync, rmSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { sourceLoader } from "../test/ServerProcess.js"
import {
  autocannon,
  type AutocannonResult,
  demoInitiation,
  demoOf,
  fromSource,
  grab,
  type Quotient,
  READY,
  type ScenarioMedians,
  scenarioMedians,
  sideBySideTables,
  startServer,
  takeTurns
} from "./BenchProcess.js"

const duration = Number(process.env["BENCH_DURATION"] ?? 10)
// Rounds in which the servers take turns (BenchProcess.takeTurns); each figure is the server's median round.
const rounds = Number(process.env["BENCH_ROUNDS"] ?? 3)
const warmup = Number(process.env["BENCH_WARMUP"] ?? 20)
const connections = Number(process.env["BENCH_CONNECTIONS"] ?? 10)
// The server's default level (one line per request at Info): the goals are measured as a deployment runs by default.
const logLevel = process.env["BENCH_LOG_LEVEL"] ?? "Info"

// Every server is one node process (`fromSource` for the TypeScript ones), so the bench reads each one's CPU time from
// its own pid.
const serverMain = fileURLToPath(new URL("../src/main.ts", import.meta.url))
// BENCH_RELAY=built runs the relay as a deployment would: plain node on the tsup output (run `pnpm build` first).
const builtRelay = process.env["BENCH_RELAY"] === "built"
const builtServerMain = fileURLToPath(new URL("../dist/main.js", import.meta.url))
const baselineMain = fileURLToPath(new URL("./baseline.ts", import.meta.url))
const memoryRelayMain = fileURLToPath(new URL("./memoryRelay.ts", import.meta.url))
const peerSource = process.env["BENCH_PEER"] ?? fileURLToPath(new URL("../../../../shared/bench-peer", import.meta.url))
const again = process.env["BENCH_AGAIN"] !== "0"

const PEER = "peer (Fastify, Kysely, zod)"
const PEER_CACHED = "peer + statement cache"
/** The servers of a run, in the order of the table's columns. */
const SERVERS = ["relay", "baseline", "bound", "relay again", PEER, PEER_CACHED]
/** What the goals read: each against the baseline, the run's noise, and the relay against each peer. */
const QUOTIENTS: ReadonlyArray<Quotient> = [
  { heading: "relay / baseline", numerator: "relay", denominator: "baseline" },
  { heading: "bound / baseline", numerator: "bound", denominator: "baseline" },
  { heading: "relay again / relay (the run's noise)", numerator: "relay again", denominator: "relay" },
  { heading: "relay / peer", numerator: "relay", denominator: PEER },
  { heading: "relay / (peer + cache)", numerator: "relay", denominator: PEER_CACHED }
]

interface Peer {
  readonly name: string
  readonly child: ChildProcess
  readonly url: string
  readonly headers: Record<string, string>
  readonly account: string
  readonly destination: string
}

/** What a relay server printed on its first start: its URL, credentials and demo ids. */
type Demo = ReturnType<typeof demoOf>

/** One server's URL for a scenario, with its credentials and body, and its process. */
interface Target {
  readonly name: string
  readonly url: string
  readonly headers: Record<string, string>
  readonly body: string | undefined
  readonly pid: number | undefined
}

/** The peer (README of bench-peer): a copy installed with its lockfile, one server per variant, its ready line read. */
const startPeers = async (directory: string): Promise<ReadonlyArray<Peer>> => {
  if (!existsSync(join(peerSource, "package.json"))) return []
  const copy = join(directory, "bench-peer")
  cpSync(peerSource, copy, { recursive: true, filter: (path) => !path.includes("node_modules") })
  execFileSync("npm", ["ci", "--silent", "--no-audit", "--no-fund"], { cwd: copy, stdio: "ignore" })
  const variants = [[PEER, {}], [PEER_CACHED, { PEER_STMT_CACHE: "1" }]] as const
  const peers: Array<Peer> = []
  for (const [name, env] of variants) {
    const started = await start(join(directory, `peer-${peers.length}.log`), ["src/fastify.ts"], { PEER_DATABASE: join(directory, `peer-${peers.length}.db`), PORT: "0", RATE_LIMIT: "1000000000", ...env }, /"ready":true/, [process.execPath], copy)
    const line = started.output.split("\n").find((text) => text.includes('"ready":true')) ?? "{}"
    const ready = JSON.parse(line) as { url: string; keyId: string; secret: string; account: string; destination: string }
    peers.push({ name, child: started.child, url: ready.url, headers: { "x-api-key": ready.keyId, "x-api-secret": ready.secret }, account: ready.account, destination: ready.destination })
  }
  return peers
}

/** A server of this bench: run from source unless `command` says otherwise, its output in `logFile`. */
const start = (
  logFile: string,
  args: ReadonlyArray<string>,
  env: Record<string, string>,
  ready: RegExp,
  command: readonly [string, ...Array<string>] = fromSource,
  cwd?: string
) => startServer({ command: [...command, ...args], logFile, ready, env, ...(cwd === undefined ? {} : { cwd }) })

const main = async () => {
  const directory = mkdtempSync(join(tmpdir(), "relay-bench-"))
  const database = join(directory, "relay.db")
  const startRelay = (name: string, file: string) =>
    start(join(directory, `${name}.log`), builtRelay ? [builtServerMain] : [serverMain], {
      RELAY_DATABASE: file,
      PORT: "0",
      RELAY_DEMO: "always",
      RELAY_LOG_LEVEL: logLevel,
      RELAY_RATE_LIMIT: "1000000000"
    }, READY, builtRelay ? [process.execPath] : undefined)
  const relay = await startRelay("relay", database)
  const relayAgain = again ? await startRelay("relay-again", join(directory, "relay-again.db")) : undefined
  const baseline = await start(join(directory, "baseline.log"), [baselineMain], { BASELINE_DATABASE: database }, /baseline listening on/)
  // Run from source, or on the built packages with the built relay (without the source condition, its imports
  // resolve to dist/).
  const memoryRelay = await start(join(directory, "memory-relay.log"), [memoryRelayMain], { PORT: "0", RELAY_LOG_LEVEL: logLevel }, READY, builtRelay ? [process.execPath, "--import", sourceLoader] : undefined)
  const peers = process.env["BENCH_PEERS"] === "0" ? [] : await startPeers(directory)
  try {
    const relayDemo = demoOf(relay.output)
    const againDemo = relayAgain === undefined ? undefined : demoOf(relayAgain.output)
    const memoryDemo = demoOf(memoryRelay.output)
    const baselineUrl = grab(baseline.output, /baseline listening on (http:\/\/\S+)/)
    const only = process.env["BENCH_SCENARIOS"]?.split(",")
    const all = [
      { name: "GET account", relay: (demo: Demo) => ({ path: `/relay/v1/accounts/${demo.account}` }), method: "GET", peer: (peer: Peer) => ({ path: `/relay/v1/accounts/${peer.account}` }) },
      { name: "GET list", relay: () => ({ path: "/relay/v1/accounts" }), method: "GET", peer: () => ({ path: "/relay/v1/accounts" }) },
      {
        name: "POST initiate",
        relay: (demo: Demo) => ({ path: "/relay/v1/transactions/initiate", body: demoInitiation(demo) }),
        method: "POST",
        peer: (peer: Peer) => ({
          path: "/relay/v1/transactions/initiate",
          body: JSON.stringify({ sourceAccountId: peer.account, destinationId: peer.destination, destinationType: "internal", amount: "0.001", assetType: "BTC" })
        })
      }
    ]
    const scenarios = only === undefined ? all : all.filter((scenario) => only.includes(scenario.name))
    if (scenarios.length === 0) throw new Error(`BENCH_SCENARIOS names none of: ${all.map((scenario) => scenario.name).join(", ")}`)
    process.stdout.write(`\n${cpus().length} CPUs, ${cpus()[0]?.model ?? "?"}; node ${process.version}; ${connections} connections; every server warmed up for ${warmup} s, then ${rounds} rounds of ${duration} s taking turns, each figure its median round; relay log level ${logLevel}; relay run ${builtRelay ? "from dist with node" : "from source"}\n\n`)
    const rows: Array<ScenarioMedians> = []
    for (const scenario of scenarios) {
      // The baseline serves the relay's own file, so it answers the relay's request as it is.
      const ofRelay = (name: string, url: string, demo: Demo, server: ChildProcess): Target => {
        const target: { readonly path: string; readonly body?: string } = scenario.relay(demo)
        return { name, url: url + target.path, headers: demo.headers, body: target.body, pid: server.pid }
      }
      const targets: ReadonlyArray<Target> = [
        ofRelay("relay", relayDemo.url, relayDemo, relay.child),
        ofRelay("baseline", baselineUrl, relayDemo, baseline.child),
        ...(againDemo === undefined || relayAgain === undefined ? [] : [ofRelay("relay again", againDemo.url, againDemo, relayAgain.child)]),
        // `bound`: the same request on the relay with in-memory storage (see memoryRelay.ts).
        ofRelay("bound", memoryDemo.url, memoryDemo, memoryRelay.child),
        ...peers.map((peer) => {
          const target: { readonly path: string; readonly body?: string } = scenario.peer(peer)
          return { name: peer.name, url: peer.url + target.path, headers: peer.headers, body: target.body, pid: peer.child.pid }
        })
      ]
      const load = (target: Target, seconds: number) =>
        autocannon({
          url: target.url,
          connections,
          duration: seconds,
          method: scenario.method,
          headers: { ...target.headers, ...(target.body === undefined ? {} : { "content-type": "application/json" }) },
          ...(target.body === undefined ? {} : { body: target.body })
        })
      // Every server warms up (JIT compilation is not what is measured), then they take turns round by round.
      const results = await takeTurns(targets, load, { warmup, rounds, duration, pidOf: (target) => target.pid })
      const row = scenarioMedians(scenario.name, results, (target) => target.name)
      const { medians } = row
      const ours = medians.get("relay")
      const theirs = medians.get("baseline")
      if (ours === undefined || theirs === undefined) throw new Error("no measurement")
      rows.push(row)
      // As each scenario ends, its figures, so a long run shows where it is.
      const rate = (result: AutocannonResult) => result.requests.average.toFixed(0)
      process.stdout.write(
        `${scenario.name}: ` +
          targets.flatMap((target) => {
            const result = medians.get(target.name)
            return result === undefined ? [] : [`${target.name} ${rate(result)} req/s`]
          }).join(", ") +
          `; relay / baseline ${(ours.requests.average / theirs.requests.average).toFixed(2)}\n`
      )
    }
    process.stdout.write(
      `\n${sideBySideTables(rows, SERVERS, QUOTIENTS)}` +
        (peers.length > 0 ? "" : process.env["BENCH_PEERS"] === "0" ? "\n(peers left out: BENCH_PEERS=0)\n" : "\n(no peer: ../shared/bench-peer not found; set BENCH_PEER to its folder)\n")
    )
  } finally {
    relay.child.kill("SIGTERM")
    relayAgain?.child.kill("SIGTERM")
    baseline.child.kill("SIGTERM")
    memoryRelay.child.kill("SIGTERM")
    for (const peer of peers) peer.child.kill("SIGTERM")
    await new Promise((resolve) => setTimeout(resolve, 500))
    rmSync(directory, { recursive: true, force: true })
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(1)
})
