/**
 * The benchmarks' servers die with the bench (bench/BenchProcess.ts): a bench stopped halfway by a signal to its own
 * process leaves no server running to load the machine under the next run. A real bench process (a script that
 * starts a server through `startServer` and waits) and a real signal.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { sourceNodeArguments } from "./ServerProcess.js"

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

/** Waits until `check` holds, for at most `millis`. */
const eventually = async (check: () => boolean, millis = 10_000): Promise<boolean> => {
  for (const until = Date.now() + millis; Date.now() < until; await new Promise((resolve) => setTimeout(resolve, 50))) {
    if (check()) return true
  }
  return check()
}

describe("bench servers", () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`a bench stopped by ${signal} to its own process stops the servers it started`, async () => {
      // The bench: starts a server that would run for ever, prints its pid, and waits.
      const script = `
        import { startServer } from ${JSON.stringify(benchProcess)}
        const server = await startServer({
          command: [process.execPath, "-e", "console.log('serving'); setInterval(() => {}, 1000)"],
          logFile: ${JSON.stringify(join(directory, `${signal}.log`))},
          ready: /serving/
        })
        console.log("server " + server.child.pid)
        setInterval(() => {}, 1000)
      `
      const bench = spawn(process.execPath, [...sourceNodeArguments, "--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] })
      const exited = new Promise<NodeJS.Signals | number | null>((done) => bench.once("exit", (code, killedBy) => done(code ?? killedBy)))
      let output = ""
      bench.stdout.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
      expect(await eventually(() => /server \d+/.test(output))).toBe(true)
      const server = Number(/server (\d+)/.exec(output)?.[1])
      expect(isRunning(server)).toBe(true)
      bench.kill(signal)
      await exited
      expect(await eventually(() => !isRunning(server)), `server ${server} still running after the bench's ${signal}`).toBe(true)
    }, 30_000)
  }
})
