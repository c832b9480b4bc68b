/**
 * Exactly-once commands through real processes and real databases: a keyed initiation retried on another node
 * while the first still waits on a lock ends as one transaction, and a burst of keyed initiations with the server
 * killed (SIGKILL) at random moments, every key retried until answered, leaves exactly one transaction per key,
 * every answer for a key byte-identical, and balances that reconcile. The first needs PostgreSQL
 * (RELAY_TEST_PG_URL; skipped with a printed reason when unset); the second runs on a SQLite file and on it.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Money } from "@custody-relay/core"
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import { type ServerProcess, startServer } from "./ServerProcess.js"

const adminUrl = process.env["RELAY_TEST_PG_URL"]
const hasPostgres = adminUrl !== undefined && adminUrl !== ""
if (!hasPostgres) {
  console.log("ExactlyOnce.test.ts: the PostgreSQL cases are skipped because RELAY_TEST_PG_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/postgres)")
}

const TOKEN = "exactly-once-token"
const directory = mkdtempSync(join(tmpdir(), "relay-exactly-once-"))
const databases: Array<string> = []

const withAdmin = async <A>(work: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: adminUrl })
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}

/** A fresh PostgreSQL database for one test; dropped after the file's tests. */
const newPostgresDatabase = async (): Promise<string> => {
  const name = `relay_exactly_once_${process.pid}_${Date.now()}_${databases.length}`
  await withAdmin((client) => client.query(`CREATE DATABASE ${name}`))
  databases.push(name)
  const url = new URL(adminUrl ?? "")
  url.pathname = `/${name}`
  return url.toString()
}

afterAll(async () => {
  rmSync(directory, { recursive: true, force: true })
  if (hasPostgres) {
    for (const name of databases) await withAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  }
}, 60_000)

interface Answer {
  readonly status: number
  readonly text: string
  readonly replayed: boolean
}

const send = async (url: string, method: string, headers: Record<string, string>, body?: unknown): Promise<Answer> => {
  const response = await fetch(url, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  return { status: response.status, text: await response.text(), replayed: response.headers.get("idempotent-replayed") === "true" }
}

const field = (answer: Answer, name: string): unknown => (JSON.parse(answer.text) as Record<string, unknown>)[name]

const serverEnv = (database: string) => ({
  RELAY_DATABASE: database,
  RELAY_TEST_CONTROL_TOKEN: TOKEN,
  RELAY_DEMO: "never",
  RELAY_RATE_LIMIT: "1000000"
})

interface Tenant {
  readonly auth: Record<string, string>
  readonly source: string
  readonly destination: string
}

/** A client with one credential, a funded BTC source account and an active BTC destination, made through `node`. */
const tenantOn = async (node: ServerProcess, funds: string): Promise<Tenant> => {
  const control = (method: string, path: string, body?: unknown) =>
    send(`${node.url}/__control${path}`, method, { "x-control-token": TOKEN }, body)
  const clientId = String(field(await control("POST", "/clients"), "clientId"))
  const permissions = [
    "View custody account",
    "Initiate new custody account",
    "Approve new custody account",
    "Initiate account transactions",
    "View custody transaction list",
    "View custody transaction detail"
  ]
  const user = await control("POST", "/api-users", { clientId, permissions })
  const auth = { "x-api-key": String(field(user, "keyId")), "x-api-secret": String(field(user, "secret")) }
  const open = async (name: string) => {
    const created = await send(`${node.url}/relay/v1/accounts`, "POST", auth, { name, workspace: "custody", assetId: "BTC" })
    const id = String(field(created, "id"))
    await send(`${node.url}/relay/v1/accounts/approve`, "POST", auth, { accountId: id })
    return id
  }
  const source = await open("Source")
  const destination = await open("Destination")
  await control("POST", `/accounts/${source}/credit`, { amount: funds })
  return { auth, source, destination }
}

const transfer = (tenant: Tenant, amount: string) => ({
  sourceAccountId: tenant.source,
  destinationId: tenant.destination,
  destinationType: "internal",
  amount,
  assetType: "BTC"
})

/** Every transaction from the tenant's source, through the API (pages of 100). */
const transactionsOf = async (node: ServerProcess, tenant: Tenant) => {
  const all: Array<Record<string, unknown>> = []
  for (let page = 1; ; page++) {
    const answer = await send(`${node.url}/relay/v1/transactions?accountId=${tenant.source}&limit=100&page=${page}`, "GET", tenant.auth)
    const items = field(answer, "items") as ReadonlyArray<Record<string, unknown>>
    all.push(...items)
    if (items.length < 100) return all
  }
}

/** The source's available balance is its funds less what every open transaction reserved (amount plus fee). */
const expectReconciled = async (node: ServerProcess, tenant: Tenant, funds: string) => {
  const transactions = await transactionsOf(node, tenant)
  const reserved = transactions.map((t) => Money.add(Money.canonical(String(t["amount"])), Money.canonical(String(t["networkFee"]))))
  const account = await send(`${node.url}/relay/v1/accounts/${tenant.source}`, "GET", tenant.auth)
  expect(String(field(account, "availableBalance"))).toBe(Money.subtract(Money.canonical(funds), Money.sum(reserved)))
}

describe.skipIf(!hasPostgres)("exactly-once across two nodes on one PostgreSQL database", () => {
  it("a keyed initiation retried on the other node while the first waits on a held lock: one transaction, both answers name it", async () => {
    const database = await newPostgresDatabase()
    const first = await startServer(serverEnv(database))
    const second = await startServer(serverEnv(database))
    try {
      const tenant = await tenantOn(first, "10")
      const keyed = { ...tenant.auth, "idempotency-key": "held-lock-1" }
      const body = transfer(tenant, "1")
      // Another session holds the source account's row, as a long transaction or a stuck node would.
      const holder = new pg.Client({ connectionString: database })
      await holder.connect()
      await holder.query("BEGIN")
      await holder.query("SELECT id FROM accounts WHERE id = $1 FOR UPDATE", [tenant.source])
      const onFirst = send(`${first.url}/relay/v1/transactions/initiate`, "POST", keyed, body)
      await new Promise((resolve) => setTimeout(resolve, 1000))
      const onSecond = send(`${second.url}/relay/v1/transactions/initiate`, "POST", keyed, body)
      // However long the lock is held, the retry neither runs a second time nor takes the key over.
      await new Promise((resolve) => setTimeout(resolve, 2000))
      await holder.query("COMMIT")
      await holder.end()
      const answers = await Promise.all([onFirst, onSecond])
      expect(answers.map((a) => a.status)).toEqual([201, 201])
      expect(answers[1]?.text).toBe(answers[0]?.text)
      expect(answers.filter((a) => a.replayed).length).toBe(1)
      const transactions = await transactionsOf(second, tenant)
      expect(transactions.map((t) => t["id"])).toEqual([field(answers[0]!, "id")])
      await expectReconciled(first, tenant, "10")
      // The same key with another body is refused on either node, and changes nothing.
      const other = await send(`${second.url}/relay/v1/transactions/initiate`, "POST", keyed, transfer(tenant, "2"))
      expect(other.status).toBe(409)
      expect(field(other, "code")).toBe("IDEMPOTENCY_KEY_REUSED")
      expect((await transactionsOf(first, tenant)).length).toBe(1)
    } finally {
      await Promise.all([first.stop("SIGKILL"), second.stop("SIGKILL")])
    }
  })
})

const KEYS = 40
const ROUNDS = 3

const engines = [
  { name: "SQLite file", skip: false, database: async () => join(directory, `burst-${Date.now()}.db`) },
  { name: "PostgreSQL", skip: !hasPostgres, database: newPostgresDatabase }
]

for (const engine of engines) {
  describe.skipIf(engine.skip)(`exactly-once through crashes: ${engine.name}`, () => {
    it(`a burst of ${KEYS} keyed initiations, the server killed with SIGKILL ${ROUNDS} times, every key retried until answered: one transaction per key`, async () => {
      const database = await engine.database()
      const env = serverEnv(database)
      let server = await startServer(env)
      const funds = "100"
      const tenant = await tenantOn(server, funds)
      const keys = Array.from({ length: KEYS }, (_, i) => `burst-${i}`)
      const answers = new Map<string, Array<Answer>>(keys.map((key) => [key, []]))
      let cutOff = 0
      let answered = 0
      const fire = (node: ServerProcess, key: string) =>
        send(`${node.url}/relay/v1/transactions/initiate`, "POST", { ...tenant.auth, "idempotency-key": key }, transfer(tenant, `0.0${(keys.indexOf(key) % 9) + 1}`))
          .then((answer) => {
            answered++
            answers.get(key)?.push(answer)
          })
          // The process died under the request: no answer, retried below.
          .catch(() => {
            cutOff++
          })
      try {
        for (let round = 0; round < ROUNDS; round++) {
          const node = server
          // The kill lands mid-burst: after a random number of answers, while the rest are being served.
          const killAfter = 1 + Math.floor(Math.random() * (KEYS - 2))
          answered = 0
          const inFlight = keys.map((key) => fire(node, key))
          for (let waited = 0; answered < killAfter && waited < 5000; waited += 2) await new Promise((resolve) => setTimeout(resolve, 2))
          await node.stop("SIGKILL")
          await Promise.all(inFlight)
          server = await startServer(env)
        }
        // Every key until it is answered with a 2xx (a 5xx while a node restarts would be retried too).
        for (const key of keys) {
          for (let attempt = 0; attempt < 20 && !(answers.get(key) ?? []).some((a) => a.status === 201); attempt++) await fire(server, key)
        }
        const ids = new Set<string>()
        for (const key of keys) {
          const succeeded = (answers.get(key) ?? []).filter((a) => a.status === 201)
          expect(succeeded.length, `key ${key}`).toBeGreaterThan(0)
          expect(new Set(succeeded.map((a) => a.text)).size, `every answer for ${key} is the first one, byte for byte`).toBe(1)
          expect((answers.get(key) ?? []).every((a) => a.status === 201), `key ${key}: ${(answers.get(key) ?? []).map((a) => a.status).join(",")}`).toBe(true)
          ids.add(String(field(succeeded[0]!, "id")))
        }
        console.log(`ExactlyOnce ${engine.name}: ${cutOff} requests cut off by the kills, ${KEYS} keys, ${ROUNDS} kills`)
        expect(ids.size).toBe(KEYS)
        const stored = await transactionsOf(server, tenant)
        expect(new Set(stored.map((t) => String(t["id"])))).toEqual(ids)
        await expectReconciled(server, tenant, funds)
      } finally {
        await server.stop("SIGKILL")
      }
    }, 120_000)
  })
}
