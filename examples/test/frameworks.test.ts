/**
 * The mounting of docs/http.md, as examples/express.ts, fastify.ts and hono.ts hold it: the relay handler inside
 * Express, Fastify and Hono answers exactly as it does on its own (a create with a JSON body, a list, an unknown
 * route, missing credentials), and the app's own JSON route keeps its body parser.
 */
import { type AddressInfo } from "node:net"
import { Administration } from "@custody-relay/core"
import { makeHandler } from "@custody-relay/http"
import { Redacted } from "effect"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { expressApp } from "../express.js"
import { fastifyApp } from "../fastify.js"
import { honoApp } from "../hono.js"

const handler = makeHandler({ logLevel: "Warn" })
let headers: Record<string, string> = {}

beforeAll(async () => {
  await handler.ready
  const client = await handler.runtime.runPromise(Administration.createClient())
  const issued = await handler.runtime.runPromise(
    Administration.createApiUser({ clientId: client.id, permissions: ["View custody account", "Initiate new custody account"] })
  )
  headers = { "x-api-key": issued.keyId, "x-api-secret": Redacted.value(issued.secret) }
})
afterAll(() => handler.dispose())

type Send = (path: string, init?: RequestInit) => Promise<Response>

/** The same four requests through `send`: status, error code and what was created. */
const exercise = async (send: Send, name: string) => {
  const created = await send("/relay/v1/accounts", {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ name, workspace: "custody", assetId: "BTC" })
  })
  const account = (await created.json()) as { id: string; name: string }
  const listed = await send("/relay/v1/accounts?limit=100", { headers })
  const names = ((await listed.json()) as { items: ReadonlyArray<{ name: string }> }).items.map((item) => item.name)
  const unknown = await send("/relay/v1/nothing", { headers })
  const anonymous = await send("/relay/v1/accounts")
  return {
    created: created.status,
    createdName: account.name,
    listed: listed.status,
    listsIt: names.includes(name),
    unknown: [unknown.status, ((await unknown.json()) as { code: string }).code],
    anonymous: anonymous.status
  }
}

const expected = (name: string) => ({
  created: 201,
  createdName: name,
  listed: 200,
  listsIt: true,
  unknown: [404, "ROUTE_NOT_FOUND"],
  anonymous: 401
})

/** The app's own JSON route, beside the relay: its body parser must still work. */
const echo = async (port: number): Promise<unknown> =>
  (await fetch(`http://127.0.0.1:${port}/app/echo`, { method: "POST", headers: { "content-type": "application/json" }, body: "{\"a\":1}" })).json()

const over = async (listen: (port: number) => Promise<{ port: number; close: () => Promise<void> }>, name: string) => {
  const server = await listen(0)
  try {
    return await exercise((path, init) => fetch(`http://127.0.0.1:${server.port}${path}`, init), name)
  } finally {
    await server.close()
  }
}

describe("docs/http.md: mounting the handler", () => {
  it("on its own (the reference answers)", async () => {
    const answers = await exercise((path, init) => handler(new Request(`http://relay.local${path}`, init)), "Direct")
    assert.deepStrictEqual(answers, expected("Direct"))
  })

  it("in Express, mounted before any body parser (examples/express.ts); the app's own JSON route keeps its parser", async () => {
    let other: unknown
    const answers = await over(async () => {
      const server = expressApp(handler).listen(0, "127.0.0.1")
      await new Promise((resolve) => server.once("listening", resolve))
      const port = (server.address() as AddressInfo).port
      other = await echo(port)
      return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
    }, "Express")
    assert.deepStrictEqual(answers, expected("Express"))
    assert.deepStrictEqual(other, { got: { a: 1 } })
  })

  it("in Fastify, with the body left to the handler in the relay's own plugin (examples/fastify.ts); the app's other routes keep their JSON parser", async () => {
    let other: unknown
    const answers = await over(async () => {
      const fastify = fastifyApp(handler)
      await fastify.listen({ port: 0, host: "127.0.0.1" })
      const port = (fastify.server.address() as AddressInfo).port
      other = await echo(port)
      return { port, close: () => fastify.close() }
    }, "Fastify")
    assert.deepStrictEqual(answers, expected("Fastify"))
    assert.deepStrictEqual(other, { got: { a: 1 } })
  })

  it("in Hono, which speaks Request (examples/hono.ts)", async () => {
    const app = honoApp(handler)
    const answers = await exercise((path, init) => Promise.resolve(app.fetch(new Request(`http://relay.local${path}`, init))), "Hono")
    assert.deepStrictEqual(answers, expected("Hono"))
    const other = await app.fetch(new Request("http://relay.local/app/echo", { method: "POST", headers: { "content-type": "application/json" }, body: "{\"a\":1}" }))
    assert.deepStrictEqual(await other.json(), { got: { a: 1 } })
  })
})
