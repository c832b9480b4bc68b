/**
 * The benchmark's baseline: the least a server can do to answer the same three requests from the same SQLite
 * file. Raw node:http, prepared better-sqlite3 statements, no framework, no validation, no rate limit, no
 * idempotency, no logging. It does the same reads and writes as the relay: the API user by key id (and the hash
 * comparison), the account by id, a page of accounts with its count, and for initiate one IMMEDIATE transaction
 * that reads the source, reserves the amount and inserts the transaction row. Run by http.bench.ts.
 */
import { createHash, randomUUID } from "node:crypto"
import { createServer, type IncomingMessage } from "node:http"
import Database from "better-sqlite3"
import { Decimal } from "decimal.js"

const filename = process.env["BASELINE_DATABASE"] ?? ""
const db = new Database(filename)
db.pragma("journal_mode = WAL")
db.pragma("synchronous = NORMAL")

const findUser = db.prepare<[string], { id: string; client_id: string; secret_hash: string; name: string }>(
  "SELECT id, client_id, secret_hash, name FROM api_users WHERE key_id = ?"
)
const findAccount = db.prepare<[string], Record<string, unknown>>("SELECT * FROM accounts WHERE id = ?")
// The parameters behind a CAST, as the relay binds them: SQLite re-plans a statement whose LIMIT, OFFSET or
// `client_id = ?` value its planner read whenever better-sqlite3 rebinds it, which is every run (SqlEngine.ts).
const listAccounts = db.prepare<[string, number, number], Record<string, unknown>>(
  "SELECT * FROM accounts WHERE client_id = CAST(? AS TEXT) ORDER BY created_at DESC, id DESC LIMIT CAST(? AS INTEGER) OFFSET CAST(? AS INTEGER)"
)
const countAccounts = db.prepare<[string], { n: number }>("SELECT count(*) AS n FROM accounts WHERE client_id = ?")
const updateBalance = db.prepare<[string, string, string]>("UPDATE accounts SET available_balance = ?, updated_at = ? WHERE id = ?")
const transactionColumns = (db.prepare("PRAGMA table_info(transactions)").all() as ReadonlyArray<{ name: string }>).map((c) => c.name)
const insertTransaction = db.prepare(
  `INSERT INTO transactions (${transactionColumns.join(", ")}) VALUES (${transactionColumns.map((c) => `@${c}`).join(", ")})`
)

const authenticate = (request: IncomingMessage) => {
  const user = findUser.get(String(request.headers["x-api-key"]))
  const hash = createHash("sha256").update(String(request.headers["x-api-secret"])).digest("hex")
  return user !== undefined && user.secret_hash === hash ? user : undefined
}

const view = (row: Record<string, unknown>) => ({
  id: row["id"],
  name: row["name"],
  description: row["description"],
  workspace: row["workspace"],
  role: row["role"],
  assetId: row["asset_id"],
  chainType: row["chain_type"],
  address: row["address"],
  status: row["status"],
  availableBalance: row["available_balance"],
  availableBalanceCad: "0.00",
  createdAt: row["created_at"],
  updatedAt: row["updated_at"]
})

const initiate = db.transaction((user: { id: string; client_id: string; name: string }, input: Record<string, string>) => {
  const source = findAccount.get(input["sourceAccountId"] ?? "")
  if (source === undefined) return undefined
  const now = new Date().toISOString()
  // Exact decimals even here: any server that holds money must do at least this much arithmetic.
  const reserved = new Decimal(input["amount"] ?? "0").plus("0.00002")
  updateBalance.run(new Decimal(String(source["available_balance"])).minus(reserved).toFixed(), now, String(source["id"]))
  const id = randomUUID()
  const values: Record<string, unknown> = Object.fromEntries(transactionColumns.map((c) => [c, ""]))
  Object.assign(values, {
    id,
    client_id: user.client_id,
    source_account_id: input["sourceAccountId"],
    destination_id: input["destinationId"],
    destination_type: input["destinationType"],
    destination_address: "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",
    amount: input["amount"],
    asset_type: input["assetType"],
    network_fee: "0.00002",
    fee_asset_id: "BTC",
    reserved: String(reserved),
    status: "AWAITING_SIGNATURE",
    status_group: "pending",
    sub_status: null,
    required_approvals: 1,
    created_by_api_user_id: user.id,
    created_by_name: user.name,
    decisions: "[]",
    provider_transaction_id: null,
    approved_at: null,
    provider_approved_at: null,
    created_at: now,
    updated_at: now
  })
  insertTransaction.run(values)
  return { id, status: "awaiting_signature", ...input, createdAt: now }
})

const send = (response: import("node:http").ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body)
  response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  response.end(text)
}

const server = createServer((request, response) => {
  const user = authenticate(request)
  if (user === undefined) return send(response, 401, { message: "unauthenticated" })
  const url = request.url ?? "/"
  if (request.method === "GET" && url.startsWith("/relay/v1/accounts/")) {
    const row = findAccount.get(url.slice("/relay/v1/accounts/".length))
    return row === undefined ? send(response, 404, { message: "not found" }) : send(response, 200, view(row))
  }
  if (request.method === "GET" && url.startsWith("/relay/v1/accounts")) {
    const rows = listAccounts.all(user.client_id, 20, 0)
    const total = countAccounts.get(user.client_id)?.n ?? 0
    return send(response, 200, { items: rows.map(view), total, page: 1, limit: 20, totalPages: Math.ceil(total / 20) })
  }
  if (request.method === "POST" && url === "/relay/v1/transactions/initiate") {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const input = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, string>
      const created = initiate.immediate(user, input)
      send(response, created === undefined ? 404 : 201, created ?? { message: "not found" })
    })
    return
  }
  send(response, 404, { message: "not found" })
})

server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  process.stdout.write(`baseline listening on http://127.0.0.1:${port}\n`)
})
process.once("SIGTERM", () => server.close(() => {
  db.close()
  process.exit(0)
}))
