/**
 * What the server's process tests share: a PostgreSQL database of their own (created here, dropped by
 * `dropDatabases`), calls to a server with their answers kept as text, and a tenant made through the test control
 * protocol (a client, a credential, a funded BTC source and an active BTC destination) with the check that its
 * source's balance reconciles with its transactions.
 */
import { Money } from "@custody-relay/core"
import pg from "pg"
import { expect } from "vitest"
import type { ServerProcess } from "./ServerProcess.js"

export const adminUrl = process.env["RELAY_TEST_PG_URL"]
export const hasPostgres = adminUrl !== undefined && adminUrl !== ""

export const TOKEN = "process-tests-token"
const databases: Array<string> = []

/** Runs `work` on a connection to `database` (a URL), closed afterwards. */
export const withDatabase = async <A>(database: string, work: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: database })
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}

/** Runs `work` on a connection to the test server's admin database. */
export const withAdmin = <A>(work: (client: pg.Client) => Promise<A>): Promise<A> => withDatabase(adminUrl ?? "", work)

/** A fresh PostgreSQL database for one test; dropped after the file's tests. */
export const newPostgresDatabase = async (): Promise<string> => {
  const name = `relay_test_${process.pid}_${Date.now()}_${databases.length}`
  await withAdmin((client) => client.query(`CREATE DATABASE ${name}`))
  databases.push(name)
  const url = new URL(adminUrl ?? "")
  url.pathname = `/${name}`
  return url.toString()
}

/** Drops every database `newPostgresDatabase` made in this test file. */
export const dropDatabases = async () => {
  if (!hasPostgres) return
  for (const name of databases.splice(0)) await withAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
}

export interface Answer {
  readonly status: number
  readonly text: string
  readonly replayed: boolean
  readonly retryAfter: string | null
}

export const send = async (url: string, method: string, headers: Record<string, string>, body?: unknown): Promise<Answer> => {
  const response = await fetch(url, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  return {
    status: response.status,
    text: await response.text(),
    replayed: response.headers.get("idempotent-replayed") === "true",
    retryAfter: response.headers.get("retry-after")
  }
}

export const field = (answer: Answer, name: string): unknown => (JSON.parse(answer.text) as Record<string, unknown>)[name]

export const serverEnv = (database: string) => ({
  RELAY_DATABASE: database,
  RELAY_TEST_CONTROL_TOKEN: TOKEN,
  RELAY_DEMO: "never",
  RELAY_RATE_LIMIT: "1000000"
})

export interface Tenant {
  readonly clientId: string
  readonly auth: Record<string, string>
  readonly source: string
  readonly destination: string
}

/** A call of the test control protocol on `node`. */
export const control = (node: ServerProcess, method: string, path: string, body?: unknown) =>
  send(`${node.url}/__control${path}`, method, { "x-control-token": TOKEN }, body)

/** A client with one credential, a funded BTC source account and an active BTC destination, made through `node`. */
export const tenantOn = async (node: ServerProcess, funds: string): Promise<Tenant> => {
  const clientId = String(field(await control(node, "POST", "/clients"), "clientId"))
  const permissions = [
    "View custody account",
    "Initiate new custody account",
    "Approve new custody account",
    "Initiate account transactions",
    "View custody transaction list",
    "View custody transaction detail"
  ]
  const user = await control(node, "POST", "/api-users", { clientId, permissions })
  const auth = { "x-api-key": String(field(user, "keyId")), "x-api-secret": String(field(user, "secret")) }
  const open = async (name: string) => {
    const created = await send(`${node.url}/relay/v1/accounts`, "POST", auth, { name, workspace: "custody", assetId: "BTC" })
    const id = String(field(created, "id"))
    await send(`${node.url}/relay/v1/accounts/approve`, "POST", auth, { accountId: id })
    return id
  }
  const source = await open("Source")
  const destination = await open("Destination")
  await control(node, "POST", `/accounts/${source}/credit`, { amount: funds })
  return { clientId, auth, source, destination }
}

export const transfer = (tenant: Tenant, amount: string) => ({
  sourceAccountId: tenant.source,
  destinationId: tenant.destination,
  destinationType: "internal",
  amount,
  assetType: "BTC"
})

/** Every transaction from the tenant's source, through the API (pages of 100). */
export const transactionsOf = async (node: ServerProcess, tenant: Tenant) => {
  const all: Array<Record<string, unknown>> = []
  for (let page = 1; ; page++) {
    const answer = await send(`${node.url}/relay/v1/transactions?accountId=${tenant.source}&limit=100&page=${page}`, "GET", tenant.auth)
    const items = field(answer, "items") as ReadonlyArray<Record<string, unknown>>
    all.push(...items)
    if (items.length < 100) return all
  }
}

/** The source's available balance is its funds less what every open transaction reserved (amount plus fee). */
export const expectReconciled = async (node: ServerProcess, tenant: Tenant, funds: string) => {
  const transactions = (await transactionsOf(node, tenant)).filter((t) => t["status"] === "AWAITING_SIGNATURE")
  const reserved = transactions.map((t) => Money.add(Money.canonical(String(t["amount"])), Money.canonical(String(t["networkFee"]))))
  const account = await send(`${node.url}/relay/v1/accounts/${tenant.source}`, "GET", tenant.auth)
  expect(String(field(account, "availableBalance"))).toBe(Money.subtract(Money.canonical(funds), Money.sum(reserved)))
}

