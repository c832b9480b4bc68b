/**
 * What this package's benchmarks share: autocannon, typed (it ships no types); a server started with its output
 * going to a file, as a deployment sends it, and its ready line read from there; what a relay printed on its first
 * start (demoOf); servers taking turns, and the tables that print their figures; and a PostgreSQL database of a
 * bench's own. A bench never reads a server's output while it measures: a parent that consumed every log line of a
 * server at Info would be measuring itself.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { closeSync, openSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { constants } from "node:os"
import { fileURLToPath } from "node:url"
import { btcTransferOf } from "../test/DemoRequests.js"
import { sourceNodeArguments } from "../test/ServerProcess.js"

export interface AutocannonResult {
  readonly requests: { readonly average: number; readonly total: number }
  readonly latency: { readonly p50: number; readonly p99: number; readonly max: number }
  readonly non2xx: number
  readonly errors: number
}

export type Autocannon = (options: {
  readonly url: string
  readonly connections: number
  readonly duration: number
  readonly method?: string
  readonly headers?: Record<string, string>
  readonly body?: string
  /** Each `[<id>]` in a request replaced by an id of its own as it is sent (autocannon's hyperid). */
  readonly idReplacement?: boolean
  /** Each request's path chosen as it is sent (autocannon's `setupRequest`), instead of the url's. */
  readonly requests?: ReadonlyArray<{ readonly setupRequest: (request: { path: string }) => { path: string } }>
}) => Running

/**
 * A load under way: its result once its duration is over or it is stopped, and each answer as it arrives
 * (`response`, with the milliseconds it took, to the microsecond).
 */
export interface Running extends PromiseLike<AutocannonResult> {
  readonly stop: () => void
  readonly on: (event: "response", listener: (client: unknown, status: number, bytes: number, millis: number) => void) => void
}

export const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon

/** Percentiles of milliseconds, to the hundredth. */
export interface Latency {
  readonly p50: number
  readonly p99: number
  readonly max: number
}

const percentiles = (millis: Array<number>): Latency => {
  millis.sort((a, b) => a - b)
  const at = (fraction: number) => Math.round((millis[Math.min(millis.length - 1, Math.floor(millis.length * fraction))] ?? 0) * 100) / 100
  return { p50: at(0.5), p99: at(0.99), max: at(1) }
}

/**
 * `load` with its 2xx answers' latencies kept to the microsecond: autocannon's own percentiles are whole
 * milliseconds, and a fast server's p99 is below one.
 */
export const timedFinely = (load: Running): { readonly stop: () => void; readonly done: Promise<{ readonly result: AutocannonResult; readonly latency: Latency }> } => {
  const millis: Array<number> = []
  load.on("response", (_client, status, _bytes, taken) => {
    if (status >= 200 && status < 300) millis.push(taken)
  })
  return { stop: load.stop, done: Promise.resolve(load).then((result) => ({ result, latency: percentiles(millis) })) }
}

export interface Started {
  readonly child: ChildProcess
  /** What the server had written when its ready line appeared. */
  readonly output: string
}

/**
 * How a bench runs a TypeScript server from source: node itself, with the repository's in-thread loader, as the tests
 * start one (`sourceNodeArguments`). A server is always the process `startServer` starts, never behind a launcher
 * such as tsx's CLI (a wrapper around a second process): the SIGKILL that stops it with the bench would reach only the
 * launcher and leave the server running, and the CPU time read from its pid would be the launcher's.
 */
export const fromSource = [process.execPath, ...sourceNodeArguments] as const

/** The relay server's command: its built `dist/main.js` with node, or its source (`fromSource`). */
export const relayCommand = (built: boolean): [string, ...Array<string>] => {
  const main = fileURLToPath(new URL(built ? "../dist/main.js" : "../src/main.ts", import.meta.url))
  return built ? [process.execPath, main] : [...fromSource, main]
}

/** Stops a server with SIGTERM (it drains and closes its database) and waits for it to exit. */
export const stopGently = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    child.once("exit", () => resolve())
    child.kill("SIGTERM")
  })

/** Servers started here that have not exited (see `stopServersWithThisProcess`). */
const running = new Set<ChildProcess>()
let stopsServersWithThisProcess = false

/**
 * Servers die with the bench, however it ends: a bench stopped halfway (a signal to its process alone, as `kill`
 * sends it, or an error) would otherwise leave them running, and every later run would measure against their load.
 * Called before a server's process is created, never after: a signal that arrives while the first server is being
 * spawned (libuv holds signals back until its fork and exec are done) would otherwise find no handler, take the
 * default action and leave that server running, its parent gone.
 */
const stopServersWithThisProcess = (): void => {
  if (stopsServersWithThisProcess) return
  stopsServersWithThisProcess = true
  const stopAll = () => {
    for (const server of running) server.kill("SIGKILL")
  }
  process.once("exit", stopAll)
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.once(signal, () => {
      stopAll()
      process.exit(128 + constants.signals[signal])
    })
  }
}

/**
 * Starts `command` with its output appended to `logFile`, and waits until `ready` matches what it wrote there.
 * `through: "pipe"` sends the output through a pipe to a `cat` of its own that appends it to the file, as a
 * container runtime or a service manager reads a process's output; by default the server writes the file itself.
 * Either way the bench process never holds the output.
 */
export const startServer = (options: {
  readonly command: readonly [string, ...Array<string>]
  readonly logFile: string
  readonly ready: RegExp
  readonly env?: Record<string, string>
  readonly cwd?: string
  readonly through?: "file" | "pipe"
}): Promise<Started> =>
  new Promise((resolve, reject) => {
    if (options.command[0] !== process.execPath) {
      reject(new Error(`a bench's server is node itself (${process.execPath}; from source: fromSource), not ${options.command[0]}`))
      return
    }
    const fd = openSync(options.logFile, "a")
    const piped = options.through === "pipe"
    stopServersWithThisProcess()
    const child = spawn(options.command[0], options.command.slice(1), {
      env: { ...process.env, ...options.env },
      stdio: piped ? ["ignore", "pipe", "pipe"] : ["ignore", fd, fd],
      ...(options.cwd === undefined ? {} : { cwd: options.cwd })
    })
    running.add(child)
    child.once("exit", () => running.delete(child))
    if (piped && child.stdout !== null && child.stderr !== null) {
      // Each reader gets a duplicate of the pipe's read end; this process then closes its own.
      spawn("cat", [], { stdio: [child.stdout, fd, "ignore"] })
      spawn("cat", [], { stdio: [child.stderr, fd, "ignore"] })
      child.stdout.destroy()
      child.stderr.destroy()
    }
    closeSync(fd)
    let ready = false
    const poll = setInterval(() => {
      const output = readFileSync(options.logFile, "utf8")
      if (options.ready.test(output)) {
        clearInterval(poll)
        ready = true
        resolve({ child, output })
      }
    }, 50)
    // Only an exit before the ready line is a failure to start; a stop after it (a bench's own, once its temporary
    // directory may be gone) is not.
    child.once("exit", (code) => {
      clearInterval(poll)
      if (ready) return
      reject(new Error(`${options.command.join(" ")} exited with ${code}:\n${readFileSync(options.logFile, "utf8")}`))
    })
  })

/**
 * Starts delayProxy.mjs in front of PostgreSQL at `target` (its output to `logFile`): every chunk held `millis`
 * milliseconds each way, as a database on another host would answer. Its process, and the port it listens on.
 */
export const delayProxy = async (target: URL, millis: number, logFile: string): Promise<{ readonly child: ChildProcess; readonly port: string }> => {
  const started = await startServer({
    command: [process.execPath, fileURLToPath(new URL("./delayProxy.mjs", import.meta.url)), target.hostname, target.port || "5432", String(millis)],
    logFile,
    ready: /listening \d+/
  })
  return { child: started.child, port: grab(started.output, /listening (\d+)/) }
}

/** The first group of `pattern` in `output`, or an error that shows the output. */
export const grab = (output: string, pattern: RegExp): string => {
  const found = pattern.exec(output)?.[1]
  if (found === undefined) throw new Error(`not found in the server's output: ${pattern}\n${output}`)
  return found
}

export const READY = /custody-relay ready/

/** What a relay server printed on its first start with demo data: its URL, the admin's credential, the BTC account, the whitelisted address. */
export const demoOf = (output: string) => ({
  url: grab(output, /listening on (http:\/\/\S+)/),
  headers: {
    "x-api-key": grab(output, /admin\s+x-api-key: (\S+)/),
    "x-api-secret": grab(output, /admin\s+x-api-key: \S+\s+x-api-secret: (\S+)/)
  },
  account: grab(output, /account (\S+)\s+Treasury BTC/),
  whitelisted: grab(output, /whitelisted address (\S+)/)
})

/** A relay server with demo data, as a bench reaches it (see demoOf). */
export interface DemoServer {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly account: string
  readonly whitelisted: string
}

/**
 * What a bench sends a relay server with demo data (see demoOf): GET an account, GET the accounts, POST initiate
 * (without an idempotency key, or each under a key of its own, as a careful client sends it), or GET the first page
 * of transactions (twenty, after `demoPrepared` has initiated them).
 */
export type DemoScenario = "account" | "list" | "initiate" | "initiate-keyed" | "transactions"

const demoScenarios: ReadonlyArray<DemoScenario> = ["account", "list", "initiate", "initiate-keyed", "transactions"]

export const demoScenarioOf = (name: string | undefined, fallback: DemoScenario): DemoScenario => {
  const scenario = demoScenarios.find((known) => known === (name ?? fallback))
  if (scenario === undefined) throw new Error(`BENCH_SCENARIO must be one of ${demoScenarios.join(", ")}, not ${name}`)
  return scenario
}

/** A list page's length in the transactions scenario: the interface's default page. */
const TRANSACTIONS_PAGE = 20

/**
 * Gives a server with demo data what `scenario` reads before it is loaded: for transactions, a full page of them,
 * initiated through the API one by one (the demo holds none).
 */
export const demoPrepared = async (scenario: DemoScenario, server: DemoServer): Promise<void> => {
  if (scenario !== "transactions") return
  for (let n = 0; n < TRANSACTIONS_PAGE; n++) {
    const response = await fetch(`${server.url}/relay/v1/transactions/initiate`, {
      method: "POST",
      headers: { ...server.headers, "content-type": "application/json" },
      body: demoInitiation(server)
    })
    if (response.status !== 201) throw new Error(`initiating the transactions to list: ${response.status} ${await response.text()}`)
  }
}

/** The body of an initiation on demo data (`btcTransferOf`) from the Treasury BTC account to the whitelisted address. */
export const demoInitiation = (server: Pick<DemoServer, "account" | "whitelisted">): string =>
  JSON.stringify(btcTransferOf(server.account, server.whitelisted))

/** `scenario` against a server with demo data for `seconds` at `connections`. */
export const demoLoad = (
  scenario: DemoScenario,
  server: DemoServer,
  settings: { readonly seconds: number; readonly connections: number }
): Running => {
  const { seconds: duration, connections } = settings
  if (scenario === "initiate" || scenario === "initiate-keyed") {
    const keyed = scenario === "initiate-keyed"
    return autocannon({
      url: `${server.url}/relay/v1/transactions/initiate`,
      connections,
      duration,
      method: "POST",
      headers: { ...server.headers, "content-type": "application/json", ...(keyed ? { "idempotency-key": "[<id>]" } : {}) },
      body: demoInitiation(server),
      idReplacement: keyed
    })
  }
  const path = scenario === "list"
    ? "/relay/v1/accounts"
    : scenario === "transactions"
    ? `/relay/v1/transactions?limit=${TRANSACTIONS_PAGE}`
    : `/relay/v1/accounts/${server.account}`
  return autocannon({ url: server.url + path, connections, duration, headers: server.headers })
}

export const median = (values: ReadonlyArray<number>): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0

/**
 * A process's CPU time so far, user and system, all its threads, in microseconds: fields 14 and 15 of Linux's
 * `/proc/<pid>/stat` (proc(5)), in clock ticks of 10 ms. Undefined where there is no such file (not Linux, or the
 * process is gone).
 */
export const cpuMicros = (pid: number | undefined): number | undefined => {
  if (pid === undefined) return undefined
  let stat: string
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  } catch {
    return undefined
  }
  // The command's name (field 2) may hold spaces; the fields after it are counted from its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(") ") + 2).split(" ")
  return (Number(fields[11]) + Number(fields[12])) * 10_000
}

/**
 * One server's round: autocannon's result, and the server's CPU time a request in it when the bench can read the
 * server's process (see `takeTurns`' `pidOf`).
 */
export interface Round extends AutocannonResult {
  readonly cpuMicrosPerRequest: number | undefined
}

/**
 * Compares servers in one run: each under `load` for `warmup` seconds (unmeasured: JIT compilation is not what is
 * measured), then `rounds` rounds of `duration` seconds in which they take turns, so the machine's noise falls on
 * all of them. A round with an answer other than 2xx stops the bench. Returns each server's rounds.
 *
 * `pidOf` names the process that serves (node itself, not a wrapper such as tsx's, which runs the server in a
 * child): each round then also holds the server's CPU time a request. Requests a second mix what a request costs the
 * server with how much of the machine it got (the load generator and any neighbour share the cores); the CPU time
 * leaves out the second, though not a neighbour's effect on the caches, so on a noisy VM it can spread as widely
 * (docs/benchmarks.md measures both on servers of the same code).
 */
export const takeTurns = async <S>(
  servers: ReadonlyArray<S>,
  load: (server: S, seconds: number) => PromiseLike<AutocannonResult>,
  settings: { readonly warmup: number; readonly rounds: number; readonly duration: number; readonly pidOf?: (server: S) => number | undefined }
): Promise<Map<S, Array<Round>>> => {
  for (const server of servers) await load(server, settings.warmup)
  const results = new Map<S, Array<Round>>(servers.map((server) => [server, []]))
  for (let round = 0; round < settings.rounds; round += 1) {
    for (const server of servers) {
      const pid = settings.pidOf?.(server)
      const before = cpuMicros(pid)
      const result = await load(server, settings.duration)
      const after = cpuMicros(pid)
      if (result.non2xx + result.errors > 0) throw new Error(`${result.non2xx} answers were not 2xx, ${result.errors} errors`)
      const cpuMicrosPerRequest = before === undefined || after === undefined || result.requests.total === 0
        ? undefined
        : (after - before) / result.requests.total
      results.get(server)?.push({ ...result, cpuMicrosPerRequest })
    }
  }
  return results
}

/**
 * A markdown table of `takeTurns`' results: req/s median, min, max, and the ratio to the `reference` server's median;
 * then, when every round has it, the server's CPU time a request (median, min, max) and the reference's median over
 * the server's (above 1: the server spends less a request).
 */
export const turnsTable = <S>(results: Map<S, Array<Round>>, nameOf: (server: S) => string, reference: S, heading: string): string => {
  const rates = (server: S) => (results.get(server) ?? []).map((round) => round.requests.average)
  const costs = (server: S) => (results.get(server) ?? []).flatMap((round) => round.cpuMicrosPerRequest ?? [])
  const withCosts = [...results.values()].every((rounds) => rounds.every((round) => round.cpuMicrosPerRequest !== undefined))
  const spread = (values: ReadonlyArray<number>, digits: number) => `${median(values).toFixed(digits)} | ${Math.min(...values).toFixed(digits)} | ${Math.max(...values).toFixed(digits)}`
  const base = median(rates(reference))
  const baseCost = median(costs(reference))
  const rows = [...results.keys()].map((server) => {
    const values = rates(server)
    const cells = `| ${nameOf(server)} | ${spread(values, 0)} | ${(median(values) / base).toFixed(3)} |`
    return withCosts ? `${cells} ${spread(costs(server), 1)} | ${(baseCost / median(costs(server))).toFixed(3)} |` : cells
  })
  const head = `| ${heading} | req/s (median) | min | max | vs ${nameOf(reference)} |`
  return [
    withCosts ? `${head} CPU µs a request (median) | min | max | ${nameOf(reference)}'s / this |` : head,
    withCosts ? "|---|---|---|---|---|---|---|---|---|" : "|---|---|---|---|---|",
    ...rows,
    ""
  ].join("\n")
}

/**
 * One scenario of a run, by the server's name: each server's median round (by requests a second), and, where the
 * bench could read its process, the median of its rounds' CPU time a request.
 */
export interface ScenarioMedians {
  readonly scenario: string
  readonly medians: ReadonlyMap<string, AutocannonResult>
  readonly cpuMicros?: ReadonlyMap<string, number>
}

/** `takeTurns`' results as a `ScenarioMedians`. */
export const scenarioMedians = <S>(scenario: string, results: Map<S, Array<Round>>, nameOf: (server: S) => string): ScenarioMedians => {
  const medians = new Map<string, AutocannonResult>()
  const cpuMicros = new Map<string, number>()
  for (const [server, rounds] of results) {
    const middle = [...rounds].sort((a, b) => a.requests.average - b.requests.average)[Math.floor(rounds.length / 2)]
    if (middle !== undefined) medians.set(nameOf(server), middle)
    const costs = rounds.flatMap((round) => round.cpuMicrosPerRequest ?? [])
    if (costs.length === rounds.length && costs.length > 0) cpuMicros.set(nameOf(server), median(costs))
  }
  return { scenario, medians, cpuMicros }
}

/** A column of quotients: its heading, and the two servers whose figures it divides. */
export interface Quotient {
  readonly heading: string
  readonly numerator: string
  readonly denominator: string
}

/**
 * Every server of a run side by side, a row per scenario: each server's requests a second, then each quotient; under
 * it, each server's p50 / p99 in milliseconds; and, where the bench read the servers' processes, each one's CPU time a
 * request with the same quotients taken of it the other way up (the denominator's CPU over the numerator's), so that
 * both read alike: above 1, the numerator does better. A server that answered in no scenario has no column, nor has a
 * quotient that names one; one missing from a single scenario is "-" there.
 */
export const sideBySideTables = (
  rows: ReadonlyArray<ScenarioMedians>,
  servers: ReadonlyArray<string>,
  quotients: ReadonlyArray<Quotient>
): string => {
  const present = servers.filter((server) => rows.some((row) => row.medians.has(server)))
  const shown = quotients.filter((quotient) => present.includes(quotient.numerator) && present.includes(quotient.denominator))
  const line = (cells: ReadonlyArray<string>) => `| ${cells.join(" | ")} |`
  const table = (headings: ReadonlyArray<string>, cellsOf: (row: ScenarioMedians) => ReadonlyArray<string>) => [
    line(["scenario", ...headings]),
    `|${"---|".repeat(1 + headings.length)}`,
    ...rows.map((row) => line([row.scenario, ...cellsOf(row)])),
    ""
  ]
  /** A figure of every server, then the quotients of how well each does by it (`merit`: larger is better). */
  const figures = (
    heading: string,
    figureOf: (row: ScenarioMedians, server: string) => number | undefined,
    digits: number,
    merit: (figure: number) => number,
    quotientSuffix: string
  ) =>
    table([...present.map((server) => `${server} ${heading}`), ...shown.map((quotient) => `${quotient.heading}${quotientSuffix}`)], (row) => [
      ...present.map((server) => figureOf(row, server)?.toFixed(digits) ?? "-"),
      ...shown.map((quotient) => {
        const numerator = figureOf(row, quotient.numerator)
        const denominator = figureOf(row, quotient.denominator)
        const quotientValue = numerator === undefined || denominator === undefined ? Number.NaN : merit(numerator) / merit(denominator)
        return Number.isFinite(quotientValue) ? quotientValue.toFixed(2) : "-"
      })
    ])
  const latencies = table(present.map((server) => `${server} p50 / p99 ms`), (row) =>
    present.map((server) => {
      const latency = row.medians.get(server)?.latency
      return latency === undefined ? "-" : `${latency.p50} / ${latency.p99}`
    }))
  return [
    ...figures("req/s", (row, server) => row.medians.get(server)?.requests.average, 0, (rate) => rate, ""),
    ...latencies,
    ...(rows.some((row) => (row.cpuMicros?.size ?? 0) > 0)
      ? figures("CPU µs a request", (row, server) => row.cpuMicros?.get(server), 1, (micros) => 1 / micros, ", by CPU")
      : [])
  ].join("\n")
}

/** `takeTurns`' settings and the connections, from BENCH_DURATION, BENCH_ROUNDS, BENCH_WARMUP and BENCH_CONNECTIONS. */
export const turnSettingsFromEnv = (defaults: { readonly rounds: number }) => ({
  duration: Number(process.env["BENCH_DURATION"] ?? 5),
  rounds: Number(process.env["BENCH_ROUNDS"] ?? defaults.rounds),
  warmup: Number(process.env["BENCH_WARMUP"] ?? 10),
  connections: Number(process.env["BENCH_CONNECTIONS"] ?? 10)
})

/**
 * A database named `name` created on the server at `adminUrl`, and how to reach and drop it. pg is loaded here, so
 * a bench on SQLite never needs it.
 */
export const postgresDatabase = async (adminUrl: string, name: string) => {
  const { default: pg } = await import("pg")
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`create database ${name}`)
  const database = new URL(adminUrl)
  database.pathname = `/${name}`
  return {
    url: database.toString(),
    drop: async () => {
      await admin.query(`drop database if exists ${name} with (force)`)
      await admin.end()
    }
  }
}
