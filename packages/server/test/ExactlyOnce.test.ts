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
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import { type ServerProcess, startServer } from "./ServerProcess.js"
import {
  type Answer,
  dropDatabases,
  expectReconciled,
  field,
  hasPostgres,
  newPostgresDatabase,
  send,
  serverEnv,
  tenantOn,
  transactionsOf,
  transfer
} from "./Tenant.js"

if (!hasPostgres) {
  console.log("ExactlyOnce.test.ts: the PostgreSQL cases are skipped because RELAY_TEST_PG_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/postgres)")
}

const directory = mkdtempSync(join(tmpdir(), "relay-exactly-once-"))
afterAll(async () => {
  rmSync(directory, { recursive: true, force: true })
  await dropDatabases()
}, 60_000)

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

/**
 * A burst of keyed initiations of `amountOf(key)` from a source holding `funds`, with the server killed
 * (SIGKILL) mid-burst `ROUNDS` times and restarted on the same database; then every key retried until it has a
 * final answer (201, or a 400 refusal). Answers the answers per key, the last server and the tenant.
 */
const burstThroughKills = async (database: string, funds: string, amountOf: (index: number) => string) => {
  const env = serverEnv(database)
  let server = await startServer(env)
  const tenant = await tenantOn(server, funds)
  const keys = Array.from({ length: KEYS }, (_, i) => `burst-${i}`)
  const answers = new Map<string, Array<Answer>>(keys.map((key) => [key, []]))
  let cutOff = 0
  let answered = 0
  const fire = (node: ServerProcess, key: string) =>
    send(`${node.url}/relay/v1/transactions/initiate`, "POST", { ...tenant.auth, "idempotency-key": key }, transfer(tenant, amountOf(keys.indexOf(key))))
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
    // Every key until it has a final answer (a 5xx while a node restarts would be retried too).
    const final = (key: string) => (answers.get(key) ?? []).some((a) => a.status === 201 || a.status === 400)
    for (const key of keys) {
      for (let attempt = 0; attempt < 20 && !final(key); attempt++) await fire(server, key)
    }
  } catch (error) {
    await server.stop("SIGKILL")
    throw error
  }
  console.log(`ExactlyOnce: ${cutOff} requests cut off by the kills, ${KEYS} keys, ${ROUNDS} kills`)
  return { keys, answers, server, tenant }
}

for (const engine of engines) {
  describe.skipIf(engine.skip)(`exactly-once through crashes: ${engine.name}`, () => {
    it(`a burst of ${KEYS} keyed initiations, the server killed with SIGKILL ${ROUNDS} times, every key retried until answered: one transaction per key`, async () => {
      const funds = "100"
      const { keys, answers, server, tenant } = await burstThroughKills(await engine.database(), funds, (i) => `0.0${(i % 9) + 1}`)
      try {
        const ids = new Set<string>()
        for (const key of keys) {
          const succeeded = (answers.get(key) ?? []).filter((a) => a.status === 201)
          expect(succeeded.length, `key ${key}`).toBeGreaterThan(0)
          expect(new Set(succeeded.map((a) => a.text)).size, `every answer for ${key} is the first one, byte for byte`).toBe(1)
          expect((answers.get(key) ?? []).every((a) => a.status === 201), `key ${key}: ${(answers.get(key) ?? []).map((a) => a.status).join(",")}`).toBe(true)
          ids.add(String(field(succeeded[0]!, "id")))
        }
        expect(ids.size).toBe(KEYS)
        const stored = await transactionsOf(server, tenant)
        expect(new Set(stored.map((t) => String(t["id"])))).toEqual(ids)
        await expectReconciled(server, tenant, funds)
      } finally {
        await server.stop("SIGKILL")
      }
    }, 120_000)

    it("TXN-INIT-1: the same through kills with funds for three transfers only: three keys get their transfer, every other key a refusal that kept nothing", async () => {
      const funds = "1"
      const { keys, answers, server, tenant } = await burstThroughKills(await engine.database(), funds, () => "0.3")
      try {
        const accepted = new Set<string>()
        for (const key of keys) {
          const all = answers.get(key) ?? []
          const succeeded = all.filter((a) => a.status === 201)
          expect(all.some((a) => a.status === 201 || a.status === 400), `key ${key} has a final answer`).toBe(true)
          // A key is either a transfer, replayed byte for byte, or refused: never both.
          expect(succeeded.length === 0 || all.every((a) => a.status === 201), `key ${key}: ${all.map((a) => a.status).join(",")}`).toBe(true)
          expect(new Set(succeeded.map((a) => a.text)).size).toBeLessThanOrEqual(1)
          if (succeeded.length > 0) accepted.add(String(field(succeeded[0]!, "id")))
        }
        expect(accepted.size).toBe(3)
        const stored = await transactionsOf(server, tenant)
        expect(new Set(stored.map((t) => String(t["id"])))).toEqual(accepted)
        await expectReconciled(server, tenant, funds)
      } finally {
        await server.stop("SIGKILL")
      }
    }, 120_000)
  })
}
