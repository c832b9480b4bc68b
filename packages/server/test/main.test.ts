/**
 * `pnpm start` as a newcomer meets it: a first start on a fresh SQLite file seeds demo data and prints each key
 * once with a curl line that works; a restart does not seed again; SIGTERM lets a request in flight finish, then
 * the process exits cleanly with the database closed, even while a client keeps a kept-alive connection busy.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { Agent, request as httpRequest } from "node:http"
import { sendSlowly } from "../../http/test/SlowClient.js"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { scriptNodeArguments, type ServerProcess, signalWhileHeld, startServer } from "./ServerProcess.js"

const directory = mkdtempSync(join(tmpdir(), "relay-main-"))
afterAll(() => rmSync(directory, { recursive: true, force: true }))

/**
 * A POST creating an account on `server`, sent with half its body, then SIGTERM, then the rest 300 ms later: a request
 * in flight while the server stops. Answers its status. `agent` sends it on a connection the agent keeps.
 */
const createdAcrossSigterm = (server: ServerProcess, credential: RegExpExecArray | null, agent?: Agent) =>
  new Promise<number>((resolve, reject) => {
    const req = httpRequest(`${server.url}/relay/v1/accounts`, {
      ...(agent === undefined ? {} : { agent }),
      method: "POST",
      headers: { "x-api-key": credential?.[1] ?? "", "x-api-secret": credential?.[2] ?? "", "content-type": "application/json", "transfer-encoding": "chunked" }
    }, (res) => {
      res.resume()
      res.on("end", () => resolve(res.statusCode ?? 0))
    })
    req.on("error", reject)
    req.write("{\"name\":\"In flight\",")
    setTimeout(() => {
      server.child.kill("SIGTERM")
      setTimeout(() => req.end("\"workspace\":\"custody\",\"assetId\":\"BTC\"}"), 300)
    }, 100)
  })

describe("pnpm start", () => {
  it("the custody-relay bin is a node script: its entry starts with a #! line, which the build keeps", () => {
    const entry = readFileSync(new URL("../src/main.ts", import.meta.url), "utf8")
    expect(entry.split("\n")[0]).toBe("#!/usr/bin/env node")
  })

  it("AUTH-SEC-1: first start seeds the demo and prints every key once with a working curl line; a restart does not", async () => {
    const database = join(directory, "data", "relay.db")
    const server = await startServer({ RELAY_DATABASE: database })
    let viewerKey = ""
    try {
      const output = server.output()
      for (const role of ["viewer", "initiator", "approver-1", "approver-2", "admin"]) expect(output).toMatch(new RegExp(`${role}\\s+x-api-key: crk_`))
      const curl = /curl -s (\S+) -H 'x-api-key: (\S+)' -H 'x-api-secret: (\S+)'/.exec(output)
      expect(curl).not.toBeNull()
      const [, url, key, secret] = curl ?? []
      viewerKey = key ?? ""
      const answer = await fetch(url ?? "", { headers: { "x-api-key": key ?? "", "x-api-secret": secret ?? "" } })
      expect(answer.status).toBe(200)
      const body = (await answer.json()) as { total: number; items: ReadonlyArray<{ status: string; availableBalance: string }> }
      expect(body.total).toBe(3)
      expect(body.items.every((a) => a.status === "active" && a.availableBalance !== "0")).toBe(true)
      expect(await server.stop()).toBe(0)
    } finally {
      server.child.kill("SIGKILL")
    }
    const again = await startServer({ RELAY_DATABASE: database })
    try {
      expect(again.output()).not.toContain("Demo data created")
      expect(again.output()).toContain("/relay/v1/openapi.json")
      expect(again.output()).toMatch(/secrets are shown only when they are created.*RELAY_DEMO=always/)
      expect(again.output()).not.toContain(viewerKey)
    } finally {
      await again.stop()
    }
    // A new database told to stay without the demo holds nothing to keep, and says how to make a credential.
    const bare = await startServer({ RELAY_DATABASE: ":memory:", RELAY_DEMO: "never" })
    try {
      expect(bare.output()).not.toContain("Existing data kept")
      expect(bare.output()).toContain("No demo data (RELAY_DEMO=never)")
    } finally {
      await bare.stop()
    }
  })

  it("the start line names where the test control protocol answers, below RELAY_BASE_PATH", async () => {
    const server = await startServer({ RELAY_DATABASE: ":memory:", RELAY_DEMO: "never", RELAY_TEST_CONTROL_TOKEN: "t", RELAY_BASE_PATH: "/custody" })
    try {
      const [, mounted = ""] = /test control protocol mounted at (\S+)/.exec(server.output()) ?? []
      expect(mounted).toBe(`${server.url}/custody/__control`)
      // No custody platform is connected to the runnable server: it says so at start.
      expect(server.output()).toContain("custody provider: the embedded simulation")
      expect((await fetch(`${mounted}/profile`, { headers: { "x-control-token": "t" } })).status).toBe(200)
    } finally {
      await server.stop()
    }
  })

  it("RELAY_REQUEST_TIMEOUT_MILLIS: a client that sends its request slower than that is answered 408 and cut off", async () => {
    const server = await startServer({ RELAY_DATABASE: ":memory:", RELAY_REQUEST_TIMEOUT_MILLIS: "300" })
    try {
      const [, keyId = "", secret = ""] = /admin\s+x-api-key: (\S+)\s+x-api-secret: (\S+)/.exec(server.output()) ?? []
      expect(await sendSlowly(server.url, { keyId, secret })).toMatch(/^HTTP\/1\.1 408/)
    } finally {
      await server.stop()
    }
  })

  it("graceful shutdown: a request in flight at SIGTERM finishes, then the process exits 0", async () => {
    const server = await startServer({ RELAY_DATABASE: join(directory, "graceful.db"), RELAY_DEMO: "always" })
    try {
      const match = /admin\s+x-api-key: (\S+)\s+x-api-secret: (\S+)/.exec(server.output())
      const pending = createdAcrossSigterm(server, match)
      expect(await pending).toBe(201)
      expect(await server.exited).toBe(0)
      expect(server.output()).toContain("custody-relay stopped")
    } finally {
      server.child.kill("SIGKILL")
    }
  })

  it("graceful shutdown: a client that keeps sending on a kept-alive connection does not hold the process open; it exits 0", async () => {
    const server = await startServer({ RELAY_DATABASE: join(directory, "kept-alive.db"), RELAY_DEMO: "always" })
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const match = /admin\s+x-api-key: (\S+)\s+x-api-secret: (\S+)/.exec(server.output())
      const get = () =>
        new Promise<number>((resolve, reject) => {
          httpRequest(`${server.url}/relay/v1/accounts`, { agent, headers: { "x-api-key": match?.[1] ?? "", "x-api-secret": match?.[2] ?? "" } }, (res) => {
            res.resume()
            res.on("end", () => resolve(res.statusCode ?? 0))
          }).on("error", reject).end()
        })
      let exited = false
      void server.exited.then(() => (exited = true))
      for (let i = 0; i < 5; i++) expect(await get()).toBe(200)
      // The connection is busy when the signal lands, and afterwards its client sends on it back to back, as a poller
      // that never lets it go idle does.
      const busy = createdAcrossSigterm(server, match, agent)
      expect(await busy).toBe(201)
      let afterSignal = 0
      while (!exited && afterSignal < 500) {
        if (await get().catch(() => undefined) === undefined) break
        afterSignal++
      }
      // At most the next answer, which closes the connection; then no new connection is taken.
      expect(afterSignal).toBeLessThanOrEqual(1)
      expect(await server.exited).toBe(0)
      expect(server.output()).toContain("custody-relay stopped")
    } finally {
      agent.destroy()
      server.child.kill("SIGKILL")
    }
  })

  it("the start script is node itself, so a SIGTERM that lands while the server is held off the CPU still ends in its clean stop", async () => {
    // Node itself, not a launcher: scriptNodeArguments requires it, and says what a launcher would do to the stop.
    const start = scriptNodeArguments(new URL("../package.json", import.meta.url), "start")
    const server = await startServer({ RELAY_DATABASE: ":memory:" }, 60_000, undefined, start)
    try {
      await signalWhileHeld(server.child, "SIGTERM")
      const code = await server.exited
      expect({ code, signal: server.child.signalCode, output: server.output() }).toEqual({ code: 0, signal: null, output: expect.stringContaining("custody-relay stopped") })
    } finally {
      server.child.kill("SIGKILL")
    }
  })

  it("at Info the log has a command's line and not a successful read's; RELAY_LOG_SLOW_READ_MILLIS=0 counts every read slow", async () => {
    const requestLines = async (env: Record<string, string>) => {
      const server = await startServer({ RELAY_DATABASE: ":memory:", RELAY_LOG_LEVEL: "Info", ...env })
      try {
        const output = server.output()
        const headers = {
          "x-api-key": /admin\s+x-api-key: (\S+)/.exec(output)?.[1] ?? "",
          "x-api-secret": /admin\s+x-api-key: \S+\s+x-api-secret: (\S+)/.exec(output)?.[1] ?? ""
        }
        const read = await fetch(`${server.url}/relay/v1/accounts`, { headers: { ...headers, "x-request-id": "main-read" } })
        const command = await fetch(`${server.url}/relay/v1/accounts`, {
          method: "POST",
          headers: { ...headers, "content-type": "application/json", "x-request-id": "main-command" },
          body: JSON.stringify({ name: "Operations", workspace: "custody", assetId: "BTC" })
        })
        expect([read.status, command.status]).toEqual([200, 201])
        // Lines below Warn are written together every few milliseconds.
        await new Promise((resolve) => setTimeout(resolve, 200))
        const levels: Record<string, unknown> = {}
        for (const line of server.output().split("\n").filter((line) => line.startsWith("{"))) {
          const entry = JSON.parse(line) as { message?: unknown; level?: unknown; annotations?: { requestId?: string } }
          if (entry.message === "request" && entry.annotations?.requestId !== undefined) levels[entry.annotations.requestId] = entry.level
        }
        return levels
      } finally {
        await server.stop()
      }
    }
    expect(await requestLines({})).toEqual({ "main-command": "INFO" })
    expect(await requestLines({ RELAY_LOG_SLOW_READ_MILLIS: "0" })).toEqual({ "main-read": "INFO", "main-command": "INFO" })
  })

  it("a bad setting stops the start with a clear message", async () => {
    await expect(startServer({ RELAY_DATABASE: join(directory, "bad.db"), RELAY_RATE_LIMIT: "lots" })).rejects.toThrow(/RELAY_RATE_LIMIT must be an integer/)
  })
})
