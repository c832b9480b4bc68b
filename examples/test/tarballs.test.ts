/**
 * What a stranger installs: the five packed tarballs, installed with npm into an empty folder with no workspace in
 * sight, do what the examples do (a Promise-only flow, the handler on node:http, an Effect program on SQLite),
 * compile in a consumer that emits its own declarations (no TS2883: every type it uses can be named), and the
 * `custody-relay` bin migrates a database, creates credentials with `admin`, and serves them: 200, and the API
 * reference's renderer from its own build.
 */
import { execFile, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, assert, beforeAll, describe, it } from "vitest"

const run = promisify(execFile)
const root = fileURLToPath(new URL("../..", import.meta.url))
const packages = ["packages/core", "packages/http", "packages/storage-sql", "packages/server", "conformance"]
const tsc = join(root, "node_modules", "typescript", "bin", "tsc")
let folder: string

beforeAll(async () => {
  // CI builds before it tests; a local run without a build makes one.
  if (packages.some((dir) => !existsSync(join(root, dir, "dist", "index.js")))) await run("pnpm", ["run", "build"], { cwd: root })
  folder = mkdtempSync(join(tmpdir(), "relay-tarballs-"))
  const packs = join(folder, "packs")
  for (const dir of packages) await run("pnpm", ["pack", "--pack-destination", packs], { cwd: join(root, dir) })
  const app = join(folder, "app")
  await run("mkdir", ["-p", app])
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "a-stranger", private: true, type: "module" }))
  const tarballs = readdirSync(packs).filter((name) => name.endsWith(".tgz")).map((name) => join(packs, name))
  assert.lengthOf(tarballs, 5)
  await run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", ...tarballs], { cwd: app })
}, 240_000)

afterAll(() => {
  if (folder !== undefined) rmSync(folder, { recursive: true, force: true })
})

const app = () => join(folder, "app")
const node = (file: string, source: string, env: Record<string, string> = {}) => {
  writeFileSync(join(app(), file), source)
  return run(process.execPath, [file], { cwd: app(), env: { ...process.env, ...env }, timeout: 60_000 })
}

describe("the packed packages, installed with npm into an empty folder", () => {
  it("a Promise-only flow (examples/promiseScript.ts)", async () => {
    const { stdout } = await node("promise.mjs", `
import { createRelay, RelayError } from "@custody-relay/core/promise"
const relay = createRelay()
const client = await relay.administration.createClient("Acme")
const key = await relay.administration.createApiUser({ clientId: client.id, permissions: ["View custody account", "Initiate new custody account", "Approve new custody account"] })
const me = await relay.authenticate(key.keyId, key.secret)
const account = await relay.accounts.create(me, { name: "Treasury", workspace: "custody", assetId: "BTC" }, { idempotencyKey: "k1" })
const again = await relay.accounts.create(me, { name: "Treasury", workspace: "custody", assetId: "BTC" }, { idempotencyKey: "k1" })
const refused = await relay.accounts.get(me, "00000000-0000-7000-8000-000000000000").catch((error) => error)
console.log(account.status, again.id === account.id, refused instanceof RelayError.NotFound)
await relay.dispose()
`)
    assert.strictEqual(stdout.trim(), "pending_approval true true")
  })

  it("the handler on node:http (examples/express.ts and its siblings mount this handler)", async () => {
    const { stdout } = await node("handler.mjs", `
import { Administration, Permission } from "@custody-relay/core"
import { makeHandler } from "@custody-relay/http"
import { serve } from "@custody-relay/http/node"
import { Redacted } from "effect"
const handler = makeHandler({ logLevel: "Warn" })
await handler.ready
const client = await handler.runtime.runPromise(Administration.createClient("Acme"))
const key = await handler.runtime.runPromise(Administration.createApiUser({ clientId: client.id, permissions: Permission.permissionNames }))
const { url, close } = await serve(handler, { port: 0 })
const answer = await fetch(url + "/relay/v1/accounts", { headers: { "x-api-key": key.keyId, "x-api-secret": Redacted.value(key.secret) } })
console.log(answer.status, (await answer.json()).total)
await close()
await handler.dispose()
`)
    assert.strictEqual(stdout.trim(), "200 0")
  })

  it("an Effect program on SQLite through @custody-relay/storage-sql (examples/effectBackend.ts)", async () => {
    const { stdout } = await node("effect.mjs", `
import { Accounts, Administration, Authentication, Permission, Relay } from "@custody-relay/core"
import { layerSqlite } from "@custody-relay/storage-sql"
import { Effect, Redacted } from "effect"
const program = Effect.gen(function* () {
  const client = yield* Administration.createClient("Acme")
  const key = yield* Administration.createApiUser({ clientId: client.id, permissions: Permission.permissionNames })
  const me = yield* Authentication.authenticate(key.keyId, Redacted.value(key.secret))
  const account = yield* Accounts.create(me, { name: "Treasury", workspace: "custody", assetId: "ETH" })
  return (yield* Accounts.list(me, {}, { page: 1, limit: 20 })).items.map((item) => item.id === account.id)
})
console.log(JSON.stringify(await Effect.runPromise(program.pipe(Effect.provide(Relay.layer(layerSqlite({ filename: "relay.db" })))))))
`)
    assert.strictEqual(stdout.trim(), "[true]")
  })

  it("a consumer that emits declarations names every type it uses (no TS2883)", async () => {
    writeFileSync(join(app(), "tsconfig.json"), JSON.stringify({ compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", declaration: true, strict: true, skipLibCheck: true, outDir: "out" }, include: ["consumer.ts"] }))
    writeFileSync(join(app(), "consumer.ts"), `
import { Accounts, Relay, Transactions } from "@custody-relay/core"
import { createRelay as createCore } from "@custody-relay/core/promise"
import { makeHandler } from "@custody-relay/http"
import { createRelay } from "@custody-relay/server"
import { layerSqlite } from "@custody-relay/storage-sql"
import { runConformance } from "@custody-relay/conformance"
export const relay = () => createRelay({ database: ":memory:" })
export const core = createCore()
export const handler = makeHandler({})
export const layer = Relay.layer(layerSqlite({ filename: ":memory:" }))
export const create = Accounts.create
export const initiate = Transactions.initiate
export const quote = Transactions.quoteFee
export const conformance = () => runConformance({ target: { baseUrl: "http://127.0.0.1:1" } })
`)
    const outcome = await run(process.execPath, [tsc, "-p", "."], { cwd: app() }).then(() => "", (error: { stdout: string }) => error.stdout)
    assert.strictEqual(outcome, "")
  }, 120_000)

  it("the custody-relay bin: migrate, admin creates credentials, serve answers 200 with them", async () => {
    const bin = join(app(), "node_modules", ".bin", "custody-relay")
    const env = { ...process.env, RELAY_DATABASE: join(app(), "served.db"), RELAY_DEMO: "never", PORT: "0", RELAY_LOG_LEVEL: "Warn" }
    await run(bin, ["migrate"], { cwd: app(), env })
    const client = JSON.parse((await run(bin, ["admin", "clients", "create", "--name", "Acme", "--json"], { cwd: app(), env })).stdout) as { id: string }
    const key = JSON.parse((await run(bin, ["admin", "api-users", "create", "--client", client.id, "--permission", "View custody account", "--json"], { cwd: app(), env })).stdout) as { keyId: string; secret: string }
    const server = spawn(bin, [], { cwd: app(), env, stdio: ["ignore", "pipe", "inherit"] })
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = ""
        server.stdout.on("data", (chunk: Buffer) => {
          out += chunk.toString()
          const found = /listening on (\S+)/.exec(out)
          if (found?.[1] !== undefined && out.includes("custody-relay ready")) resolve(found[1])
        })
        server.once("exit", (code) => reject(new Error(`the server exited ${code}: ${out}`)))
      })
      const answer = await fetch(`${url}/relay/v1/accounts`, { headers: { "x-api-key": key.keyId, "x-api-secret": key.secret } })
      assert.strictEqual(answer.status, 200)
      // The API reference's renderer ships in the server's build; its npm package, and the Vue application it brings,
      // is not installed.
      const reference = await fetch(`${url}/docs/reference.js`)
      assert.strictEqual(reference.status, 200)
      assert.isAbove((await reference.text()).length, 1_000_000)
      assert.isFalse(existsSync(join(app(), "node_modules", "@scalar")))
    } finally {
      server.kill("SIGTERM")
    }
    const help = await run(join(app(), "node_modules", ".bin", "custody-relay-conformance"), ["--help"], { cwd: app() })
    assert.include(help.stdout, "custody-relay-conformance")
  }, 120_000)
})
