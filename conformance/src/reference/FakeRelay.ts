/**
 * A small in-memory implementation of the interface and of the control protocol, written from the spec alone: the
 * kit's reference for itself. Its variants answer each "not shown" question another way (the kit must pass them
 * all) and its faults break one rule each (the kit must fail them). It is not our server and proves nothing about it.
 */
import { Decimal } from "decimal.js"

type Json = Record<string, unknown>

interface ApiUser {
  apiUserId: string
  keyId: string
  secret: string
  clientId: string | null
  permissions: Set<string>
  revoked: boolean
  limit: number
  windowSeconds: number
  windowStart: number
  used: number
}
interface Account {
  id: string
  clientId: string
  name: string
  description: string | null
  workspace: string
  role: string
  assetId: string
  status: string
  address: string | null
  balance: Decimal
  createdAt: string
  updatedAt: string
}
interface Whitelist {
  id: string
  clientId: string
  providerId: string
  name: string
  address: string
  description: string | null
  status: string
  assetType: string
}
interface Transaction {
  id: string
  clientId: string
  sourceAccountId: string
  destinationId: string
  destinationType: "internal" | "external"
  amount: Decimal
  fee: Decimal
  feeAsset: string
  assetType: string
  status: string
  initiatorKey: string
  approvals: Array<string>
  rejectedBy: string | null
  createdAt: string
  updatedAt: string
}

export const fakeAssets = [
  { assetId: "BTC", precision: 8, chainType: "bitcoin", feeAsset: "BTC", sampleAddresses: { valid: ["bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"], invalid: ["0xdeadbeef", "not an address"] } },
  { assetId: "ETH", precision: 18, chainType: "ethereum", feeAsset: "ETH", sampleAddresses: { valid: ["0x52908400098527886E0F7030069857D2E4169EE7", "0x8617E340B3D01FA5F11F306F4090FD50E238070D"], invalid: ["bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", "0x123"] } },
  { assetId: "USDC", precision: 6, chainType: "ethereum", feeAsset: "ETH", sampleAddresses: { valid: ["0xde709f2102306220921060314715629080e2fb77", "0x27b1fdb04752bbc536007a920d24acb045561c26"], invalid: ["xyz", "0x12"] } }
]

export interface FakeOptions {
  readonly token: string
  /** Capabilities the fake leaves out (answers 501 and omits from the profile). */
  readonly without?: ReadonlyArray<string>
  /** A fault for the kit's tests: log lines carry the request's secret. */
  readonly leakSecretsToLogs?: boolean
  /**
   * Choices the interface leaves open, each answered another way than our server answers it: a correct
   * implementation the kit must pass (issue 14's false failures).
   */
  readonly variant?: FakeVariant
  readonly fault?: FakeFault
}

export interface FakeVariant {
  /** Error bodies (other than the permission 403) as `{ error: { code, detail } }`, with no string `message`. */
  readonly errorBody?: "nested"
  /** The transactionType a detail record shows. */
  readonly transactionType?: string
  /** Assets in another order, one without fee estimation first. */
  readonly noFeeEstimationFirst?: boolean
  /** calculate-fee refuses (400) an amount plus fee beyond the available balance. */
  readonly feeChecksFunds?: boolean
  /** Several values of a list filter only as one comma-separated value (a repeated key: the last one counts), or only repeated. */
  readonly multiValue?: "comma" | "repeat"
  /** Approvals a new transaction needs (1 by default); 0 sends it on at once. */
  readonly quorum?: number
  /**
   * How decisions are called: `/transactions/{id}/approve` (default), `/transactions/approve` with `{transactionId}`,
   * or through the control protocol only (`transactions.decide`: no approval endpoint, as in the interface).
   */
  readonly decisionCalls?: "path" | "body" | "control"
  /** Status names of its own (pending QUEUED, completed CONFIRMED, failed REJECTED and CANCELLED). */
  readonly statusNames?: "own"
  /** Approval of an account activates it at once (the control's activate answers the current state). */
  readonly activateOnApproval?: boolean
  /** Whitelist creation answers 200, not 201. */
  readonly whitelistCreate200?: boolean
  /** Initiation reserves only the amount; the fee is charged at completion. */
  readonly reserveAmountOnly?: boolean
  /** The profile declares every choice above (control protocol v1.2); otherwise it is silent on them. */
  readonly declare?: boolean
}

/** Faults of the quorum workflow, which a wrapper around a handler cannot make: each one the kit must catch. */
export type FakeFault =
  | "initiator-approves"
  | "approver-counted-twice"
  | "quorum-one-early"
  | "rejection-ignored"
  | "approval-needs-initiate-permission"
  | "decisions-race"
  | "rejection-keeps-funds"
  | "awaiting-without-policy"
  | "self-transfer"
  | "cross-asset-destination"

const permissionOf: Record<string, string> = {
  "GET /accounts": "View custody account",
  "GET /accounts/:id": "View custody account",
  "POST /accounts": "Initiate new custody account",
  "POST /accounts/approve": "Approve new custody account",
  "POST /accounts/reject": "Approve new custody account",
  "GET /transactions": "View custody transaction list",
  "GET /transactions/:id": "View custody transaction detail",
  "GET /transactions/:id/status": "View custody transaction status",
  "POST /transactions/calculate-fee": "Initiate account transactions",
  "POST /transactions/initiate": "Initiate account transactions",
  "POST /whitelisted-addresses": "Initiate external wallet address",
  "GET /whitelisted-addresses": "View whitelisted address",
  "GET /whitelisted-addresses/:id": "View whitelisted address",
  "POST /transactions/:id/approve": "Approve transaction",
  "POST /transactions/:id/reject": "Approve transaction",
  "POST /transactions/approve": "Approve transaction",
  "POST /transactions/reject": "Approve transaction"
}

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
/** Status names by step, and their list groups: ours by default, or an implementation's own (statusNames: "own"). */
const statusSets = {
  default: { awaiting: "AWAITING_SIGNATURE", approved: "PENDING_PROVIDER_APPROVAL", completed: "COMPLETED", failed: "FAILED", rejected: "FAILED", groups: { AWAITING_SIGNATURE: "pending", PENDING_PROVIDER_APPROVAL: "pending", COMPLETED: "completed", FAILED: "failed" } },
  own: { awaiting: "AWAITING_SIGNATURE", approved: "QUEUED", completed: "CONFIRMED", failed: "CANCELLED", rejected: "REJECTED", groups: { AWAITING_SIGNATURE: "pending", QUEUED: "pending", CONFIRMED: "completed", REJECTED: "failed", CANCELLED: "failed" } }
} as const

const SOL = { assetId: "SOL", precision: 9, chainType: "solana", feeAsset: "SOL", feeEstimation: false, sampleAddresses: { valid: ["9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin", "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T"], invalid: ["0x52908400098527886E0F7030069857D2E4169EE7", "short"] } }

export class FakeRelay {
  private readonly clients = new Set<string>()
  private readonly users = new Map<string, ApiUser>()
  private readonly accounts = new Map<string, Account>()
  private readonly whitelist = new Map<string, Whitelist>()
  private readonly transactions = new Map<string, Transaction>()
  private readonly faults = new Map<string, string>()
  private rateLimit = { limit: 100000, windowSeconds: 60 }
  private logLines: Array<string> = []
  private counter = 0

  constructor(private readonly options: FakeOptions) {}

  private get names() {
    return statusSets[this.options.variant?.statusNames ?? "default"]
  }
  private groupOf(status: string): string | undefined {
    return (this.names.groups as Record<string, string>)[status]
  }
  private get quorum(): number {
    return this.options.variant?.quorum ?? 1
  }

  readonly handler = async (request: Request): Promise<Response> => {
    const url = new URL(request.url)
    try {
      if (url.pathname.startsWith("/__control/")) return await this.control(request, url.pathname.slice("/__control".length))
      if (url.pathname.startsWith("/relay/v1/")) {
        const secret = this.options.leakSecretsToLogs === true ? ` secret=${request.headers.get("x-api-secret") ?? ""}` : ""
        this.logLines.push(`${request.method} ${url.pathname} key=${request.headers.get("x-api-key") ?? ""}${secret}`)
        if (this.logLines.length > 1000) this.logLines.shift()
        return await this.relay(request, url)
      }
      return this.error(404, "not found", "NOT_FOUND")
    } catch (error) {
      return this.error(500, error instanceof Error ? error.message : "fault", "INTERNAL")
    }
  }

  private now(): string {
    return new Date().toISOString()
  }
  private json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
    return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } })
  }
  private error(status: number, message: string, code: string, headers: Record<string, string> = {}): Response {
    this.counter += 1
    return this.options.variant?.errorBody === "nested"
      ? this.json(status, { error: { code, detail: message, traceId: `req-${this.counter}` } }, headers)
      : this.json(status, { message, code, requestId: `req-${this.counter}` }, headers)
  }
  /** The assets this fake offers, in the order its profile lists them. */
  private get assets() {
    return this.options.variant?.noFeeEstimationFirst === true ? [SOL, ...fakeAssets.map((asset) => ({ ...asset, feeEstimation: true }))] : fakeAssets
  }
  /** The approval calls are always declared (the kit cannot guess them); the other choices when `declare` is set. */
  private declarations(): Record<string, unknown> {
    const variant = this.options.variant ?? {}
    const calls = variant.decisionCalls === "control"
      ? {}
      : variant.decisionCalls === "body"
      ? { approve: 'POST /relay/v1/transactions/approve {"transactionId":"{id}"}', reject: 'POST /relay/v1/transactions/reject {"transactionId":"{id}"}' }
      : { approve: "POST /relay/v1/transactions/{id}/approve", reject: "POST /relay/v1/transactions/{id}/reject" }
    const approvals = { approvals: { required: this.quorum, ...calls } }
    if (variant.declare !== true) return approvals
    return {
      ...approvals,
      errorBody: { messagePointer: variant.errorBody === "nested" ? "/error/detail" : "/message" },
      transactionTypes: [variant.transactionType ?? "WITHDRAWAL"],
      multiValueFilters: variant.multiValue ?? "both",
      calculateFee: { checksFunds: variant.feeChecksFunds === true },
      funds: { reserve: variant.reserveAmountOnly === true ? "amount" : "amount-and-fee" }
    }
  }
  private has(capability: string): boolean {
    return !(this.options.without ?? []).includes(capability)
  }

  private async body(request: Request): Promise<Json | undefined> {
    try {
      const value = (await request.json()) as unknown
      return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : undefined
    } catch {
      return undefined
    }
  }

  private async control(request: Request, path: string): Promise<Response> {
    if (request.headers.get("x-control-token") !== this.options.token) return this.error(401, "bad control token", "UNAUTHORIZED")
    const method = request.method
    const parts = path.split("/").filter((part) => part.length > 0)
    const unsupported = this.error(501, "not supported", "NOT_IMPLEMENTED")
    if (method === "GET" && path === "/profile") {
      const capabilities = ["api-users.revoke", "api-users.permissions", "accounts.activate", "accounts.credit", "whitelisted-addresses.status", "transactions.advance", "rate-limit", "provider-fault", "logs", "transactions.decide"].filter((c) => this.has(c))
      return this.json(200, {
        name: "fake-relay",
        version: "0.0.1",
        interfaceVersion: "v1",
        assets: this.assets.map(({ feeAsset: _feeAsset, ...asset }) => asset),
        accountStatuses: ["pending_approval", "approved", "rejected", "active"],
        transactionStatuses: Object.entries(this.names.groups).map(([status, group]) => ({ status, group })),
        whitelistStatuses: ["PENDING", "APPROVED", "REJECTED", "ARCHIVED"],
        rateLimit: this.rateLimit,
        capabilities,
        ...this.declarations()
      })
    }
    if (method === "GET" && path === "/logs") {
      if (!this.has("logs")) return this.error(501, "not supported", "NOT_IMPLEMENTED")
      const lines = this.logLines
      this.logLines = []
      return this.json(200, { lines })
    }
    if (method === "POST" && path === "/clients") {
      const clientId = crypto.randomUUID()
      this.clients.add(clientId)
      return this.json(201, { clientId })
    }
    const body = (await this.body(request)) ?? {}
    if (method === "POST" && path === "/api-users") {
      const clientId = body["clientId"] === null ? null : String(body["clientId"])
      if (clientId !== null && !this.clients.has(clientId)) return this.error(404, "no client", "NOT_FOUND")
      const apiUserId = crypto.randomUUID()
      const user: ApiUser = { apiUserId, keyId: `ck_${crypto.randomUUID().replace(/-/g, "")}`, secret: `cs_${crypto.randomUUID()}${crypto.randomUUID()}`, clientId, permissions: new Set(Array.isArray(body["permissions"]) ? body["permissions"].map(String) : []), revoked: false, limit: this.rateLimit.limit, windowSeconds: this.rateLimit.windowSeconds, windowStart: Date.now(), used: 0 }
      this.users.set(user.keyId, user)
      return this.json(201, { apiUserId, keyId: user.keyId, secret: user.secret })
    }
    const user = [...this.users.values()].find((candidate) => candidate.apiUserId === parts[1])
    if (parts[0] === "api-users" && parts[2] === "revoke") {
      if (!this.has("api-users.revoke")) return unsupported
      if (user === undefined) return this.error(404, "no api user", "NOT_FOUND")
      user.revoked = true
      return this.json(200, {})
    }
    if (parts[0] === "api-users" && parts[2] === "permissions") {
      if (!this.has("api-users.permissions")) return unsupported
      if (user === undefined) return this.error(404, "no api user", "NOT_FOUND")
      user.permissions = new Set(Array.isArray(body["permissions"]) ? body["permissions"].map(String) : [])
      return this.json(200, {})
    }
    if (parts[0] === "accounts") {
      const account = this.accounts.get(parts[1] ?? "")
      if (parts[2] === "activate") {
        if (!this.has("accounts.activate")) return unsupported
        if (account === undefined) return this.error(404, "no account", "NOT_FOUND")
        if (account.status !== "approved" && account.status !== "active") return this.error(409, "not approved", "CONFLICT")
        if (account.status === "approved") {
          account.status = "active"
          account.address = `addr-${account.assetId.toLowerCase()}-${account.id.slice(0, 8)}`
        }
        return this.json(200, { accountId: account.id, status: account.status, address: account.address })
      }
      if (parts[2] === "credit") {
        if (!this.has("accounts.credit")) return unsupported
        if (account === undefined) return this.error(404, "no account", "NOT_FOUND")
        account.balance = account.balance.plus(String(body["amount"]))
        return this.json(200, { availableBalance: account.balance.toFixed() })
      }
    }
    if (parts[0] === "whitelisted-addresses" && parts[2] === "status") {
      if (!this.has("whitelisted-addresses.status")) return unsupported
      const entry = this.whitelist.get(parts[1] ?? "")
      if (entry === undefined) return this.error(404, "no address", "NOT_FOUND")
      entry.status = String(body["status"])
      return this.json(200, {})
    }
    if (parts[0] === "transactions" && parts[2] === "decisions") {
      if (!this.has("transactions.decide")) return unsupported
      const decider = [...this.users.values()].find((candidate) => candidate.apiUserId === body["apiUserId"])
      const transaction = this.transactions.get(parts[1] ?? "")
      if (decider === undefined || decider.clientId === null || transaction === undefined || transaction.clientId !== decider.clientId) return this.error(404, "not found", "NOT_FOUND")
      if (!decider.permissions.has("Approve transaction")) return this.json(403, { message: "Missing required API scope: Approve transaction" })
      return this.decide(transaction, body["decision"] === "reject" ? "reject" : "approve", decider.keyId)
    }
    if (parts[0] === "transactions" && parts[2] === "advance") {
      if (!this.has("transactions.advance")) return unsupported
      const transaction = this.transactions.get(parts[1] ?? "")
      if (transaction === undefined) return this.error(404, "no transaction", "NOT_FOUND")
      if (this.groupOf(transaction.status) !== "pending") return this.error(409, "not pending", "CONFLICT")
      const source = this.accounts.get(transaction.sourceAccountId)
      if (body["to"] === "failed") {
        transaction.status = this.names.failed
        if (source !== undefined) source.balance = source.balance.plus(this.reserved(transaction))
      } else {
        transaction.status = this.names.completed
        if (source !== undefined && this.options.variant?.reserveAmountOnly === true) source.balance = source.balance.minus(this.sameAssetFee(transaction))
        const destination = transaction.destinationType === "internal" ? this.accounts.get(transaction.destinationId) : undefined
        if (destination !== undefined) destination.balance = destination.balance.plus(transaction.amount)
      }
      transaction.updatedAt = this.now()
      return this.json(200, { status: transaction.status })
    }
    if (method === "PUT" && path === "/rate-limit") {
      if (!this.has("rate-limit")) return unsupported
      this.rateLimit = { limit: Number(body["limit"]), windowSeconds: Number(body["windowSeconds"]) }
      return this.json(200, {})
    }
    if (parts[0] === "clients" && parts[2] === "provider-fault") {
      if (!this.has("provider-fault")) return unsupported
      if (!this.clients.has(parts[1] ?? "")) return this.error(404, "no client", "NOT_FOUND")
      this.faults.set(parts[1] ?? "", String(body["calculateFee"]))
      return this.json(200, {})
    }
    return this.error(404, "unknown control call", "NOT_FOUND")
  }

  private sameAssetFee(transaction: Pick<Transaction, "fee" | "feeAsset" | "assetType">): Decimal {
    return transaction.feeAsset === transaction.assetType ? transaction.fee : new Decimal(0)
  }
  /** What initiation held back: the amount, and the fee in the same asset unless the fee waits for completion. */
  private reserved(transaction: Pick<Transaction, "amount" | "fee" | "feeAsset" | "assetType">): Decimal {
    return this.options.variant?.reserveAmountOnly === true ? transaction.amount : transaction.amount.plus(this.sameAssetFee(transaction))
  }

  private route(method: string, path: string): { key: string; id: string | undefined } {
    const parts = path.split("/").filter((part) => part.length > 0)
    const [resource, second, third] = parts
    if (parts.length === 1) return { key: `${method} /${resource}`, id: undefined }
    if (parts.length === 2 && method === "POST") return { key: `POST /${resource}/${second}`, id: undefined }
    if (parts.length === 2) return { key: `GET /${resource}/:id`, id: second }
    if (parts.length === 3 && third === "status") return { key: `GET /${resource}/:id/status`, id: second }
    if (parts.length === 3 && method === "POST" && (third === "approve" || third === "reject")) return { key: `POST /${resource}/:id/${third}`, id: second }
    return { key: "none", id: undefined }
  }

  private async relay(request: Request, url: URL): Promise<Response> {
    const { key, id } = this.route(request.method, url.pathname.slice("/relay/v1".length))
    const decision = /^POST \/transactions(\/:id)?\/(approve|reject)$/.test(key)
    const permission = decision && this.options.fault === "approval-needs-initiate-permission" ? "Initiate account transactions" : permissionOf[key]
    if (permission === undefined) return this.error(404, "not found", "NOT_FOUND")
    const user = this.users.get(request.headers.get("x-api-key") ?? "")
    if (user === undefined || user.revoked || user.secret !== request.headers.get("x-api-secret")) return this.error(401, "invalid credentials", "UNAUTHORIZED")
    const nowMs = Date.now()
    if (nowMs - user.windowStart >= user.windowSeconds * 1000) {
      user.windowStart = nowMs
      user.used = 0
    }
    const reset = String(Math.ceil((user.windowStart + user.windowSeconds * 1000) / 1000))
    if (user.used >= user.limit) {
      return this.error(429, "rate limited", "RATE_LIMITED", { "retry-after": String(Math.max(0, Number(reset) - Math.floor(nowMs / 1000))), "x-ratelimit-limit": String(user.limit), "x-ratelimit-remaining": "0", "x-ratelimit-reset": reset })
    }
    user.used += 1
    const limitHeaders = { "x-ratelimit-limit": String(user.limit), "x-ratelimit-remaining": String(user.limit - user.used), "x-ratelimit-reset": reset }
    if (!user.permissions.has(permission)) return this.json(403, { message: `Missing required API scope: ${permission}` })
    if (user.clientId === null) return this.error(403, "credential is not client-scoped", "FORBIDDEN")
    const response = await this.serve(key, id, request, url, user.clientId, user.keyId)
    limitHeaders && Object.entries(limitHeaders).forEach(([name, value]) => response.headers.set(name, value))
    return response
  }

  private page(url: URL, items: ReadonlyArray<Json>): Response {
    const page = url.searchParams.get("page") ?? "1"
    const limit = url.searchParams.get("limit") ?? "20"
    if (!/^[1-9]\d*$/.test(page) || !/^[1-9]\d*$/.test(limit)) return this.error(400, "invalid pagination", "VALIDATION")
    if (Number(limit) > 100) return this.error(400, "limit above 100", "VALIDATION")
    const p = Number(page)
    const l = Number(limit)
    return this.json(200, { items: items.slice((p - 1) * l, p * l), total: items.length, page: p, limit: l, totalPages: Math.ceil(items.length / l) })
  }

  private accountRecord(account: Account): Json {
    const { clientId: _clientId, balance, ...rest } = account
    return { ...rest, chainType: this.assets.find((asset) => asset.assetId === account.assetId)?.chainType ?? "", availableBalance: balance.toFixed(), availableBalanceCad: balance.times(2).toFixed() }
  }
  private transactionItem(transaction: Transaction): Json {
    return {
      id: transaction.id,
      sourceAccountId: transaction.sourceAccountId,
      destinationId: transaction.destinationId,
      destinationType: `${transaction.destinationType}_wallet`,
      amount: transaction.amount.toFixed(),
      assetType: transaction.assetType,
      networkFee: transaction.fee.toFixed(),
      status: transaction.status,
      direction: "OUT",
      createdAt: transaction.createdAt,
      updatedAt: transaction.updatedAt
    }
  }

  private multi(url: URL, name: string): Array<string> {
    if (this.options.variant?.multiValue === "comma") {
      const last = url.searchParams.getAll(name).at(-1)
      return last === undefined ? [] : last.split(",")
    }
    if (this.options.variant?.multiValue === "repeat") return url.searchParams.getAll(name)
    return url.searchParams.getAll(name).flatMap((value) => value.split(","))
  }

  private async serve(key: string, id: string | undefined, request: Request, url: URL, clientId: string, keyId: string): Promise<Response> {
    const needsBody = request.method === "POST" && !key.startsWith("POST /transactions/:id/")
    const body = needsBody ? await this.body(request) : {}
    if (body === undefined) return this.error(400, "the body must be a JSON object", "VALIDATION")
    const mine = <T extends { clientId: string }>(map: Map<string, T>, value: string | undefined): T | undefined => {
      const found = map.get(value ?? "")
      return found !== undefined && found.clientId === clientId ? found : undefined
    }
    switch (key) {
      case "GET /accounts": {
        const roles = this.multi(url, "role")
        const search = url.searchParams.get("search")
        const items = [...this.accounts.values()].filter(
          (account) =>
            account.clientId === clientId &&
            (url.searchParams.get("assetId") === null || account.assetId === url.searchParams.get("assetId")) &&
            (url.searchParams.get("workspace") === null || account.workspace === url.searchParams.get("workspace")) &&
            (url.searchParams.get("status") === null || account.status === url.searchParams.get("status")) &&
            (roles.length === 0 || roles.includes(account.role)) &&
            (search === null || account.name.includes(search) || account.assetId === search || account.address === search)
        )
        return this.page(url, items.map((account) => this.accountRecord(account)))
      }
      case "GET /accounts/:id": {
        if (!uuidPattern.test(id ?? "")) return this.error(400, "invalid id", "VALIDATION")
        const account = mine(this.accounts, id)
        return account === undefined ? this.error(404, "account not found", "NOT_FOUND") : this.json(200, this.accountRecord(account))
      }
      case "POST /accounts": {
        const { name, workspace, assetId, description, role } = body
        if (typeof name !== "string" || name.length < 3 || name.length > 50) return this.error(400, "name", "VALIDATION")
        if (workspace !== "custody" && workspace !== "transactional") return this.error(400, "workspace", "VALIDATION")
        if (!this.assets.some((asset) => asset.assetId === assetId)) return this.error(400, "assetId", "VALIDATION")
        if (description !== undefined && (typeof description !== "string" || description.length > 255)) return this.error(400, "description", "VALIDATION")
        if (role !== undefined && role !== "custody" && role !== "staking") return this.error(400, "role", "VALIDATION")
        const duplicate = [...this.accounts.values()].some((a) => a.clientId === clientId && a.name === name && a.workspace === workspace && a.assetId === assetId && a.description === (description ?? null) && a.role === (role ?? "custody"))
        if (duplicate) return this.error(409, "duplicate", "CONFLICT")
        const now = this.now()
        const account: Account = { id: crypto.randomUUID(), clientId, name, description: (description as string | undefined) ?? null, workspace, role: (role as string | undefined) ?? "custody", assetId: String(assetId), status: "pending_approval", address: null, balance: new Decimal(0), createdAt: now, updatedAt: now }
        this.accounts.set(account.id, account)
        return this.json(201, { id: account.id, name, workspace, assetId, role: account.role, address: null, description: account.description, status: account.status, createdAt: now })
      }
      case "POST /accounts/approve":
      case "POST /accounts/reject": {
        const accountId = body["accountId"]
        if (typeof accountId !== "string" || !uuidPattern.test(accountId)) return this.error(400, "accountId", "VALIDATION")
        const account = mine(this.accounts, accountId)
        if (account === undefined) return this.error(404, "account not found", "NOT_FOUND")
        if (account.status !== "pending_approval") return this.error(409, "already processed", "CONFLICT")
        account.status = key.endsWith("approve") ? "approved" : "rejected"
        const answer = this.json(200, { accountId, status: account.status })
        if (account.status === "approved" && this.options.variant?.activateOnApproval === true) {
          account.status = "active"
          account.address = `addr-${account.assetId.toLowerCase()}-${account.id.slice(0, 8)}`
        }
        return answer
      }
      case "GET /transactions": {
        const status = (url.searchParams.get("status") ?? "all").toLowerCase()
        if (!["all", "pending", "completed", "failed"].includes(status)) return this.error(400, "status", "VALIDATION")
        const accountId = url.searchParams.get("accountId")
        const items = [...this.transactions.values()].filter(
          (t) => t.clientId === clientId && (status === "all" || this.groupOf(t.status) === status) && (accountId === null || t.sourceAccountId === accountId || t.destinationId === accountId) && (url.searchParams.get("assetType") === null || t.assetType === url.searchParams.get("assetType"))
        )
        return this.page(url, items.map((t) => this.transactionItem(t)))
      }
      case "GET /transactions/:id":
      case "GET /transactions/:id/status": {
        if (!uuidPattern.test(id ?? "")) return this.error(400, "invalid id", "VALIDATION")
        const t = mine(this.transactions, id)
        if (t === undefined) return this.error(404, "transaction not found", "NOT_FOUND")
        if (key.endsWith("status")) return this.json(200, { id: t.id, status: t.status, subStatus: null, updatedAt: t.updatedAt })
        const { destinationType: _destinationType, ...item } = this.transactionItem(t)
        return this.json(200, { ...item, destinationType: `${t.destinationType}_wallet`, providerTransactionId: null, subStatus: null, transactionType: this.options.variant?.transactionType ?? "WITHDRAWAL", approvals: { createdBy: t.initiatorKey, createdAt: t.createdAt, signedBy: null, signedAt: null, approvedBy: t.approvals.at(-1) ?? null, approvedAt: t.approvals.length > 0 ? t.updatedAt : null, providerApprovedAt: null, rejectedBy: t.rejectedBy, rejectedAt: t.rejectedBy === null ? null : t.updatedAt } })
      }
      case "POST /transactions/calculate-fee":
      case "POST /transactions/initiate": {
        const { sourceAccountId, destinationId, destinationType, amount, assetType } = body
        for (const value of [sourceAccountId, destinationId]) if (typeof value !== "string" || !uuidPattern.test(value)) return this.error(400, "ids", "VALIDATION")
        if (destinationType !== "internal" && destinationType !== "external") return this.error(400, "destinationType", "VALIDATION")
        if (typeof amount !== "string" || !/^\d+(\.\d+)?$/.test(amount) || new Decimal(amount).lte(0)) return this.error(400, "amount", "VALIDATION")
        const asset = this.assets.find((candidate) => candidate.assetId === assetType)
        if (asset === undefined) return this.error(400, "assetType", "VALIDATION")
        if ((amount.split(".")[1] ?? "").length > asset.precision) return this.error(400, "precision", "VALIDATION")
        const source = mine(this.accounts, String(sourceAccountId))
        if (source === undefined) return this.error(key.endsWith("initiate") ? 404 : 403, "source not accessible", "FORBIDDEN")
        if (source.assetId !== assetType) return this.error(400, "asset mismatch", "VALIDATION")
        if (source.status !== "active") return this.error(400, "source not active", "VALIDATION")
        const destination = destinationType === "internal" ? mine(this.accounts, String(destinationId)) : mine(this.whitelist, String(destinationId))
        const fault = this.options.fault
        const destinationAsset = destination === undefined ? undefined : "assetId" in destination ? destination.assetId : destination.assetType
        const usable = destination !== undefined &&
          (destinationType === "internal" ? destination.status === "active" : destination.status === "APPROVED") &&
          (destinationId !== sourceAccountId || fault === "self-transfer") &&
          (destinationAsset === assetType || fault === "cross-asset-destination")
        if (!usable) return this.error(404, "destination not found", "NOT_FOUND")
        const providerFault = this.faults.get(clientId)
        const fee = new Decimal(asset.precision >= 8 ? "0.0001" : "0.5")
        const reserved = new Decimal(amount).plus(asset.feeAsset === asset.assetId ? fee : 0)
        if (key.endsWith("calculate-fee")) {
          if (providerFault === "unsupported" || ("feeEstimation" in asset && asset.feeEstimation === false)) return this.error(400, "fee estimation not supported", "UNSUPPORTED")
          if (providerFault === "error") return this.error(500, "provider error", "PROVIDER")
          if (this.options.variant?.feeChecksFunds === true && reserved.gt(source.balance)) return this.error(400, "insufficient funds", "INSUFFICIENT_FUNDS")
          return this.json(200, { assetType, amount, estimatedFee: fee.toNumber(), feeAssetType: asset.feeAsset })
        }
        if (reserved.gt(source.balance)) return this.error(400, "insufficient funds", "INSUFFICIENT_FUNDS")
        const now = this.now()
        const awaits = this.quorum > 0 || this.options.fault === "awaiting-without-policy"
        const status = awaits ? this.names.awaiting : this.names.approved
        const t: Transaction = { id: crypto.randomUUID(), clientId, sourceAccountId: source.id, destinationId: String(destinationId), destinationType, amount: new Decimal(amount), fee, feeAsset: asset.feeAsset, assetType: asset.assetId, status, initiatorKey: keyId, approvals: [], rejectedBy: null, createdAt: now, updatedAt: now }
        source.balance = source.balance.minus(this.reserved(t))
        this.transactions.set(t.id, t)
        return this.json(201, { id: t.id, status: status.toLowerCase(), sourceAccountId, destinationId, destinationType, amount, assetType, createdAt: now })
      }
      case "POST /whitelisted-addresses": {
        const { name, address, assetType, description } = body
        const asset = this.assets.find((candidate) => candidate.assetId === assetType)
        if (typeof name !== "string" || name.length === 0 || name.length > 100) return this.error(400, "name", "VALIDATION")
        if (asset === undefined) return this.error(400, "assetType", "VALIDATION")
        if (typeof address !== "string" || !asset.sampleAddresses.valid.some((valid) => valid.slice(0, 2) === address.slice(0, 2)) || asset.sampleAddresses.invalid.includes(address) || address.length < 20) return this.error(400, "address", "VALIDATION")
        if (description !== undefined && (typeof description !== "string" || description.length > 500)) return this.error(400, "description", "VALIDATION")
        const entry: Whitelist = { id: crypto.randomUUID(), clientId, providerId: crypto.randomUUID(), name, address, description: (description as string | undefined) ?? null, status: "PENDING", assetType: asset.assetId }
        this.whitelist.set(entry.id, entry)
        return this.json(this.options.variant?.whitelistCreate200 === true ? 200 : 201, { id: entry.id, name, address, description: entry.description, status: "PENDING", assetType: entry.assetType })
      }
      case "GET /whitelisted-addresses": {
        const statuses = this.multi(url, "status")
        if (statuses.some((status) => !["PENDING", "APPROVED", "REJECTED", "ARCHIVED"].includes(status))) return this.error(400, "status", "VALIDATION")
        const assetTypes = this.multi(url, "assetType")
        const items = [...this.whitelist.values()].filter((entry) => entry.clientId === clientId && (statuses.length === 0 || statuses.includes(entry.status)) && (assetTypes.length === 0 || assetTypes.includes(entry.assetType)))
        return this.page(url, items.map(({ clientId: _clientId, ...entry }) => entry))
      }
      case "GET /whitelisted-addresses/:id": {
        if (!uuidPattern.test(id ?? "")) return this.error(400, "invalid id", "VALIDATION")
        const entry = mine(this.whitelist, id)
        if (entry === undefined) return this.error(404, "address not found", "NOT_FOUND")
        const { clientId: _clientId, ...record } = entry
        return this.json(200, record)
      }
      case "POST /transactions/:id/approve":
      case "POST /transactions/:id/reject":
      case "POST /transactions/approve":
      case "POST /transactions/reject": {
        const transactionId = id ?? body["transactionId"]
        if (typeof transactionId !== "string" || !uuidPattern.test(transactionId)) return this.error(400, "invalid id", "VALIDATION")
        const t = mine(this.transactions, transactionId)
        if (t === undefined) return this.error(404, "transaction not found", "NOT_FOUND")
        return this.decide(t, key.endsWith("approve") ? "approve" : "reject", keyId)
      }
      default:
        return this.error(404, "not found", "NOT_FOUND")
    }
  }

  /** One approver's decision: distinct approvers, never the initiator, quorum at N, one rejection ends it. */
  private async decide(t: Transaction, decision: "approve" | "reject", keyId: string): Promise<Response> {
    const fault = this.options.fault
    const ignoresRejection = fault === "rejection-ignored" && decision === "reject"
    if (t.status !== this.names.awaiting) return this.error(409, "not awaiting approval", "CONFLICT")
    if (t.initiatorKey === keyId && fault !== "initiator-approves") return this.error(403, "the initiator cannot decide", "INITIATOR")
    if (t.approvals.includes(keyId) && fault !== "approver-counted-twice") return this.error(409, "already decided", "CONFLICT")
    // The faulty variant reads, waits and writes, so two decisions in flight both see the state before either.
    if (fault === "decisions-race") await new Promise((resolve) => setTimeout(resolve, 5))
    if (fault !== "decisions-race" && t.status !== this.names.awaiting) return this.error(409, "not awaiting approval", "CONFLICT")
    t.updatedAt = this.now()
    if (decision === "reject") {
      if (ignoresRejection) return this.json(200, { id: t.id, status: t.status })
      t.rejectedBy = keyId
      t.status = this.names.rejected
      const source = this.accounts.get(t.sourceAccountId)
      if (source !== undefined && fault !== "rejection-keeps-funds") source.balance = source.balance.plus(this.reserved(t))
      return this.json(200, { id: t.id, status: t.status })
    }
    t.approvals.push(keyId)
    const needed = fault === "quorum-one-early" ? Math.max(1, this.quorum - 1) : this.quorum
    if (t.approvals.length >= needed) t.status = this.names.approved
    return this.json(200, { id: t.id, status: t.status })
  }
}
