/**
 * The test control protocol (v1, see docs/control-protocol.md) as a TypeScript interface. A target offers it
 * over HTTP (`HttpControl`) or hands the kit an object with the same operations for in-process runs. A call the
 * target does not offer fails with `CapabilityMissing`, which turns the check that needed it into not-applicable.
 */
import { joinPath, type Transport } from "./Transport.js"

export const controlProtocolVersion = "1.2"

/** Names of the optional control calls, as a profile lists them in `capabilities`. */
export const capabilityNames = [
  "api-users.revoke",
  "api-users.permissions",
  "accounts.activate",
  "accounts.credit",
  "whitelisted-addresses.status",
  "transactions.advance",
  "rate-limit",
  "provider-fault",
  "logs",
  "transactions.decide"
] as const
export type Capability = (typeof capabilityNames)[number]

/** What a check needs: the control base (clients and API users) and any optional calls. */
export type Need = "control" | Capability

export interface ApiUser {
  readonly apiUserId: string
  readonly keyId: string
  readonly secret: string
}

export type WhitelistStatusChange = "APPROVED" | "REJECTED" | "ARCHIVED"
export type AdvanceTarget = "completed" | "failed"
export type ProviderFault = "none" | "unsupported" | "error"

export interface Control {
  createClient(): Promise<{ readonly clientId: string }>
  createApiUser(clientId: string | null, permissions: ReadonlyArray<string>): Promise<ApiUser>
  revokeApiUser(apiUserId: string): Promise<void>
  setPermissions(apiUserId: string, permissions: ReadonlyArray<string>): Promise<void>
  activateAccount(accountId: string): Promise<{ readonly accountId: string; readonly status: string; readonly address: string | null }>
  creditAccount(accountId: string, amount: string): Promise<{ readonly availableBalance: string }>
  setWhitelistStatus(id: string, status: WhitelistStatusChange): Promise<void>
  advanceTransaction(id: string, to: AdvanceTarget): Promise<{ readonly status: string }>
  setRateLimit(limit: number, windowSeconds: number): Promise<void>
  /** Addition of v1.1 (capability `provider-fault`): the fee estimation of one client's provider fails. */
  setProviderFault(clientId: string, calculateFee: ProviderFault): Promise<void>
  /** Addition of v1.1 (capability `logs`): the log lines written since the previous call, for AUTH-SEC-1. */
  logs(): Promise<ReadonlyArray<string>>
  /**
   * Addition of v1.2 (capability `transactions.decide`), for an implementation with no approval endpoint: one API
   * user's decision on a transaction, answered with the status the decision got (2xx accepted, or the 4xx refusal).
   */
  decideTransaction(id: string, apiUserId: string, decision: "approve" | "reject"): Promise<{ readonly status: number }>
  profile(): Promise<unknown>
}

/** A control call answered with an unexpected status. `status` lets checks tell 404 and 409 apart. */
export class ControlError extends Error {
  constructor(
    readonly call: string,
    readonly status: number,
    readonly body: string
  ) {
    super(`control ${call} answered ${status}: ${body.slice(0, 300)}`)
    this.name = "ControlError"
  }
}

/** The target does not offer a control call (501, or not listed in the profile's capabilities). */
export class CapabilityMissing extends Error {
  constructor(readonly capability: Need) {
    super(`the target does not offer the control capability ${capability}`)
    this.name = "CapabilityMissing"
  }
}

const capabilityOfCall: Readonly<Record<string, Need>> = {
  createClient: "control",
  createApiUser: "control",
  revokeApiUser: "api-users.revoke",
  setPermissions: "api-users.permissions",
  activateAccount: "accounts.activate",
  creditAccount: "accounts.credit",
  setWhitelistStatus: "whitelisted-addresses.status",
  advanceTransaction: "transactions.advance",
  setRateLimit: "rate-limit",
  setProviderFault: "provider-fault",
  logs: "logs",
  decideTransaction: "transactions.decide",
  profile: "control"
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

const field = (call: string, body: unknown, name: string): string => {
  if (isObject(body) && typeof body[name] === "string") return body[name]
  throw new ControlError(call, 200, `answer lacks string field ${name}: ${JSON.stringify(body)}`)
}

/** The control protocol over HTTP: `{controlUrl}/clients` and so on, each call with `x-control-token`. */
export class HttpControl implements Control {
  constructor(
    private readonly transport: Transport,
    private readonly controlPath: string,
    private readonly token: string
  ) {}

  private async call(name: string, method: string, path: string, body?: unknown, okStatus: ReadonlyArray<number> = [200, 201, 204]): Promise<unknown> {
    const options: { headers: Record<string, string>; body?: string } = { headers: { "x-control-token": this.token } }
    if (body !== undefined) options.body = JSON.stringify(body)
    const result = await this.transport.send(method, joinPath(this.controlPath, path), options)
    if (result.status === 501) throw new CapabilityMissing(capabilityOfCall[name] ?? "control")
    if (!okStatus.includes(result.status)) throw new ControlError(name, result.status, result.text)
    return result.json
  }

  async createClient(): Promise<{ clientId: string }> {
    const body = await this.call("createClient", "POST", "/clients")
    return { clientId: field("createClient", body, "clientId") }
  }
  async createApiUser(clientId: string | null, permissions: ReadonlyArray<string>): Promise<ApiUser> {
    const body = await this.call("createApiUser", "POST", "/api-users", { clientId, permissions })
    return { apiUserId: field("createApiUser", body, "apiUserId"), keyId: field("createApiUser", body, "keyId"), secret: field("createApiUser", body, "secret") }
  }
  async revokeApiUser(apiUserId: string): Promise<void> {
    await this.call("revokeApiUser", "POST", `/api-users/${encodeURIComponent(apiUserId)}/revoke`)
  }
  async setPermissions(apiUserId: string, permissions: ReadonlyArray<string>): Promise<void> {
    await this.call("setPermissions", "PUT", `/api-users/${encodeURIComponent(apiUserId)}/permissions`, { permissions })
  }
  async activateAccount(accountId: string): Promise<{ accountId: string; status: string; address: string | null }> {
    const body = await this.call("activateAccount", "POST", `/accounts/${encodeURIComponent(accountId)}/activate`)
    const address = isObject(body) && typeof body["address"] === "string" ? body["address"] : null
    return { accountId: field("activateAccount", body, "accountId"), status: field("activateAccount", body, "status"), address }
  }
  async creditAccount(accountId: string, amount: string): Promise<{ availableBalance: string }> {
    const body = await this.call("creditAccount", "POST", `/accounts/${encodeURIComponent(accountId)}/credit`, { amount })
    return { availableBalance: field("creditAccount", body, "availableBalance") }
  }
  async setWhitelistStatus(id: string, status: WhitelistStatusChange): Promise<void> {
    await this.call("setWhitelistStatus", "POST", `/whitelisted-addresses/${encodeURIComponent(id)}/status`, { status })
  }
  async advanceTransaction(id: string, to: AdvanceTarget): Promise<{ status: string }> {
    const body = await this.call("advanceTransaction", "POST", `/transactions/${encodeURIComponent(id)}/advance`, { to })
    return { status: field("advanceTransaction", body, "status") }
  }
  async setRateLimit(limit: number, windowSeconds: number): Promise<void> {
    await this.call("setRateLimit", "PUT", "/rate-limit", { limit, windowSeconds })
  }
  async setProviderFault(clientId: string, calculateFee: ProviderFault): Promise<void> {
    await this.call("setProviderFault", "PUT", `/clients/${encodeURIComponent(clientId)}/provider-fault`, { calculateFee })
  }
  async logs(): Promise<ReadonlyArray<string>> {
    const body = await this.call("logs", "GET", "/logs")
    const lines = isObject(body) && Array.isArray(body["lines"]) ? body["lines"] : undefined
    if (lines === undefined) throw new ControlError("logs", 200, `answer lacks an array field lines: ${JSON.stringify(body).slice(0, 200)}`)
    return lines.map((line) => (typeof line === "string" ? line : JSON.stringify(line)))
  }
  async decideTransaction(id: string, apiUserId: string, decision: "approve" | "reject"): Promise<{ status: number }> {
    // Every 2xx and 4xx is the decision's own answer; only 401 (the token), 501 and 5xx are the control's.
    const result = await this.transport.send("POST", joinPath(this.controlPath, `/transactions/${encodeURIComponent(id)}/decisions`), {
      headers: { "x-control-token": this.token },
      body: JSON.stringify({ apiUserId, decision })
    })
    if (result.status === 501) throw new CapabilityMissing("transactions.decide")
    if (result.status === 401 || result.status >= 500) throw new ControlError("decideTransaction", result.status, result.text)
    return { status: result.status }
  }
  profile(): Promise<unknown> {
    return this.call("profile", "GET", "/profile")
  }
}

/**
 * Gates a control by the profile's declared capabilities: when the profile lists any of the kit's known names,
 * a call whose capability is not listed fails with `CapabilityMissing` before it reaches the target.
 */
export const gateControl = (control: Control, declared: ReadonlySet<Capability> | undefined): Control => {
  if (declared === undefined) return control
  const guard = (capability: Capability): void => {
    if (!declared.has(capability)) throw new CapabilityMissing(capability)
  }
  return {
    createClient: () => control.createClient(),
    createApiUser: (clientId, permissions) => control.createApiUser(clientId, permissions),
    revokeApiUser: async (id) => (guard("api-users.revoke"), control.revokeApiUser(id)),
    setPermissions: async (id, permissions) => (guard("api-users.permissions"), control.setPermissions(id, permissions)),
    activateAccount: async (id) => (guard("accounts.activate"), control.activateAccount(id)),
    creditAccount: async (id, amount) => (guard("accounts.credit"), control.creditAccount(id, amount)),
    setWhitelistStatus: async (id, status) => (guard("whitelisted-addresses.status"), control.setWhitelistStatus(id, status)),
    advanceTransaction: async (id, to) => (guard("transactions.advance"), control.advanceTransaction(id, to)),
    setRateLimit: async (limit, window) => (guard("rate-limit"), control.setRateLimit(limit, window)),
    setProviderFault: async (clientId, fault) => (guard("provider-fault"), control.setProviderFault(clientId, fault)),
    logs: async () => (guard("logs"), control.logs()),
    decideTransaction: async (id, apiUserId, decision) => (guard("transactions.decide"), control.decideTransaction(id, apiUserId, decision)),
    profile: () => control.profile()
  }
}

/** A control that remembers every secret it hands out, so a run can scan answers and logs for all of them. */
export const recordSecrets = (control: Control, secrets: Set<string>): Control => ({
  createClient: () => control.createClient(),
  createApiUser: async (clientId, permissions) => {
    const user = await control.createApiUser(clientId, permissions)
    secrets.add(user.secret)
    return user
  },
  revokeApiUser: (id) => control.revokeApiUser(id),
  setPermissions: (id, permissions) => control.setPermissions(id, permissions),
  activateAccount: (id) => control.activateAccount(id),
  creditAccount: (id, amount) => control.creditAccount(id, amount),
  setWhitelistStatus: (id, status) => control.setWhitelistStatus(id, status),
  advanceTransaction: (id, to) => control.advanceTransaction(id, to),
  setRateLimit: (limit, windowSeconds) => control.setRateLimit(limit, windowSeconds),
  setProviderFault: (clientId, fault) => control.setProviderFault(clientId, fault),
  logs: () => control.logs(),
  decideTransaction: (id, apiUserId, decision) => control.decideTransaction(id, apiUserId, decision),
  profile: () => control.profile()
})
