/**
 * Several nodes: two server processes on one PostgreSQL database serve the same data, share one rate-limit
 * budget per key (LIM-RATE-1), honour each other's Idempotency-Key records, and never double-spend when initiations race across them. Needs RELAY_TEST_PG_URL
 * (a server where the test may create and drop its own database); without it the suite says why and is skipped.
 */
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ServerProcess, startServer } from "./ServerProcess.js"

const adminUrl = process.env["RELAY_TEST_PG_URL"]
if (adminUrl === undefined || adminUrl === "") {
  console.log("MultiNode.test.ts: skipped because RELAY_TEST_PG_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/postgres)")
}

const databaseName = `relay_multinode_${process.pid}_${Date.now()}`
const TOKEN = "multi-node-token"

/** The test's own database, which both nodes serve. */
const databaseUrl = () => {
  const url = new URL(adminUrl ?? "")
  url.pathname = `/${databaseName}`
  return url.toString()
}

/** One statement on a connection of its own. */
const runSql = async (connectionString: string | undefined, sql: string, parameters: ReadonlyArray<unknown> = []) => {
  const client = new pg.Client({ connectionString })
  await client.connect()
  try {
    await client.query(sql, [...parameters])
  } finally {
    await client.end()
  }
}

const withAdmin = (sql: string) => runSql(adminUrl, sql)

const json = async (url: string, method: string, headers: Record<string, string>, body?: unknown) => {
  const response = await fetch(url, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  return { status: response.status, headers: response.headers, body: (text === "" ? {} : JSON.parse(text)) as Record<string, unknown> }
}

describe.skipIf(adminUrl === undefined || adminUrl === "")("two nodes on one PostgreSQL database", () => {
  let nodes: ReadonlyArray<ServerProcess> = []

  beforeAll(async () => {
    await withAdmin(`CREATE DATABASE ${databaseName}`)
    const env = { RELAY_DATABASE: databaseUrl(), RELAY_TEST_CONTROL_TOKEN: TOKEN, RELAY_RATE_LIMIT: "40", RELAY_RATE_WINDOW_SECONDS: "3600", RELAY_DEFAULT_QUORUM: "0" }
    // One node first, so only one runs the migrations while the other waits on their lock... then both.
    const first = await startServer(env)
    const second = await startServer(env)
    nodes = [first, second]
  }, 60_000)

  afterAll(async () => {
    await Promise.all(nodes.map((node) => node.stop()))
    if (adminUrl !== undefined && adminUrl !== "") await withAdmin(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`)
  }, 60_000)

  const control = (node: ServerProcess, method: string, path: string, body?: unknown) =>
    json(`${node.url}/__control${path}`, method, { "x-control-token": TOKEN }, body)

  it("SCOPE-2 LIM-RATE-1: data written through one node is read through the other; the key's budget is shared", async () => {
    const [a, b] = nodes
    if (a === undefined || b === undefined) throw new Error("nodes did not start")
    const clientId = String((await control(a, "POST", "/clients")).body["clientId"])
    const user = (await control(b, "POST", "/api-users", { clientId, permissions: ["View custody account", "Initiate new custody account"] })).body
    const auth = { "x-api-key": String(user["keyId"]), "x-api-secret": String(user["secret"]) }
    const created = await json(`${a.url}/relay/v1/accounts`, "POST", auth, { name: "Shared", workspace: "custody", assetId: "BTC" })
    expect(created.status).toBe(201)
    const read = await json(`${b.url}/relay/v1/accounts/${String(created.body["id"])}`, "GET", auth)
    expect(read.status).toBe(200)
    expect(read.body["name"]).toBe("Shared")

    const remaining: Array<number> = []
    for (let i = 0; i < 6; i++) {
      const node = i % 2 === 0 ? a : b
      remaining.push(Number((await json(`${node.url}/relay/v1/accounts`, "GET", auth)).headers.get("x-ratelimit-remaining")))
    }
    // 40 per window: 1 create + 1 read + 6 lists = 8 spent, whichever node answered.
    expect(remaining).toEqual([37, 36, 35, 34, 33, 32])
  })

  it("TXN-INIT-1: concurrent initiations across both nodes never spend one balance twice", async () => {
    const [a, b] = nodes
    if (a === undefined || b === undefined) throw new Error("nodes did not start")
    const clientId = String((await control(a, "POST", "/clients")).body["clientId"])
    const permissions = ["View custody account", "Initiate new custody account", "Approve new custody account", "Initiate account transactions", "View custody transaction list"]
    const users = await Promise.all([0, 1, 2, 3].map(async () => (await control(a, "POST", "/api-users", { clientId, permissions })).body))
    const authOf = (i: number) => ({ "x-api-key": String(users[i % users.length]?.["keyId"]), "x-api-secret": String(users[i % users.length]?.["secret"]) })
    const open = async (name: string) => {
      const id = String((await json(`${a.url}/relay/v1/accounts`, "POST", authOf(0), { name, workspace: "custody", assetId: "BTC" })).body["id"])
      await json(`${a.url}/relay/v1/accounts/approve`, "POST", authOf(0), { accountId: id })
      return id
    }
    const source = await open("Source")
    const destination = await open("Destination")
    await control(b, "POST", `/accounts/${source}/credit`, { amount: "1" })

    // Each transfer reserves 0.3 BTC plus its fee, so at most three of the twelve can succeed.
    const attempts = await Promise.all(Array.from({ length: 12 }, (_, i) =>
      json(`${(i % 2 === 0 ? a : b).url}/relay/v1/transactions/initiate`, "POST", authOf(i), {
        sourceAccountId: source,
        destinationId: destination,
        destinationType: "internal",
        amount: "0.3",
        assetType: "BTC"
      })))
    const statuses = attempts.map((r) => r.status)
    const succeeded = statuses.filter((s) => s === 201).length
    expect(statuses.every((s) => s === 201 || s === 400)).toBe(true)
    expect(succeeded).toBe(3)
    const account = await json(`${b.url}/relay/v1/accounts/${source}`, "GET", authOf(1))
    const balance = Number(account.body["availableBalance"])
    expect(balance).toBeGreaterThanOrEqual(0)
    expect(balance).toBeLessThan(0.1)
    const listed = await json(`${a.url}/relay/v1/transactions?accountId=${source}`, "GET", authOf(2))
    expect(listed.body["total"]).toBe(3)
  })

  it("LIM-RATE-2: the control's PUT /rate-limit on one node applies to keys the other node creates afterwards, on both nodes", async () => {
    const [a, b] = nodes
    if (a === undefined || b === undefined) throw new Error("nodes did not start")
    const clientId = String((await control(a, "POST", "/clients")).body["clientId"])
    expect((await control(a, "PUT", "/rate-limit", { limit: 7, windowSeconds: 600 })).status).toBe(200)
    try {
      const user = (await control(b, "POST", "/api-users", { clientId, permissions: ["View custody account"] })).body
      const auth = { "x-api-key": String(user["keyId"]), "x-api-secret": String(user["secret"]) }
      for (const node of [a, b]) expect((await json(`${node.url}/relay/v1/accounts`, "GET", auth)).headers.get("x-ratelimit-limit")).toBe("7")
    } finally {
      await control(b, "PUT", "/rate-limit", { limit: 40, windowSeconds: 3600 })
    }
  })

  it("AUTH-PERM-2: a change made through one node, or by SQL, applies to the very next request on a node that keeps the credential", async () => {
    const [a, b] = nodes
    if (a === undefined || b === undefined) throw new Error("nodes did not start")
    const clientId = String((await control(a, "POST", "/clients")).body["clientId"])
    const user = (await control(b, "POST", "/api-users", { clientId, permissions: ["View custody account", "Initiate new custody account"] })).body
    const apiUserId = String(user["apiUserId"])
    const auth = { "x-api-key": String(user["keyId"]), "x-api-secret": String(user["secret"]) }
    const created = await json(`${a.url}/relay/v1/accounts`, "POST", auth, { name: "Kept", workspace: "custody", assetId: "BTC" })
    expect(created.status).toBe(201)
    const getOnA = async () => (await json(`${a.url}/relay/v1/accounts/${String(created.body["id"])}`, "GET", auth)).status
    const setPermissions = async (permissions: ReadonlyArray<string>) =>
      expect((await control(b, "PUT", `/api-users/${apiUserId}/permissions`, { permissions })).status).toBe(200)
    // Node a keeps the credential from its first request on.
    expect([await getOnA(), await getOnA()]).toEqual([200, 200])

    await setPermissions(["Initiate new custody account"])
    expect(await getOnA()).toBe(403)
    // A permission granted applies too: a refusal on the kept credential is answered only after its row is read again.
    await setPermissions(["View custody account", "Initiate new custody account"])
    expect(await getOnA()).toBe(200)
    // Changed by hand in the database, not through any node.
    await runSql(databaseUrl(), "UPDATE api_users SET permissions = $1 WHERE id = $2", [JSON.stringify(["Initiate new custody account"]), apiUserId])
    expect(await getOnA()).toBe(403)
    await setPermissions(["View custody account", "Initiate new custody account"])
    expect(await getOnA()).toBe(200)

    // Revoked through node b: node a refuses the next request, a write on the kept credential, and stores nothing of it.
    expect((await control(b, "POST", `/api-users/${apiUserId}/revoke`)).status).toBe(200)
    const refused = await json(`${a.url}/relay/v1/accounts`, "POST", auth, { name: "After revocation", workspace: "custody", assetId: "BTC" })
    expect(refused.status).toBe(401)
    expect(await getOnA()).toBe(401)
    const admin = (await control(a, "POST", "/api-users", { clientId, permissions: ["View custody account"] })).body
    const listed = await json(`${b.url}/relay/v1/accounts`, "GET", { "x-api-key": String(admin["keyId"]), "x-api-secret": String(admin["secret"]) })
    expect(listed.body["total"]).toBe(1)
  })

  it("an Idempotency-Key used on one node is replayed by the other, and conflicts there too", async () => {
    const [a, b] = nodes
    if (a === undefined || b === undefined) throw new Error("nodes did not start")
    const clientId = String((await control(a, "POST", "/clients")).body["clientId"])
    const user = (await control(a, "POST", "/api-users", { clientId, permissions: ["Initiate new custody account"] })).body
    const auth = { "x-api-key": String(user["keyId"]), "x-api-secret": String(user["secret"]), "idempotency-key": "cross-node-1" }
    const body = { name: "Once only", workspace: "custody", assetId: "ETH" }
    const first = await json(`${a.url}/relay/v1/accounts`, "POST", auth, body)
    const replay = await json(`${b.url}/relay/v1/accounts`, "POST", auth, body)
    expect(first.status).toBe(201)
    expect(replay.status).toBe(201)
    expect(replay.body).toEqual(first.body)
    expect(replay.headers.get("idempotent-replayed")).toBe("true")
    const conflict = await json(`${b.url}/relay/v1/accounts`, "POST", auth, { ...body, name: "Another" })
    expect(conflict.status).toBe(409)
    expect(conflict.body["code"]).toBe("IDEMPOTENCY_KEY_REUSED")
  })
})
