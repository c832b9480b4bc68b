/**
 * The benchmarks' servers die with the bench (bench/BenchProcess.ts): a bench stopped halfway by a signal to its own
 * process leaves no server running to load the machine under the next run. A real bench process (a script that
 * starts a server through `startServer` and waits, and bench:http as its package script starts it) and a real
 * signal. And bench:http's table shows every server of a run side by side (issue 17: relay, baseline, bound and
 * peers as columns of the same run).
 */
import { spawn } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { type AutocannonResult, fromSource, type Quotient, type Round, scenarioMedians, sideBySideTables, startServer } from "../bench/BenchProcess.js"
import { scriptNodeArguments, signalWhileHeld, sourceNodeArguments } from "./ServerProcess.js"

const benchProcess = fileURLToPath(new URL("../bench/BenchProcess.ts", import.meta.url))
const directory = mkdtempSync(join(tmpdir(), "bench-process-"))
afterAll(() => rmSync(directory, { recursive: true, force: true }))

const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** The processes `pid` started that are still running (Linux: every thread's `children` in /proc). */
const childrenOf = (pid: number): Array<number> => {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((task) =>
      readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").split(" ").filter((child) => child !== "").map(Number)
    )
  } catch {
    return []
  }
}

/** The program a process runs, as it was started (its first argument), or undefined once it has gone. */
const commandOf = (pid: number): string | undefined => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0]
  } catch {
    return undefined
  }
}

/** Waits until `check` holds, for at most `millis`. */
const eventually = async (check: () => boolean, millis = 10_000): Promise<boolean> => {
  for (const until = Date.now() + millis; Date.now() < until; await new Promise((resolve) => setTimeout(resolve, 50))) {
    if (check()) return true
  }
  return check()
}

/**
 * A bench: `script` run as a module from source, with what it has printed so far and its end (an exit code, or the
 * signal that ended it). Each bench prints "server <pid>" for the server it starts.
 */
const startBench = (script: string) => {
  const bench = spawn(process.execPath, [...sourceNodeArguments, "--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] })
  const exited = new Promise<NodeJS.Signals | number | null>((done) => bench.once("exit", (code, killedBy) => done(code ?? killedBy)))
  let output = ""
  bench.stdout.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
  return { bench, exited, output: () => output, server: () => Number(/server (\d+)/.exec(output)?.[1]) }
}

/** A bench script's call of `startServer` for a server that would run for ever, its output in `logName`. */
const foreverServer = (logName: string) => `startServer({
  command: [process.execPath, "-e", "console.log('serving'); setInterval(() => {}, 1000)"],
  logFile: ${JSON.stringify(join(directory, logName))},
  ready: /serving/
})`

describe("bench servers", () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`a bench stopped by ${signal} to its own process stops the servers it started`, async () => {
      // The bench: starts a server that would run for ever, prints its pid, and waits.
      const { bench, exited, output, server: serverOf } = startBench(`
        import { startServer } from ${JSON.stringify(benchProcess)}
        const server = await ${foreverServer(`${signal}.log`)}
        console.log("server " + server.child.pid)
        setInterval(() => {}, 1000)
      `)
      expect(await eventually(() => /server \d+/.test(output()))).toBe(true)
      const server = serverOf()
      expect(isRunning(server)).toBe(true)
      bench.kill(signal)
      await exited
      expect(await eventually(() => !isRunning(server)), `server ${server} still running after the bench's ${signal}`).toBe(true)
    }, 30_000)
  }

  it("a signal that arrives while the bench's first server is being spawned still stops that server", async () => {
    // The bench's spawn, wrapped: the signal reaches the bench once the server's process exists and before
    // startServer has it in hand, as a signal held back by libuv during its fork and exec arrives.
    const { exited, output, server: serverOf } = startBench(`
      import { createRequire, syncBuiltinESMExports } from "node:module"
      const childProcess = createRequire(import.meta.url)("node:child_process")
      const spawn = childProcess.spawn
      childProcess.spawn = (...args) => {
        childProcess.spawn = spawn
        syncBuiltinESMExports()
        const server = spawn(...args)
        console.log("server " + server.pid)
        process.kill(process.pid, "SIGTERM")
        return server
      }
      syncBuiltinESMExports()
      const { startServer } = await import(${JSON.stringify(benchProcess)})
      await ${foreverServer("while-spawning.log")}
      setInterval(() => {}, 1000)
    `)
    const code = await exited
    const server = serverOf()
    try {
      expect(server, output()).toBeGreaterThan(0)
      expect(await eventually(() => !isRunning(server)), `server ${server} still running after the bench's SIGTERM`).toBe(true)
      expect(code).toBe(128 + 15)
    } finally {
      if (server > 0 && isRunning(server)) process.kill(server, "SIGKILL")
    }
  }, 30_000)

  it("a server is the process the bench starts: from source through fromSource, never behind a launcher", async () => {
    // A TypeScript server run from source, as the benches run the relay: the process started is the server itself.
    const server = join(directory, "server.ts")
    writeFileSync(server, "const pid: number = process.pid\nconsole.log(`serving ${pid}`)\nsetInterval(() => {}, 1000)\n")
    const started = await startServer({ command: [...fromSource, server], logFile: join(directory, "from-source.log"), ready: /serving \d+/ })
    try {
      expect(Number(/serving (\d+)/.exec(started.output)?.[1])).toBe(started.child.pid)
    } finally {
      started.child.kill("SIGKILL")
    }
    // tsx's CLI runs the server in a second process: the bench's SIGKILL would stop only the launcher.
    const tsxCli = fileURLToPath(new URL("../../../node_modules/.bin/tsx", import.meta.url))
    await expect(startServer({ command: [tsxCli, server], logFile: join(directory, "launcher.log"), ready: /serving/ })).rejects.toThrow(
      /a bench's server is node itself/
    )
  }, 30_000)

  it.runIf(process.platform === "linux")(
    "bench:http, started as its package script starts it, is the process that holds its servers, and stops them on a SIGTERM it handles late",
    async () => {
      // The script must be node itself (scriptNodeArguments says why): behind tsx's CLI the started process would be a
      // launcher that SIGKILLs the bench when it has not handled the SIGTERM within about 60 ms, and the bench's servers
      // would run on, loading the machine under every later run.
      const started = spawn(process.execPath, scriptNodeArguments(new URL("../package.json", import.meta.url), "bench:http"), {
        cwd: fileURLToPath(new URL("..", import.meta.url)),
        env: { ...process.env, BENCH_SCENARIOS: "GET account", BENCH_PEERS: "0", BENCH_AGAIN: "0", BENCH_WARMUP: "300" },
        stdio: ["ignore", "ignore", "inherit"]
      })
      const exited = new Promise<void>((done) => started.once("exit", () => done()))
      const pid = started.pid ?? 0
      try {
        // Its servers: the relay, the baseline and the bound, each node started by the started process (which also
        // has esbuild's services for children while tsx's loader transforms its sources).
        const serversOf = (of: number) => childrenOf(of).filter((child) => commandOf(child) === process.execPath)
        const ready = await eventually(() => serversOf(pid).length >= 3, 45_000)
        const servers = serversOf(pid)
        expect(ready, `the started process ${pid} holds ${servers.length} processes (${servers.join(", ")}), not the bench's three servers`).toBe(true)
        await signalWhileHeld(started, "SIGTERM")
        await exited
        const left = await eventually(() => servers.every((server) => !isRunning(server)))
        expect(left, `servers still running after the bench's SIGTERM: ${servers.filter(isRunning).join(", ")}`).toBe(true)
      } finally {
        // Whatever the outcome, nothing it started runs on, however deep (behind a launcher, the servers are grandchildren).
        const descendants = (of: number): Array<number> => childrenOf(of).flatMap((child) => [child, ...descendants(child)])
        for (const descendant of descendants(pid)) {
          try {
            process.kill(descendant, "SIGKILL")
          } catch {
            // Gone already.
          }
        }
        started.kill("SIGKILL")
      }
    },
    90_000
  )
})

describe("bench:http's table", () => {
  const result = (average: number, p50 = 1, p99 = 2): AutocannonResult => ({
    requests: { average, total: average * 5 },
    latency: { p50, p99, max: p99 },
    non2xx: 0,
    errors: 0
  })
  const servers = ["relay", "baseline", "bound", "peer"]
  const quotients: ReadonlyArray<Quotient> = [
    { heading: "relay / baseline", numerator: "relay", denominator: "baseline" },
    { heading: "bound / baseline", numerator: "bound", denominator: "baseline" },
    { heading: "relay / peer", numerator: "relay", denominator: "peer" }
  ]

  it("puts every server of a scenario in one row, its requests a second beside the quotients the goals read", () => {
    const table = sideBySideTables(
      [{ scenario: "GET account", medians: new Map([["relay", result(500)], ["baseline", result(1000)], ["bound", result(600)], ["peer", result(200, 3, 9)]]) }],
      servers,
      quotients
    )
    const [head, , row, , latencyHead, , latencyRow] = table.split("\n")
    expect(head).toBe("| scenario | relay req/s | baseline req/s | bound req/s | peer req/s | relay / baseline | bound / baseline | relay / peer |")
    expect(row).toBe("| GET account | 500 | 1000 | 600 | 200 | 0.50 | 0.60 | 2.50 |")
    expect(latencyHead).toBe("| scenario | relay p50 / p99 ms | baseline p50 / p99 ms | bound p50 / p99 ms | peer p50 / p99 ms |")
    expect(latencyRow).toBe("| GET account | 1 / 2 | 1 / 2 | 1 / 2 | 3 / 9 |")
  })

  it("leaves out a server that ran in no scenario, and every quotient that names it", () => {
    const table = sideBySideTables(
      [{ scenario: "GET list", medians: new Map([["relay", result(300)], ["baseline", result(600)], ["bound", result(400)]]) }],
      servers,
      quotients
    )
    expect(table).not.toContain("peer")
    expect(table.split("\n")[2]).toBe("| GET list | 300 | 600 | 400 | 0.50 | 0.67 |")
  })

  it("marks a server missing from one scenario only, and its quotients there", () => {
    const table = sideBySideTables(
      [
        { scenario: "GET account", medians: new Map([["relay", result(500)], ["baseline", result(1000)], ["bound", result(600)], ["peer", result(250)]]) },
        { scenario: "POST initiate", medians: new Map([["relay", result(100)], ["baseline", result(125)], ["bound", result(150)]]) }
      ],
      servers,
      quotients
    )
    expect(table.split("\n")[3]).toBe("| POST initiate | 100 | 125 | 150 | - | 0.80 | 1.20 | - |")
  })

  it("takes each server's median round by requests a second and the median of its rounds' CPU time a request", () => {
    const round = (average: number, cpuMicrosPerRequest: number | undefined): Round => ({ ...result(average, average / 100, average / 50), cpuMicrosPerRequest })
    const row = scenarioMedians(
      "GET account",
      new Map([
        ["relay", [round(500, 90), round(700, 80), round(600, 120)]],
        ["baseline", [round(1000, 30), round(1200, 28), round(900, 40)]],
        ["peer", [round(200, undefined), round(210, 300), round(190, 310)]]
      ]),
      (server) => server
    )
    expect(row.medians.get("relay")?.requests.average).toBe(600)
    expect(row.medians.get("relay")?.latency).toEqual({ p50: 6, p99: 12, max: 12 })
    expect(row.cpuMicros?.get("relay")).toBe(90)
    expect(row.cpuMicros?.get("baseline")).toBe(30)
    // A round whose CPU time the bench could not read leaves the server without one, rather than a median of fewer.
    expect(row.cpuMicros?.has("peer")).toBe(false)
    const lines = sideBySideTables([row], servers, quotients).split("\n")
    const cpuHead = lines.findIndex((line) => line.includes("CPU µs a request"))
    expect(lines[cpuHead]).toBe(
      "| scenario | relay CPU µs a request | baseline CPU µs a request | peer CPU µs a request | relay / baseline, by CPU | relay / peer, by CPU |"
    )
    // The baseline's CPU over the relay's: read like relay / baseline, above 1 the relay does better.
    expect(lines[cpuHead + 2]).toBe("| GET account | 90.0 | 30.0 | - | 0.33 | - |")
  })

  it("prints no CPU table when the bench read no server's process", () => {
    expect(sideBySideTables([{ scenario: "GET list", medians: new Map([["relay", result(1)], ["baseline", result(2)]]) }], servers, quotients))
      .not.toContain("CPU")
  })
})
