/**
 * createRelay on SQLite, the way the conformance kit and the server's entry point use it: an in-memory database,
 * and a file whose data, rate-limit windows and Idempotency-Key records survive a restart.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ApiUser, Permission } from "@custody-relay/core"
import Database from "better-sqlite3"
import { Effect } from "effect"
import * as fc from "fast-check"
import { afterAll, describe, expect, it } from "vitest"
import { createRelay, nodeSecretDigest } from "../src/index.js"

const directory = mkdtempSync(join(tmpdir(), "relay-server-"))
afterAll(() => rmSync(directory, { recursive: true, force: true }))

type Handler = (request: Request) => Promise<Response>

const call = async (handler: Handler, method: string, path: string, headers: Record<string, string>, body?: unknown) => {
  const response = await handler(new Request(`http://relay.test${path}`, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  }))
  const text = await response.text()
  return { status: response.status, headers: response.headers, text, body: text === "" ? undefined : (JSON.parse(text) as Record<string, unknown>) }
}

const provision = async (handler: Handler, token: string) => {
  const control = { "x-control-token": token }
  const client = await call(handler, "POST", "/__control/clients", control)
  const user = await call(handler, "POST", "/__control/api-users", control, { clientId: client.body?.["clientId"], permissions: Permission.permissionNames })
  return { "x-api-key": String(user.body?.["keyId"]), "x-api-secret": String(user.body?.["secret"]) }
}

describe("createRelay", () => {
  it("GEN-JSON-1: the conformance kit's call: in-memory SQLite, control token, generous rate limit", async () => {
    const relay = await createRelay({ database: ":memory:", controlToken: "x", rateLimit: { limit: 100000, windowSeconds: 60 } })
    try {
      const auth = await provision(relay.handler, "x")
      const created = await call(relay.handler, "POST", "/relay/v1/accounts", auth, { name: "Main", workspace: "custody", assetId: "BTC" })
      expect(created.status).toBe(201)
      const approved = await call(relay.handler, "POST", "/relay/v1/accounts/approve", auth, { accountId: created.body?.["id"] })
      expect(approved.body).toEqual({ accountId: created.body?.["id"], status: "approved" })
      // ACC-ACTIVE-1, our server's profile: the simulated provider activates an approved account at once.
      const got = await call(relay.handler, "GET", `/relay/v1/accounts/${String(created.body?.["id"])}`, auth)
      expect(got.body?.["status"]).toBe("active")
      expect(got.headers.get("x-ratelimit-limit")).toBe("100000")
    } finally {
      await relay.close()
    }
  })

  it("without a control token /__control does not exist", async () => {
    const relay = await createRelay({})
    try {
      expect((await call(relay.handler, "POST", "/__control/clients", { "x-control-token": "" })).status).toBe(404)
    } finally {
      await relay.close()
    }
  })

  it("a SQLite file keeps data, rate-limit windows and Idempotency-Key records across a restart", async () => {
    const database = join(directory, "restart.db")
    const first = await createRelay({ database, controlToken: "t", rateLimit: { limit: 50, windowSeconds: 3600 }, rateLimitStore: "database" })
    let auth: Record<string, string>
    let created: Awaited<ReturnType<typeof call>>
    try {
      auth = await provision(first.handler, "t")
      created = await call(first.handler, "POST", "/relay/v1/accounts", { ...auth, "idempotency-key": "restart-1" }, { name: "Durable", workspace: "custody", assetId: "ETH" })
      expect(created.status).toBe(201)
    } finally {
      await first.close()
    }
    const second = await createRelay({ database, rateLimit: { limit: 50, windowSeconds: 3600 }, rateLimitStore: "database" })
    try {
      const replay = await call(second.handler, "POST", "/relay/v1/accounts", { ...auth, "idempotency-key": "restart-1" }, { name: "Durable", workspace: "custody", assetId: "ETH" })
      expect(replay.status).toBe(201)
      expect(replay.text).toBe(created.text)
      expect(replay.headers.get("idempotent-replayed")).toBe("true")
      const list = await call(second.handler, "GET", "/relay/v1/accounts", auth)
      expect(list.body?.["total"]).toBe(1)
      expect(Number(list.headers.get("x-ratelimit-remaining"))).toBeLessThanOrEqual(47)
    } finally {
      await second.close()
    }
  })

  it("an Idempotency-Key keeps its result for idempotencyKeyTtlSeconds (RELAY_IDEMPOTENCY_KEY_TTL_SECONDS): a retry within it is replayed, one after it runs anew", async () => {
    const relay = await createRelay({ database: ":memory:", controlToken: "t", idempotencyKeyTtlSeconds: 1 })
    try {
      const auth = { ...(await provision(relay.handler, "t")), "idempotency-key": "short-lived" }
      const account = { name: "Short", workspace: "custody", assetId: "ETH" }
      const created = await call(relay.handler, "POST", "/relay/v1/accounts", auth, account)
      const retried = await call(relay.handler, "POST", "/relay/v1/accounts", auth, account)
      expect([created.status, retried.text, retried.headers.get("idempotent-replayed")]).toEqual([201, created.text, "true"])
      // Within its time to live the key is the first command's: another body under it is refused.
      const other = { ...account, name: "Short 2" }
      expect((await call(relay.handler, "POST", "/relay/v1/accounts", auth, other)).status).not.toBe(201)
      await new Promise((resolve) => setTimeout(resolve, 1_100))
      const later = await call(relay.handler, "POST", "/relay/v1/accounts", auth, other)
      expect(later.status).toBe(201)
      expect(later.headers.get("idempotent-replayed")).toBeNull()
      expect(later.body?.["id"]).not.toBe(created.body?.["id"])
    } finally {
      await relay.close()
    }
  })

  it("LIM-RATE-1: on SQLite the windows are counted in memory by default, in the database when asked (per request, or synced)", async () => {
    const windowsIn = async (rateLimitStore: "database" | "memory" | "synced" | undefined) => {
      const database = join(directory, `windows-${rateLimitStore ?? "default"}.db`)
      const relay = await createRelay({ database, controlToken: "t", ...(rateLimitStore === undefined ? {} : { rateLimitStore }) })
      try {
        const auth = await provision(relay.handler, "t")
        expect((await call(relay.handler, "GET", "/relay/v1/accounts", auth)).headers.get("x-ratelimit-remaining")).toBe("599")
      } finally {
        await relay.close()
      }
      const db = new Database(database, { readonly: true })
      try {
        return (db.prepare("SELECT count(*) AS n FROM rate_limit_windows").get() as { n: number }).n
      } finally {
        db.close()
      }
    }
    expect(await windowsIn(undefined)).toBe(0)
    expect(await windowsIn("memory")).toBe(0)
    expect(await windowsIn("database")).toBe(1)
    // Synced: the window reaches the database at the next round or, at the latest, when the relay closes.
    expect(await windowsIn("synced")).toBe(1)
  })

  it("a database that cannot be opened fails createRelay with a message, not a hang", async () => {
    await expect(createRelay({ database: join(directory, "missing-dir", "x", "relay.db") })).rejects.toBeDefined()
  })

  it("AUTH-SEC-1: secrets are hashed with node's SHA-256, which gives exactly the core's text", async () => {
    // A hash stored by one implementation is checked by the other (the operator CLI, another node, the core's
    // default elsewhere), so they must agree on every string, lone surrogates included.
    fc.assert(fc.property(fc.oneof(fc.string(), fc.string({ unit: "binary" })), (secret) => nodeSecretDigest(secret) === ApiUser.hashSecret(secret)))
    const relay = await createRelay({ database: ":memory:" })
    try {
      const digest = await relay.handler.runtime.runPromise(Effect.gen(function*() {
        return yield* ApiUser.SecretDigest
      }))
      expect(digest).toBe(nodeSecretDigest)
    } finally {
      await relay.close()
    }
  })
})
