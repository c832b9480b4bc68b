/**
 * Two relay nodes on one PostgreSQL database, each serving HTTP on its own port, as a load balancer would see
 * them. A transfer is initiated on node 1 under an Idempotency-Key, the client's retry lands on node 2 and gets
 * the same answer (no second transfer), an approver decides on node 2, and both nodes' outbox workers carry the
 * transfer through the custody provider to completion, each step exactly once.
 *
 *   RELAY_DATABASE=postgres://postgres@127.0.0.1:5432/relay_example pnpm --filter @custody-relay/examples run two-nodes
 *
 * The database must exist; the nodes migrate it at start.
 */
import { Accounts, Administration, Permission } from "@custody-relay/core"
import { type Listening, serve } from "@custody-relay/http/node"
import { createRelay } from "@custody-relay/server"
import { Redacted } from "effect"

const database = process.env["RELAY_DATABASE"]
if (database === undefined || !database.startsWith("postgres")) {
  console.error("set RELAY_DATABASE to a postgres:// URL of an existing database")
  process.exit(2)
}

const nodes = await Promise.all([1, 2].map(() => createRelay({ database, rateLimitStore: "database" })))
const [one, two] = (await Promise.all(nodes.map((node) => serve(node.handler, { port: 0 })))) as [Listening, Listening]
try {
  // Credentials and funded accounts, made through node 1's back office (any node would do: they share the database).
  const client = await nodes[0]!.handler.runtime.runPromise(Administration.createClient("Acme"))
  const key = async (permissions: ReadonlyArray<Permission.Permission>) => {
    const issued = await nodes[0]!.handler.runtime.runPromise(Administration.createApiUser({ clientId: client.id, permissions }))
    return { "x-api-key": issued.keyId, "x-api-secret": Redacted.value(issued.secret) }
  }
  const operator = await key(Permission.permissionNames)
  const approver = await key(["Approve transaction", "View custody transaction status"])
  const call = (node: { url: string }, method: string, path: string, headers: Record<string, string>, body?: unknown) =>
    fetch(`${node.url}/relay/v1${path}`, { method, headers: { ...headers, "content-type": "application/json" }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  const accountIds: Array<string> = []
  for (const name of ["BTC cold", "BTC hot"]) {
    const created = (await (await call(one, "POST", "/accounts", operator, { name, workspace: "custody", assetId: "BTC" })).json()) as { id: string }
    await call(one, "POST", "/accounts/approve", operator, { accountId: created.id })
    accountIds.push(created.id)
  }
  await nodes[0]!.handler.runtime.runPromise(Accounts.deposit(accountIds[0]!, "1"))

  const transfer = { sourceAccountId: accountIds[0], destinationId: accountIds[1], destinationType: "internal", amount: "0.25", assetType: "BTC" }
  const idempotency = { ...operator, "idempotency-key": "payout-7731" }
  const first = await call(one, "POST", "/transactions/initiate", idempotency, transfer)
  const retry = await call(two, "POST", "/transactions/initiate", idempotency, transfer)
  const [firstText, retryText] = [await first.text(), await retry.text()]
  console.log(`node 1 answered ${first.status}; the retry on node 2 answered ${retry.status}, ${firstText === retryText ? "byte-identical" : "DIFFERENT"}, Idempotent-Replayed: ${retry.headers.get("idempotent-replayed")}`)
  const { id } = JSON.parse(firstText) as { id: string }

  const approved = await call(two, "POST", `/transactions/${id}/approve`, approver)
  console.log(`approved on node 2: ${approved.status} ${((await approved.json()) as { status: string }).status}`)
  // The outbox workers of both nodes lease the provider steps; the simulated provider completes in a few seconds.
  const deadline = Date.now() + 30_000
  let status = ""
  while (Date.now() < deadline && status !== "COMPLETED" && status !== "FAILED") {
    await new Promise((resolve) => setTimeout(resolve, 250))
    status = ((await (await call(Date.now() % 2 === 0 ? one : two, "GET", `/transactions/${id}/status`, approver)).json()) as { status: string }).status
  }
  const listed = (await (await call(one, "GET", `/transactions?accountId=${accountIds[0]}`, operator)).json()) as { total: number }
  console.log(`transaction ${status}; transactions from the source: ${listed.total}`)
} finally {
  await Promise.all([one.close(), two.close()])
  await Promise.all(nodes.map((node) => node.close()))
}
