/**
 * The node:http adapter is translation only: a real socket in, the same answers out, the body streamed through
 * the handler's size limit, and close() waiting for requests in flight.
 */
import { request as httpRequest } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Listening, serve } from "../src/node.js"
import { type Fixture, makeFixture, makeTenant, record, type Tenant } from "./RelayFixture.js"

let fixture: Fixture
let tenant: Tenant
let listening: Listening

beforeAll(async () => {
  fixture = makeFixture({ maxBodyBytes: 1024 })
  tenant = await makeTenant(fixture)
  listening = await serve(fixture.handler, { port: 0 })
})
afterAll(async () => {
  await listening.close()
  await fixture.dispose()
})

const auth = () => ({ "x-api-key": tenant.admin.keyId, "x-api-secret": tenant.admin.secret })

describe("node adapter", () => {
  it("GEN-JSON-1: serves the handler's answers, headers included", async () => {
    const answer = await fetch(`${listening.url}/relay/v1/accounts?limit=1`, { headers: auth() })
    expect(answer.status).toBe(200)
    expect(answer.headers.get("x-ratelimit-limit")).toBe("600")
    expect(record(await answer.json())["limit"]).toBe(1)
    const created = await fetch(`${listening.url}/relay/v1/accounts`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: JSON.stringify({ name: "Via node", workspace: "custody", assetId: "BTC" })
    })
    expect(created.status).toBe(201)
  })

  it("LIM-SIZE-1: a streamed body over the limit is 413 without a Content-Length", async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const url = new URL(`${listening.url}/relay/v1/accounts`)
      const req = httpRequest({
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: "POST",
        headers: { ...auth(), "content-type": "application/json", "transfer-encoding": "chunked" }
      }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on("error", reject)
      for (let i = 0; i < 8; i++) req.write("x".repeat(512))
      req.end()
    })
    expect(status).toBe(413)
  })

  it("ignores the Host header: a hostile one changes nothing", async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const url = new URL(`${listening.url}/relay/v1/openapi.json`)
      const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, headers: { host: "evil.example:99999" } }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on("error", reject)
      req.end()
    })
    expect(status).toBe(200)
  })

  it("close() lets a request in flight finish", async () => {
    const own = await serve(fixture.handler, { port: 0 })
    const inFlight = fetch(`${own.url}/relay/v1/accounts`, { headers: auth() })
    await new Promise((resolve) => setTimeout(resolve, 5))
    const closing = own.close()
    expect((await inFlight).status).toBe(200)
    await closing
  })
})
