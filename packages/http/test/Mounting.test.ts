/**
 * Where the handler is mounted (a base path in front of /relay/v1) and who may call it from a browser (CORS, off
 * by default): a listed origin gets its preflight answered and may read the rate-limit and replay headers; any
 * other origin gets no CORS header; credentials are required as ever (AUTH-HDR-1).
 */
import { Administration } from "@custody-relay/core"
import { Redacted } from "effect"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { type CorsOptions, makeHandler, type RelayHandler } from "../src/index.js"
import { normalizeBasePath } from "../src/Mounting.js"
import { toNodeListener } from "../src/node.js"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"

const handlers: Array<RelayHandler> = []
const credentialsFor = async (handler: RelayHandler) => {
  await handler.ready
  const client = await handler.runtime.runPromise(Administration.createClient())
  const issued = await handler.runtime.runPromise(Administration.createApiUser({ clientId: client.id, permissions: ["View custody account", "Initiate new custody account"] }))
  return { "x-api-key": issued.keyId, "x-api-secret": Redacted.value(issued.secret) }
}
const make = (options: { readonly basePath?: string; readonly cors?: CorsOptions }): RelayHandler => {
  const handler = makeHandler({ logLevel: "Warn", ...options })
  handlers.push(handler)
  return handler
}
afterAll(async () => {
  for (const handler of handlers) await handler.dispose()
})

describe("base path", () => {
  const handler = make({ basePath: "/custody/" })
  let headers: Record<string, string> = {}
  beforeAll(async () => {
    headers = await credentialsFor(handler)
  })
  const call = (path: string, init: RequestInit = {}) => handler(new Request(`http://relay.local${path}`, { ...init, headers: { ...headers, ...(init.headers as Record<string, string>) } }))

  it("GEN-PATH-1: serves /custody/relay/v1/...; the bare /relay/v1 and other paths are 404", async () => {
    assert.strictEqual((await call("/custody/relay/v1/accounts")).status, 200)
    const created = await call("/custody/relay/v1/accounts", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: "Desk", workspace: "custody", assetId: "BTC" }) })
    assert.strictEqual(created.status, 201)
    for (const path of ["/relay/v1/accounts", "/custodyx/relay/v1/accounts", "/other/relay/v1/accounts"]) {
      const answer = await call(path)
      assert.strictEqual(answer.status, 404, path)
      assert.strictEqual(((await answer.json()) as { code: string }).code, "ROUTE_NOT_FOUND")
    }
  })

  it("the OpenAPI document lives under the base path and names it as its server", async () => {
    const document = (await (await call("/custody/relay/v1/openapi.json")).json()) as { servers: ReadonlyArray<{ url: string }> }
    assert.deepStrictEqual(document.servers, [{ url: "/custody" }])
  })

  it("refuses a base path that is not plain path segments", () => {
    assert.throws(() => make({ basePath: "/a b" }), /basePath/)
    assert.throws(() => make({ basePath: "/a?b" }), /basePath/)
  })

  it("GEN-PATH-1: any number of trailing slashes, or none, or a missing leading one, names the same base path", () => {
    for (const spelling of ["/custody", "custody", "/custody/", "custody///", `/custody${"/".repeat(100_000)}`]) {
      assert.strictEqual(normalizeBasePath(spelling), "/custody", spelling.slice(0, 12))
    }
    for (const none of [undefined, "", "/", "///"]) assert.strictEqual(normalizeBasePath(none), "")
    assert.strictEqual(normalizeBasePath("/a/b/"), "/a/b")
  })
})

describe("CORS", () => {
  const origin = "https://ops.example.com"
  const handler = make({ cors: { origins: [origin], maxAgeSeconds: 120 } })
  const closed = make({})
  let headers: Record<string, string> = {}
  beforeAll(async () => {
    headers = await credentialsFor(handler)
  })
  const preflight = (target: RelayHandler, from: string) =>
    target(new Request("http://relay.local/relay/v1/accounts", { method: "OPTIONS", headers: { origin: from, "access-control-request-method": "POST", "access-control-request-headers": "x-api-key, x-api-secret, content-type, idempotency-key" } }))

  it("answers a listed origin's preflight with 204, the methods and headers it may send, and a max age", async () => {
    const answer = await preflight(handler, origin)
    assert.strictEqual(answer.status, 204)
    assert.strictEqual(answer.headers.get("access-control-allow-origin"), origin)
    assert.strictEqual(answer.headers.get("access-control-allow-methods"), "GET, HEAD, POST")
    for (const name of ["x-api-key", "x-api-secret", "content-type", "idempotency-key"]) assert.include(answer.headers.get("access-control-allow-headers"), name)
    assert.strictEqual(answer.headers.get("access-control-max-age"), "120")
    assert.strictEqual(await answer.text(), "")
  })

  it("AUTH-HDR-1: a listed origin's real request still needs credentials, and may read the rate-limit headers", async () => {
    const anonymous = await handler(new Request("http://relay.local/relay/v1/accounts", { headers: { origin } }))
    assert.strictEqual(anonymous.status, 401)
    assert.strictEqual(anonymous.headers.get("access-control-allow-origin"), origin)
    const answer = await handler(new Request("http://relay.local/relay/v1/accounts", { headers: { ...headers, origin } }))
    assert.strictEqual(answer.status, 200)
    assert.strictEqual(answer.headers.get("access-control-allow-origin"), origin)
    for (const name of ["x-ratelimit-remaining", "idempotent-replayed", "x-request-id", "retry-after"]) assert.include(answer.headers.get("access-control-expose-headers"), name)
    assert.strictEqual(answer.headers.get("vary"), "origin")
  })

  it("gives an origin that is not listed no CORS header: its preflight is refused as today (405) and its answers are not readable", async () => {
    const answer = await preflight(handler, "https://evil.example")
    assert.strictEqual(answer.status, 405)
    assert.isNull(answer.headers.get("access-control-allow-origin"))
    const read = await handler(new Request("http://relay.local/relay/v1/accounts", { headers: { ...headers, origin: "https://evil.example" } }))
    assert.isNull(read.headers.get("access-control-allow-origin"))
  })

  it("is off by default: no CORS header for any origin, OPTIONS is 405", async () => {
    const answer = await preflight(closed, origin)
    assert.strictEqual(answer.status, 405)
    assert.isNull(answer.headers.get("access-control-allow-origin"))
  })

  it("works through the node adapter too: the preflight's 204 has no body", async () => {
    const server: Server = createServer(toNodeListener(handler))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/relay/v1/accounts`
      const answer = await fetch(url, { method: "OPTIONS", headers: { origin, "access-control-request-method": "GET" } })
      assert.strictEqual(answer.status, 204)
      assert.strictEqual(answer.headers.get("access-control-allow-origin"), origin)
      const star = make({ cors: { origins: "*" } })
      const any = await star(new Request("http://relay.local/relay/v1/accounts", { headers: { origin: "https://anyone.example" } }))
      assert.strictEqual(any.headers.get("access-control-allow-origin"), "*")
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })
})
