/**
 * The kit without the monorepo: its packed tarball, installed with npm into an empty folder, runs with npx against
 * a server over HTTP, with its README and the control-protocol document inside the package (issue 14).
 */
import { execFile } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { type AddressInfo, createServer as createNetServer } from "node:net"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { createRelay } from "@custody-relay/server"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { serve } from "./support/serve.js"

const run = promisify(execFile)
const kit = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const token = "standalone-token"
let folder: string
let relay: Awaited<ReturnType<typeof createRelay>>
let server: Awaited<ReturnType<typeof serve>>

beforeAll(async () => {
  // CI builds before it tests; a local run without a build makes one.
  if (!existsSync(join(kit, "dist", "cli.js"))) await run("pnpm", ["run", "build"], { cwd: kit })
  folder = mkdtempSync(join(tmpdir(), "conformance-standalone-"))
  await run("pnpm", ["pack", "--pack-destination", folder], { cwd: kit })
  const tarball = readdirSync(folder).find((name) => name.endsWith(".tgz"))
  if (tarball === undefined) throw new Error("pnpm pack made no tarball")
  writeFileSync(join(folder, "package.json"), JSON.stringify({ name: "a-team-elsewhere", private: true, type: "module" }))
  await run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", join(folder, tarball)], { cwd: folder })
  relay = await createRelay({ database: ":memory:", controlToken: token, rateLimit: { limit: 100000, windowSeconds: 60 } })
  server = await serve(relay.handler)
}, 180_000)

afterAll(async () => {
  await server?.close()
  await relay?.close()
  if (folder !== undefined) rmSync(folder, { recursive: true, force: true })
})

describe("the kit installed alone from its tarball", () => {
  it("ships its README and the control-protocol document, and no workspace is in sight", () => {
    const installed = join(folder, "node_modules", "@custody-relay", "conformance")
    expect(readFileSync(join(installed, "README.md"), "utf8")).toContain("npx custody-relay-conformance")
    expect(readFileSync(join(installed, "dist", "control-protocol.md"), "utf8")).toContain("# Custody Relay test control protocol, v1.2")
    expect(existsSync(join(folder, "node_modules", "@custody-relay", "server"))).toBe(false)
    expect(existsSync(join(folder, "pnpm-workspace.yaml"))).toBe(false)
  })

  it("npx custody-relay-conformance doctor, then a full run, against a server over HTTP: exit 0", async () => {
    const npx = (args: ReadonlyArray<string>) => run("npx", ["--no-install", "custody-relay-conformance", ...args], { cwd: folder, maxBuffer: 64 * 1024 * 1024 })
    const doctor = await npx(["doctor", "--base-url", server.baseUrl, "--control-token", token])
    expect(doctor.stdout).toContain("doctor: the target answers as the protocol says")
    const full = await npx(["--base-url", server.baseUrl, "--control-token", token, "--num-runs", "5", "--seed", "14", "--reporter", "json"])
    const report = JSON.parse(full.stdout) as { status: string; checks: ReadonlyArray<{ outcome: string }> }
    expect(report.status).toBe("passed")
    expect(report.checks.length).toBeGreaterThan(60)
  }, 180_000)

  it("a target that is not running is a harness problem: exit 2, one line naming ECONNREFUSED", async () => {
    const probe = createNetServer()
    await new Promise<void>((done) => probe.listen(0, "127.0.0.1", done))
    const closed = `http://127.0.0.1:${(probe.address() as AddressInfo).port}`
    await new Promise((done) => probe.close(done))
    const failed = await run("npx", ["--no-install", "custody-relay-conformance", "--base-url", closed, "--control-token", token], { cwd: folder }).then(
      () => ({ code: 0, stderr: "" }),
      (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr })
    )
    expect(failed.code).toBe(2)
    expect(failed.stderr).toContain("ECONNREFUSED")
  }, 60_000)
})
