/**
 * Where a relay request's time goes, measured in-process (no sockets), each step on its own: the Effect runtime,
 * authentication, a storage unit on SQLite, and the whole handler on memory and on SQLite storage, both as the node
 * server runs it (a request in the pipeline's own terms, the finished reply out: `serveIncoming`) and through the
 * Web face (`Request` in, `Response` out). Prints microseconds per call after a warm-up; asserts nothing.
 * Run: pnpm --filter @custody-relay/server run bench:hotpath
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Administration, ApiUser, Authentication, Relay, Storage } from "@custody-relay/core"
import { makeHandler, type RelayHandler } from "@custody-relay/http"
import { type Incoming, serveIncoming } from "@custody-relay/http/node"
import { Effect, Logger, ManagedRuntime, Redacted } from "effect"
import { nodeSecretDigest } from "../src/NodeSecretDigest.js"
import { fromDatabase } from "../src/StorageLayer.js"

const ITERATIONS = Number(process.env["BENCH_ITERATIONS"] ?? 20_000)
const silent = Logger.make(() => undefined)

const measure = async (label: string, run: () => Promise<unknown>): Promise<void> => {
  for (let i = 0; i < ITERATIONS; i++) await run()
  const started = performance.now()
  for (let i = 0; i < ITERATIONS; i++) await run()
  const micros = ((performance.now() - started) / ITERATIONS) * 1000
  process.stdout.write(`${label.padEnd(70)} ${micros.toFixed(1).padStart(7)} µs\n`)
}

/** A GET as node's adapter hands it to the pipeline (what `fromIncomingMessage` makes of an IncomingMessage). */
const incomingGet = (path: string, headers: Readonly<Record<string, string>>): Incoming => {
  const mark = path.indexOf("?")
  return {
    method: "GET",
    pathname: mark < 0 ? path : path.slice(0, mark),
    query: mark < 0 ? "" : path.slice(mark + 1),
    header: (name) => headers[name] ?? null,
    body: () => null
  }
}

/** The reply as the node adapter receives it: at once for a request that never waits. */
const served = async (handler: RelayHandler<unknown>, request: Incoming): Promise<number> => (await handler[serveIncoming](request)).status

const provision = async (handler: RelayHandler<unknown>) => {
  const client = await handler.runtime.runPromise(Administration.createClient())
  const credential = await handler.runtime.runPromise(
    Administration.createApiUser({ clientId: client.id, permissions: ["View custody account", "Initiate new custody account"] })
  )
  const headers = { "x-api-key": credential.keyId, "x-api-secret": Redacted.value(credential.secret) }
  const created = await handler(new Request("http://relay/relay/v1/accounts", {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ name: "Hot path", workspace: "custody", assetId: "BTC" })
  }))
  const { id } = (await created.json()) as { id: string }
  return { headers, accountId: id, keyId: credential.keyId, secret: Redacted.value(credential.secret) }
}

const main = async () => {
  const directory = mkdtempSync(join(tmpdir(), "relay-hotpath-"))
  process.stdout.write(`${ITERATIONS} sequential calls each, after as many to warm up\n\n`)
  try {
    // The secret's SHA-256 on node's crypto, as the server runs it (createRelay).
    const memory = makeHandler({ layer: Relay.layerMemory({ secretDigest: nodeSecretDigest }), logger: silent, rateLimit: { limit: 1e9, windowSeconds: 60 } })
    const mem = await provision(memory)
    await measure("Effect runtime: runPromise(Effect.void)", () => memory.runtime.runPromise(Effect.void))
    const memoryAccount = incomingGet(`/relay/v1/accounts/${mem.accountId}`, mem.headers)
    await measure("handler, memory storage: GET account", () => served(memory, memoryAccount))
    await measure("handler, memory storage: GET account (Web Request/Response)", async () => {
      await (await memory(new Request(`http://relay/relay/v1/accounts/${mem.accountId}`, { headers: mem.headers }))).text()
    })
    const memoryList = incomingGet("/relay/v1/accounts", mem.headers)
    await measure("handler, memory storage: GET list", () => served(memory, memoryList))
    const unknown = incomingGet("/relay/v1/nothing", {})
    await measure("handler, memory storage: unknown route (no auth, no storage)", () => served(memory, unknown))
    await memory.dispose()

    for (const store of ["memory", "database"] as const) {
      const sqlite = makeHandler({
        layer: Relay.layer(fromDatabase(join(directory, `hot-${store}.db`), store), { secretDigest: nodeSecretDigest }),
        logger: silent,
        rateLimit: { limit: 1e9, windowSeconds: 60 }
      })
      await sqlite.ready
      const sql = await provision(sqlite)
      const account = incomingGet(`/relay/v1/accounts/${sql.accountId}`, sql.headers)
      await measure(`handler, SQLite, ${store} rate limiter: GET account`, () => served(sqlite, account))
      const list = incomingGet("/relay/v1/accounts", sql.headers)
      await measure(`handler, SQLite, ${store} rate limiter: GET list`, () => served(sqlite, list))
      if (store === "memory") {
        const runtime: ManagedRuntime.ManagedRuntime<Relay.RelayServices, unknown> = sqlite.runtime
        await measure("SQLite: read unit with no query (begin + commit)", () => runtime.runPromise(Storage.run("read", () => Effect.void)))
        await measure("SQLite: read unit with one query (API user by key id)", () =>
          runtime.runPromise(Storage.run("read", (unit) => unit.findApiUserByKeyId(sql.keyId))))
        await measure("SQLite: Authentication.authenticate (key lookup + node's SHA-256)", () =>
          runtime.runPromise(Authentication.authenticate(sql.keyId, sql.secret)))
        await measure("SQLite: Authentication.authenticate (key lookup + the core's SHA-256)", () =>
          runtime.runPromise(Effect.provideService(Authentication.authenticate(sql.keyId, sql.secret), ApiUser.SecretDigest, ApiUser.hashSecret)))
      }
      await sqlite.dispose()
    }
  } finally {
    rmSync(directory, { recursive: true, force: true })
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`)
  process.exit(1)
})
