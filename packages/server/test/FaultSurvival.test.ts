/**
 * Two relay processes on one PostgreSQL database, through the faults an operator meets: every backend of the
 * database terminated again and again during a burst (a failover, a restart, a network blip), opposite transfers
 * that lock two accounts in both directions at once, a row lock held while other clients read, a database that stops
 * answering, and a start before the database exists. Both processes stay up, every request gets an answer (a 5xx only as 503 with Retry-After),
 * nothing is half-written, balances reconcile. Needs RELAY_TEST_PG_URL; skipped with a printed reason when unset.
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import pg from "pg"
import { Webhook } from "standardwebhooks"
import { afterAll, describe, expect, it } from "vitest"
import { type ServerProcess, startServer } from "./ServerProcess.js"
import {
  type Answer,
  adminUrl,
  control,
  dropDatabases,
  expectReconciled,
  hasPostgres,
  newPostgresDatabase,
  send,
  serverEnv,
  type Tenant,
  tenantOn,
  transactionsOf,
  transfer,
  withAdmin,
  withDatabase
} from "./Tenant.js"

if (!hasPostgres) {
  console.log("FaultSurvival.test.ts: skipped because RELAY_TEST_PG_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/postgres)")
}

afterAll(dropDatabases, 60_000)

/** The same client's two accounts, the other way round: for transfers from the destination back to the source. */
const reversed = (tenant: Tenant): Tenant => ({ ...tenant, source: tenant.destination, destination: tenant.source })

/** Starts two nodes on a fresh database, with a tenant whose two accounts both hold `funds`. */
const twoNodes = async (funds: string, env: Record<string, string> = {}) => {
  const database = await newPostgresDatabase()
  const nodes = [await startServer({ ...serverEnv(database), ...env }), await startServer({ ...serverEnv(database), ...env })] as const
  const tenant = await tenantOn(nodes[0], funds)
  await control(nodes[0], "POST", `/accounts/${tenant.destination}/credit`, { amount: funds })
  return { database, nodes, tenant }
}

const stopAll = (nodes: ReadonlyArray<ServerProcess>) => Promise.all(nodes.map((node) => node.stop("SIGKILL")))

/** A request's outcome: its answer, or that the connection itself failed (which must never happen here). */
const attempt = (request: Promise<Answer>): Promise<Answer | "no answer"> => request.catch(() => "no answer" as const)

describe.skipIf(!hasPostgres)("fault survival on PostgreSQL, two nodes", () => {
  it("every backend terminated again and again during a burst of reads and transfers: both nodes stay up, every request is answered, balances reconcile", async () => {
    const { database, nodes, tenant } = await twoNodes("1000")
    const name = new URL(database).pathname.slice(1)
    try {
      let terminated = 0
      let bursting = true
      const terminator = (async () => {
        while (bursting) {
          await new Promise((resolve) => setTimeout(resolve, 150))
          const result = await withAdmin((client) =>
            client.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", [name]))
          terminated += result.rowCount ?? 0
        }
      })()
      const outcomes: Array<Answer | "no answer"> = []
      const until = Date.now() + 3000
      await Promise.all(Array.from({ length: 8 }, async (_, worker) => {
        for (let i = 0; Date.now() < until; i++) {
          const node = nodes[(worker + i) % 2]!
          const request = i % 3 === 0
            ? send(`${node.url}/relay/v1/accounts/${tenant.source}`, "GET", tenant.auth)
            : send(`${node.url}/relay/v1/transactions/initiate`, "POST", tenant.auth, transfer(worker % 2 === 0 ? tenant : reversed(tenant), "0.01"))
          outcomes.push(await attempt(request))
        }
      }))
      bursting = false
      await terminator
      expect(terminated).toBeGreaterThan(0)
      expect(outcomes.filter((o) => o === "no answer").length).toBe(0)
      const answers = outcomes.filter((o): o is Answer => o !== "no answer")
      const failures = answers.filter((a) => a.status >= 500)
      expect(failures.every((a) => a.status === 503 && a.retryAfter !== null), failures.map((a) => `${a.status} ${a.text}`).join("\n")).toBe(true)
      expect(answers.filter((a) => a.status < 300).length).toBeGreaterThan(0)
      // Both processes are still up and serving.
      for (const node of nodes) {
        expect(node.child.exitCode).toBeNull()
        expect((await send(`${node.url}/relay/v1/accounts/${tenant.source}`, "GET", tenant.auth)).status).toBe(200)
      }
      // Every accepted transfer is whole and accounted for; none half-written.
      const accepted = answers.filter((a) => a.status === 201).length
      const stored = (await transactionsOf(nodes[0], tenant)).length + (await transactionsOf(nodes[0], reversed(tenant))).length
      expect(stored).toBeGreaterThanOrEqual(accepted)
      await expectReconciled(nodes[1], tenant, "1000")
      await expectReconciled(nodes[1], reversed(tenant), "1000")
      console.log(`FaultSurvival: ${terminated} backends terminated, ${answers.length} answers, ${failures.length} 503, ${accepted} transfers accepted, ${stored} stored`)
    } finally {
      await stopAll(nodes)
    }
  }, 120_000)

  it("opposite transfers in bursts on two nodes: never a 403, 404 or 5xx, and balances reconcile", async () => {
    const { nodes, tenant } = await twoNodes("100")
    try {
      const statuses: Array<number> = []
      for (let round = 0; round < 3; round++) {
        const burst = await Promise.all(Array.from({ length: 20 }, (_, i) =>
          send(`${nodes[i % 2]!.url}/relay/v1/transactions/initiate`, "POST", tenant.auth, transfer(i < 10 ? tenant : reversed(tenant), "0.5"))))
        statuses.push(...burst.map((a) => a.status))
      }
      expect(statuses.filter((s) => s !== 201)).toEqual([])
      await expectReconciled(nodes[0], tenant, "100")
      await expectReconciled(nodes[1], reversed(tenant), "100")
    } finally {
      await stopAll(nodes)
    }
  }, 120_000)

  // No time bound: the writers' lock timeout is longer than the test, so a read that waited for a writer's
  // connection would be answered only after writers gave up (their statement timeout), or refused by the pool.
  it("while transfers queue on one account's held lock, another client's reads are answered before it is released", async () => {
    const { database, nodes, tenant } = await twoNodes("100", { RELAY_PG_LOCK_TIMEOUT_MILLIS: "600000" })
    const other = await tenantOn(nodes[0], "1")
    const holder = new pg.Client({ connectionString: database })
    await holder.connect()
    try {
      await holder.query("BEGIN")
      await holder.query("SELECT id FROM accounts WHERE id = $1 FOR UPDATE", [tenant.source])
      // More waiting writers than either node has connections.
      let answered = 0
      const queued = Array.from({ length: 30 }, (_, i) =>
        attempt(send(`${nodes[i % 2]!.url}/relay/v1/transactions/initiate`, "POST", tenant.auth, transfer(tenant, "0.1"))).finally(() => answered++))
      await new Promise((resolve) => setTimeout(resolve, 500))
      const latencies: Array<number> = []
      for (let i = 0; i < 10; i++) {
        const started = performance.now()
        const read = await send(`${nodes[i % 2]!.url}/relay/v1/accounts/${other.source}`, "GET", other.auth)
        latencies.push(performance.now() - started)
        expect(read.status).toBe(200)
      }
      console.log(`FaultSurvival: reads during the lock wait took ${latencies.map((l) => Math.round(l)).join(", ")} ms`)
      // Every read was answered while every transfer still waited on the lock.
      expect(answered).toBe(0)
      await holder.query("COMMIT")
      const answers = await Promise.all(queued)
      expect(answers.every((a) => a !== "no answer" && (a.status === 201 || (a.status === 503 && a.retryAfter !== null)))).toBe(true)
      await expectReconciled(nodes[0], tenant, "100")
    } finally {
      await holder.end().catch(() => undefined)
      await stopAll(nodes)
    }
  }, 120_000)

  it("a lock held past every re-run's lock timeout is a 503 with Retry-After; the keyed retry after it is released succeeds once", async () => {
    const { database, nodes, tenant } = await twoNodes("100", { RELAY_PG_LOCK_TIMEOUT_MILLIS: "100" })
    const holder = new pg.Client({ connectionString: database })
    await holder.connect()
    try {
      await holder.query("BEGIN")
      await holder.query("SELECT id FROM accounts WHERE id = $1 FOR UPDATE", [tenant.source])
      const keyed = { ...tenant.auth, "idempotency-key": "held-past-timeout" }
      const busy = await send(`${nodes[0].url}/relay/v1/transactions/initiate`, "POST", keyed, transfer(tenant, "1"))
      expect([busy.status, busy.retryAfter]).toEqual([503, "1"])
      await holder.query("COMMIT")
      const retried = await send(`${nodes[1].url}/relay/v1/transactions/initiate`, "POST", keyed, transfer(tenant, "1"))
      expect(retried.status).toBe(201)
      expect((await transactionsOf(nodes[0], tenant)).length).toBe(1)
      await expectReconciled(nodes[0], tenant, "100")
    } finally {
      await holder.end().catch(() => undefined)
      await stopAll(nodes)
    }
  }, 120_000)

  /**
   * One node on a fresh database, run with `env`: a tenant's GET account is answered 200, then `whileLocked` runs
   * while another session holds `table` in ACCESS EXCLUSIVE mode, and once that session commits the GET is answered
   * 200 again.
   */
  const whileTableLocked = async (
    env: Record<string, string>,
    table: string,
    whileLocked: (read: () => Promise<Answer>, node: ServerProcess) => Promise<void>
  ) => {
    const database = await newPostgresDatabase()
    const node = await startServer({ ...serverEnv(database), ...env, RELAY_LOG_LEVEL: "Info" })
    const holder = new pg.Client({ connectionString: database })
    await holder.connect()
    try {
      const tenant = await tenantOn(node, "10")
      const read = () => send(`${node.url}/relay/v1/accounts/${tenant.source}`, "GET", tenant.auth)
      expect((await read()).status).toBe(200)
      await holder.query("BEGIN")
      await holder.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`)
      await whileLocked(read, node)
      await holder.query("COMMIT")
      expect((await read()).status).toBe(200)
    } finally {
      await holder.end().catch(() => undefined)
      await node.stop("SIGKILL")
    }
  }

  it("LIM-RATE-1: a rate-limit count held on a lock is a 503 with Retry-After once RELAY_RATE_LIMIT_TIMEOUT_MILLIS has passed, and the node counts on when it is released", async () => {
    // Another session holds the windows' table, as a migration or a maintenance statement would.
    await whileTableLocked({ RELAY_RATE_LIMIT_STORE: "database", RELAY_RATE_LIMIT_TIMEOUT_MILLIS: "200" }, "rate_limit_windows", async (read, node) => {
      const held = await read()
      expect([held.status, held.retryAfter]).toEqual([503, "1"])
      expect(node.output()).toMatch(/did not answer a rate-limit count within 200 ms/)
    })
  }, 120_000)

  it("a round trip the database does not answer is a 503 with Retry-After once RELAY_PG_REPLY_TIMEOUT_MILLIS has passed, not a request held for as long as TCP waits; the node serves again when it answers", async () => {
    // No lock timeout: a statement held on the table lock gets no answer at all, as from a frozen server or a
    // network that drops packets (the server's own timeouts would end the wait here, and cannot there).
    await whileTableLocked({ RELAY_PG_LOCK_TIMEOUT_MILLIS: "0", RELAY_PG_REPLY_TIMEOUT_MILLIS: "300" }, "accounts", async (read, node) => {
      const unanswered = await Promise.all([read(), read(), read()])
      expect(unanswered.map((answer) => [answer.status, answer.retryAfter])).toEqual([[503, "1"], [503, "1"], [503, "1"]])
      // Each 503 is said in one line, its request's, at Warn with the error's message, not its stack.
      const lines = node.output().split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line))
      const refused = lines.filter((line) => line.annotations?.status === 503)
      expect(refused.length).toBeGreaterThanOrEqual(3)
      for (const line of refused) {
        expect([line.level, line.message]).toEqual(["WARN", "request"])
        expect(line.annotations.error).toMatch(/^StorageUnavailable: PostgreSQL did not answer within 300 ms; the connection was closed[^\n]*$/)
        expect(lines.filter((other) => other.annotations?.requestId === line.annotations.requestId)).toHaveLength(1)
      }
    })
  }, 120_000)

  it("the readiness probe is 503 with Retry-After while the database does not answer, and 200 once it does; liveness stays 200", async () => {
    const probe = async (node: ServerProcess, which: "live" | "ready") => {
      const response = await fetch(`${node.url}/health/${which}`)
      return [response.status, response.headers.get("retry-after")]
    }
    // The probe's read held on a table lock with no lock timeout: no answer, as from a database that is down.
    await whileTableLocked({ RELAY_PG_LOCK_TIMEOUT_MILLIS: "0", RELAY_PG_REPLY_TIMEOUT_MILLIS: "300" }, "relay_settings", async (_read, node) => {
      expect(await probe(node, "ready")).toEqual([503, "1"])
      expect(await probe(node, "live")).toEqual([200, null])
    })
    const database = await newPostgresDatabase()
    const node = await startServer({ ...serverEnv(database), RELAY_LOG_LEVEL: "Info" })
    try {
      expect(await probe(node, "ready")).toEqual([200, null])
    } finally {
      await node.stop("SIGKILL")
    }
  }, 120_000)

  it("a node started before its database exists waits for it, saying so, and serves once it is there", async () => {
    const name = `relay_late_${process.pid}_${Date.now()}`
    const url = new URL(adminUrl ?? "")
    url.pathname = `/${name}`
    let waiting = (): void => undefined
    const saidSo = new Promise<void>((resolve) => {
      waiting = resolve
    })
    const starting = startServer({ ...serverEnv(url.toString()), RELAY_DATABASE_STARTUP_TIMEOUT_SECONDS: "60" }, 60_000, (output) => {
      if (output.includes("unreachable at start-up")) waiting()
    })
    // The database is created only once the node has found it missing and said so.
    await saidSo
    await withAdmin((client) => client.query(`CREATE DATABASE ${name}`))
    const node = await starting
    try {
      // Said as a JSON line at Warn, as the server's every line is (docs/server.md), not in Effect's default format.
      const said = node.output().split("\n").find((line) => line.includes("unreachable at start-up"))
      expect(JSON.parse(said ?? "null")).toMatchObject({ level: "WARN", message: expect.stringMatching(/^the database is unreachable at start-up/) })
      expect((await control(node, "POST", "/clients")).status).toBe(201)
    } finally {
      await node.stop("SIGKILL")
      await withAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
    }
  }, 120_000)

  it("a node whose database never comes exits after its start-up timeout, naming the cause", async () => {
    const url = new URL(adminUrl ?? "")
    url.pathname = `/relay_never_${process.pid}_${Date.now()}`
    const failed = await startServer({ ...serverEnv(url.toString()), RELAY_DATABASE_STARTUP_TIMEOUT_SECONDS: "1" }, 30_000).then(
      () => undefined,
      (error: unknown) => String(error)
    )
    expect(failed).toMatch(/exited with 1/)
    expect(failed).toMatch(/failed to start/)
  }, 60_000)
})

describe.skipIf(!hasPostgres)("the outbox shared by two nodes on PostgreSQL", () => {
  it("both nodes' workers carry out the effects of 30 transfers: each submitted once, each completed once, every entry done", async () => {
    const database = await newPostgresDatabase()
    const live = {
      ...serverEnv(database),
      RELAY_SIMULATED_PROVIDER: "live",
      RELAY_SIMULATED_STEP_MILLIS: "50",
      RELAY_PROVIDER_POLL_MILLIS: "20",
      RELAY_DEFAULT_QUORUM: "0"
    }
    const nodes = [await startServer(live), await startServer(live)] as const
    try {
      const tenant = await tenantOn(nodes[0], "100")
      const ids = await Promise.all(Array.from({ length: 30 }, async (_, i) => {
        const answer = await send(`${nodes[i % 2]!.url}/relay/v1/transactions/initiate`, "POST", tenant.auth, transfer(tenant, "0.1"))
        expect(answer.status).toBe(201)
        return String(JSON.parse(answer.text)["id"])
      }))
      const until = Date.now() + 60_000
      let open = ids.length
      while (open > 0 && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 200))
        open = (await transactionsOf(nodes[1], tenant)).filter((t) => t["status"] !== "COMPLETED").length
      }
      expect(open).toBe(0)
      const counts = await withDatabase(database, async (client) => ({
        events: (await client.query<{ entity_id: string; type: string; n: string }>(
          "SELECT entity_id, type, count(*) AS n FROM domain_events WHERE type IN ('transaction.submitted', 'transaction.completed') GROUP BY entity_id, type"
        )).rows,
        entries: (await client.query<{ kind: string; state: string; n: string }>("SELECT kind, state, count(*) AS n FROM outbox_entries GROUP BY kind, state")).rows
      }))
      for (const id of ids) {
        for (const type of ["transaction.submitted", "transaction.completed"]) {
          expect(counts.events.find((row) => row.entity_id === id && row.type === type)?.n, `${id} ${type}`).toBe("1")
        }
      }
      expect(counts.entries.filter((row) => row.state !== "done")).toEqual([])
      expect(counts.entries.find((row) => row.kind === "submitTransfer")?.n).toBe("30")
    } finally {
      await stopAll(nodes)
    }
  }, 120_000)
})

/** What a test of webhooks on two nodes works with (see `withWebhookReceiver`). */
interface WebhookNodes {
  readonly port: number
  readonly database: string
  readonly nodes: readonly [ServerProcess, ServerProcess]
  readonly tenant: Awaited<ReturnType<typeof tenantOn>>
  readonly manager: Record<string, string>
  /** How many events the tenant's client has had since `from`, read through the first node. */
  readonly eventsSince: (from: string) => Promise<number>
  /** Twenty transfers initiated at once, alternating between the nodes. */
  readonly initiateTwenty: () => Promise<unknown>
}

/**
 * A local receiver answering each delivery with the status `answer` gives (its path, headers and body), two nodes on a
 * new PostgreSQL database that deliver to private targets, a tenant, and an API user of its client who manages
 * webhooks; `test` runs with them, and nodes and receiver are stopped after it.
 */
const withWebhookReceiver = async (
  answer: (path: string, headers: Record<string, string>, body: string) => number,
  test: (setup: WebhookNodes) => Promise<void>
) => {
  const receiver = createServer((request, response) => {
    let body = ""
    request.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
    request.on("end", () => {
      const headers: Record<string, string> = {}
      for (const [name, value] of Object.entries(request.headers)) if (typeof value === "string") headers[name] = value
      response.writeHead(answer(request.url ?? "", headers, body)).end()
    })
  })
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
  const port = (receiver.address() as AddressInfo).port
  const database = await newPostgresDatabase()
  const env = { ...serverEnv(database), RELAY_WEBHOOKS_ALLOW_PRIVATE_TARGETS: "true", RELAY_DEFAULT_QUORUM: "0" }
  const nodes = [await startServer(env), await startServer(env)] as const
  try {
    const tenant = await tenantOn(nodes[0], "100")
    const user = JSON.parse((await control(nodes[0], "POST", "/api-users", { clientId: tenant.clientId, permissions: ["Manage webhooks", "View audit trail"] })).text)
    const manager = { "x-api-key": String(user["keyId"]), "x-api-secret": String(user["secret"]) }
    await test({
      port,
      database,
      nodes,
      tenant,
      manager,
      eventsSince: async (from) =>
        Number(JSON.parse((await send(`${nodes[0].url}/relay/v1/events?limit=1&from=${encodeURIComponent(from)}`, "GET", manager)).text)["total"]),
      initiateTwenty: () =>
        Promise.all(Array.from({ length: 20 }, (_, i) =>
          send(`${nodes[i % 2]!.url}/relay/v1/transactions/initiate`, "POST", tenant.auth, transfer(tenant, "0.1"))))
    })
  } finally {
    await stopAll(nodes)
    await new Promise((resolve) => receiver.close(resolve))
  }
}

/** Waits, up to 30 s, until `received()` reaches `expected()`. */
const untilReceived = async (received: () => number, expected: () => Promise<number>) => {
  const until = Date.now() + 30_000
  while (Date.now() < until && received() < (await expected())) await new Promise((resolve) => setTimeout(resolve, 100))
}

describe.skipIf(!hasPostgres)("webhooks delivered by two nodes on PostgreSQL", () => {
  it("each event reaches the receiver once between the two nodes' workers, verified", async () => {
    const received: Array<{ readonly id: string; readonly body: string; readonly headers: Record<string, string> }> = []
    await withWebhookReceiver((_, headers, body) => {
      received.push({ id: headers["webhook-id"] ?? "", body, headers })
      return 204
    }, async ({ port, nodes, manager, eventsSince, initiateTwenty }) => {
      const subscribed = await send(`${nodes[1].url}/relay/v1/webhooks`, "POST", manager, { url: `http://127.0.0.1:${port}/hooks` })
      expect(subscribed.status).toBe(201)
      const secret = String(JSON.parse(subscribed.text)["secret"])
      await initiateTwenty()
      const trail = () => eventsSince(String(JSON.parse(subscribed.text)["createdAt"]))
      await untilReceived(() => new Set(received.map((r) => r.id)).size, trail)
      const events = await trail()
      expect(events).toBeGreaterThanOrEqual(40)
      expect(received.length).toBe(events)
      expect(new Set(received.map((r) => r.id)).size).toBe(events)
      const verifier = new Webhook(secret)
      for (const delivery of received) verifier.verify(delivery.body, delivery.headers)
    })
  }, 120_000)

  it("a receiver that fails holds its subscription's deliveries: tried once a retry, nothing of it left due, and the same client's healthy subscription gets every event", async () => {
    const received = { healthy: new Set<string>(), failing: 0 }
    await withWebhookReceiver((path, headers) => {
      if (path === "/healthy") {
        received.healthy.add(String(headers["webhook-id"]))
        return 204
      }
      received.failing++
      return 500
    }, async ({ port, database, nodes, manager, eventsSince, initiateTwenty }) => {
      const failing = JSON.parse((await send(`${nodes[1].url}/relay/v1/webhooks`, "POST", manager, { url: `http://127.0.0.1:${port}/failing` })).text)
      const healthy = JSON.parse((await send(`${nodes[0].url}/relay/v1/webhooks`, "POST", manager, { url: `http://127.0.0.1:${port}/healthy` })).text)
      await initiateTwenty()
      const trail = () => eventsSince(String(healthy["createdAt"]))
      await untilReceived(() => received.healthy.size, trail)
      const events = await trail()
      expect(events).toBeGreaterThanOrEqual(40)
      expect(received.healthy.size).toBe(events)
      // The failing receiver: a few attempts (3 or 4 here: each node may have had a lane of it out before the hold,
      // and each failed one is tried at its retries), not one a delivery; its other deliveries held, none due.
      expect(received.failing).toBeLessThan(events / 2)
      const client = new pg.Client({ connectionString: database })
      await client.connect()
      try {
        const { rows } = await client.query<{ readonly due: string; readonly held: string }>(
          `SELECT count(*) FILTER (WHERE next_attempt_at <= to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) AS due,
                  count(*) FILTER (WHERE next_attempt_at = '9999-12-31T23:59:59.999Z') AS held
             FROM outbox_entries WHERE state = 'pending' AND lane = $1`,
          [String(failing["id"])]
        )
        expect(Number(rows[0]?.held)).toBeGreaterThanOrEqual(events - 10)
        expect(Number(rows[0]?.due)).toBeLessThanOrEqual(2)
      } finally {
        await client.end()
      }
    })
  }, 120_000)
})
