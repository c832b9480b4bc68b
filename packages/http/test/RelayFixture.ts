/**
 * A relay handler on in-memory storage with a tenant ready to use: a client, API users with chosen permissions,
 * an active funded BTC account, a second active BTC account and an approved whitelisted address. Setup goes
 * through the test control protocol, so every test also exercises it.
 */
import { Permission } from "@custody-relay/core"
import type { Logger } from "effect"
import { type HandlerOptions, makeHandler, type RelayHandler } from "../src/index.js"

export const CONTROL_TOKEN = "test-control-token"
export const ORIGIN = "http://relay.test"

export interface Credential {
  readonly apiUserId: string
  readonly keyId: string
  readonly secret: string
}

export interface Call {
  readonly status: number
  readonly headers: Headers
  readonly body: unknown
  readonly text: string
}

const read = async (response: Response): Promise<Call> => {
  const text = await response.text()
  let body: unknown
  try {
    body = text.length === 0 ? undefined : JSON.parse(text)
  } catch {
    body = undefined
  }
  return { status: response.status, headers: response.headers, body, text }
}

export const record = (value: unknown): Record<string, unknown> => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error(`not an object: ${JSON.stringify(value)}`)
  return value as Record<string, unknown>
}

export const field = (value: unknown, name: string): string => {
  const v = record(value)[name]
  if (typeof v !== "string") throw new Error(`field ${name} is not a string in ${JSON.stringify(value)}`)
  return v
}

export interface Fixture {
  readonly handler: RelayHandler
  readonly send: (method: string, path: string, init?: { readonly headers?: Record<string, string>; readonly body?: string | unknown }) => Promise<Call>
  readonly as: (credential: Credential) => {
    readonly get: (path: string, headers?: Record<string, string>) => Promise<Call>
    readonly post: (path: string, body?: unknown, headers?: Record<string, string>) => Promise<Call>
  }
  readonly control: (method: string, path: string, body?: unknown) => Promise<Call>
  readonly createClient: () => Promise<string>
  readonly createUser: (clientId: string | null, permissions: ReadonlyArray<string>) => Promise<Credential>
  readonly dispose: () => Promise<void>
}

export const makeFixture = (options: HandlerOptions & { readonly logger?: Logger.Logger<unknown, unknown> } = {}): Fixture => {
  const handler = makeHandler({ controlToken: CONTROL_TOKEN, logger: options.logger ?? silentLogger, ...options })
  const send: Fixture["send"] = async (method, path, init = {}) => {
    const headers = new Headers(init.headers ?? {})
    let body: string | undefined
    if (init.body !== undefined) {
      body = typeof init.body === "string" ? init.body : JSON.stringify(init.body)
      if (!headers.has("content-type")) headers.set("content-type", "application/json")
    }
    return read(await handler(new Request(ORIGIN + path, { method, headers, ...(body === undefined ? {} : { body }) })))
  }
  const control: Fixture["control"] = (method, path, body) =>
    send(method, `/__control${path}`, { headers: { "x-control-token": CONTROL_TOKEN }, ...(body === undefined ? {} : { body }) })
  const auth = (c: Credential) => ({ "x-api-key": c.keyId, "x-api-secret": c.secret })
  return {
    handler,
    send,
    control,
    as: (c) => ({
      get: (path, headers = {}) => send("GET", path, { headers: { ...auth(c), ...headers } }),
      post: (path, body, headers = {}) => send("POST", path, { headers: { ...auth(c), ...headers }, ...(body === undefined ? {} : { body }) })
    }),
    createClient: async () => field((await control("POST", "/clients")).body, "clientId"),
    createUser: async (clientId, permissions) => {
      const created = await control("POST", "/api-users", { clientId, permissions })
      if (created.status !== 201) throw new Error(`createUser: ${created.status} ${created.text}`)
      return { apiUserId: field(created.body, "apiUserId"), keyId: field(created.body, "keyId"), secret: field(created.body, "secret") }
    },
    dispose: () => handler.dispose()
  }
}

import { Logger as EffectLogger } from "effect"
export const silentLogger: Logger.Logger<unknown, unknown> = EffectLogger.make(() => undefined)

export const allPermissions: ReadonlyArray<string> = Permission.permissionNames

export interface Tenant {
  readonly clientId: string
  readonly admin: Credential
  readonly approver: Credential
  readonly source: string
  readonly destination: string
  readonly whitelisted: string
}

/** A client with an admin (every permission), a second approver, two active BTC accounts (the first funded) and an approved whitelisted BTC address. */
export const makeTenant = async (fixture: Fixture): Promise<Tenant> => {
  const clientId = await fixture.createClient()
  const admin = await fixture.createUser(clientId, allPermissions)
  const approver = await fixture.createUser(clientId, allPermissions)
  const as = fixture.as(admin)
  const open = async (name: string) => {
    const created = await as.post("/relay/v1/accounts", { name, workspace: "custody", assetId: "BTC" })
    if (created.status !== 201) throw new Error(`create account: ${created.status} ${created.text}`)
    const id = field(created.body, "id")
    await as.post("/relay/v1/accounts/approve", { accountId: id })
    const activated = await fixture.control("POST", `/accounts/${id}/activate`)
    if (activated.status !== 200) throw new Error(`activate: ${activated.status} ${activated.text}`)
    return id
  }
  const source = await open("Treasury")
  const destination = await open("Settlement")
  const credited = await fixture.control("POST", `/accounts/${source}/credit`, { amount: "10" })
  if (credited.status !== 200) throw new Error(`credit: ${credited.status} ${credited.text}`)
  const wl = await as.post("/relay/v1/whitelisted-addresses", {
    name: "Exchange",
    address: "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
    assetType: "BTC"
  })
  if (wl.status !== 201) throw new Error(`whitelist: ${wl.status} ${wl.text}`)
  const whitelisted = field(wl.body, "id")
  await fixture.control("POST", `/whitelisted-addresses/${whitelisted}/status`, { status: "APPROVED" })
  return { clientId, admin, approver, source, destination, whitelisted }
}
