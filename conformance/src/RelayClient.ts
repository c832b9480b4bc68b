/**
 * A thin client of the relay interface for one credential. It returns raw results (status, headers, JSON) and
 * never throws on an HTTP status, because judging the answer is the checks' job.
 */
import { apiPrefix } from "./Endpoints.js"
import type { HttpResult, Transport } from "./Transport.js"

export interface Credential {
  readonly keyId: string
  readonly secret: string
}

export type Query = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

export const queryString = (query: Query | undefined): string => {
  if (query === undefined) return ""
  const params = new URLSearchParams()
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined) continue
    if (typeof value === "string") params.append(key, value)
    else for (const item of value) params.append(key, item)
  }
  const text = params.toString()
  return text.length === 0 ? "" : "?" + text
}

export interface CreateAccountBody {
  name?: unknown
  workspace?: unknown
  assetId?: unknown
  description?: unknown
  role?: unknown
}

export interface TransferBody {
  sourceAccountId?: unknown
  destinationId?: unknown
  destinationType?: unknown
  amount?: unknown
  assetType?: unknown
}

export interface CreateWhitelistBody {
  name?: unknown
  address?: unknown
  assetType?: unknown
  description?: unknown
}

export class RelayClient {
  constructor(
    readonly transport: Transport,
    readonly credential: Credential | undefined
  ) {}

  withCredential(credential: Credential | undefined): RelayClient {
    return new RelayClient(this.transport, credential)
  }

  private authHeaders(): Record<string, string> {
    if (this.credential === undefined) return {}
    return { "x-api-key": this.credential.keyId, "x-api-secret": this.credential.secret }
  }

  /** A raw call on a path below the prefix; `body` is serialised unless it is already a string. */
  raw(method: string, path: string, body?: unknown, extraHeaders: Readonly<Record<string, string>> = {}): Promise<HttpResult> {
    const options: { headers: Record<string, string>; body?: string } = { headers: { ...this.authHeaders(), ...extraHeaders } }
    if (body !== undefined) options.body = typeof body === "string" ? body : JSON.stringify(body)
    return this.transport.send(method, path.startsWith("/") && path.startsWith(apiPrefix) ? path : apiPrefix + path, options)
  }

  listAccounts(query?: Query): Promise<HttpResult> {
    return this.raw("GET", "/accounts" + queryString(query))
  }
  getAccount(id: string): Promise<HttpResult> {
    return this.raw("GET", `/accounts/${encodeURIComponent(id)}`)
  }
  createAccount(body: CreateAccountBody): Promise<HttpResult> {
    return this.raw("POST", "/accounts", body)
  }
  approveAccount(accountId: unknown): Promise<HttpResult> {
    return this.raw("POST", "/accounts/approve", { accountId })
  }
  rejectAccount(accountId: unknown): Promise<HttpResult> {
    return this.raw("POST", "/accounts/reject", { accountId })
  }
  listTransactions(query?: Query): Promise<HttpResult> {
    return this.raw("GET", "/transactions" + queryString(query))
  }
  getTransaction(id: string): Promise<HttpResult> {
    return this.raw("GET", `/transactions/${encodeURIComponent(id)}`)
  }
  getTransactionStatus(id: string): Promise<HttpResult> {
    return this.raw("GET", `/transactions/${encodeURIComponent(id)}/status`)
  }
  calculateFee(body: TransferBody): Promise<HttpResult> {
    return this.raw("POST", "/transactions/calculate-fee", body)
  }
  initiate(body: TransferBody): Promise<HttpResult> {
    return this.raw("POST", "/transactions/initiate", body)
  }
  createWhitelist(body: CreateWhitelistBody): Promise<HttpResult> {
    return this.raw("POST", "/whitelisted-addresses", body)
  }
  listWhitelist(query?: Query): Promise<HttpResult> {
    return this.raw("GET", "/whitelisted-addresses" + queryString(query))
  }
  getWhitelist(id: string): Promise<HttpResult> {
    return this.raw("GET", `/whitelisted-addresses/${encodeURIComponent(id)}`)
  }
}
