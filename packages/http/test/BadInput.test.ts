/**
 * GEN-5XX-1: no client input, however malformed, reaches a 5xx. Invalid JSON, wrong types, wrong media types,
 * oversize bodies, prototype keys, huge numbers and awkward Unicode each get a 4xx with a JSON body; a property
 * test throws random JSON at every POST endpoint.
 */
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Fixture, makeFixture, makeTenant, record, type Tenant } from "./RelayFixture.js"

let fixture: Fixture
let tenant: Tenant

beforeAll(async () => {
  fixture = makeFixture({ maxBodyBytes: 16 * 1024 })
  tenant = await makeTenant(fixture)
})
afterAll(() => fixture.dispose())

const post = (path: string, body: string, headers: Record<string, string> = { "content-type": "application/json" }) =>
  fixture.send("POST", path, { headers: { "x-api-key": tenant.admin.keyId, "x-api-secret": tenant.admin.secret, ...headers }, body })

describe("malformed bodies", () => {
  it("GEN-JSON-1: invalid JSON is 400 MALFORMED_JSON", async () => {
    for (const body of ["{", "{\"name\":}", "nul", "{'a':1}", "\"unterminated"]) {
      const answer = await post("/relay/v1/accounts", body)
      expect(answer.status, body).toBe(400)
      expect(record(answer.body)["code"]).toBe("MALFORMED_JSON")
    }
  })

  it("GEN-JSON-1: JSON that is not an object (array, string, number, null) is 400 INVALID_REQUEST", async () => {
    for (const body of ["[]", "\"text\"", "42", "null", "true"]) {
      const answer = await post("/relay/v1/accounts", body)
      expect(answer.status, body).toBe(400)
      expect(record(answer.body)["code"]).toBe("INVALID_REQUEST")
    }
  })

  it("GEN-JSON-1: a missing body where one is required is 400", async () => {
    expect((await post("/relay/v1/accounts", "")).status).toBe(400)
  })

  it("GEN-JSON-1: a body sent as anything but application/json is 415; +json media types and charset are accepted", async () => {
    const body = JSON.stringify({ name: "Media", workspace: "custody", assetId: "BTC" })
    const text = await post("/relay/v1/accounts", body, { "content-type": "text/plain" })
    expect(text.status).toBe(415)
    expect(record(text.body)["code"]).toBe("UNSUPPORTED_MEDIA_TYPE")
    const untyped = await fixture.handler(new Request("http://relay.test/relay/v1/accounts", {
      method: "POST",
      headers: { "x-api-key": tenant.admin.keyId, "x-api-secret": tenant.admin.secret },
      body: new TextEncoder().encode(body)
    }))
    expect(untyped.status).toBe(415)
    expect((await post("/relay/v1/accounts", body, { "content-type": "application/json; charset=utf-8" })).status).toBe(201)
  })

  it("LIM-SIZE-1: a body over the size limit is 413, whether Content-Length says so or the stream shows it", async () => {
    const big = JSON.stringify({ name: "x".repeat(20_000), workspace: "custody", assetId: "BTC" })
    const declared = await post("/relay/v1/accounts", big)
    expect(declared.status).toBe(413)
    expect(record(declared.body)["code"]).toBe("PAYLOAD_TOO_LARGE")
    const chunks = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 40; i++) controller.enqueue(new TextEncoder().encode("x".repeat(1024)))
        controller.close()
      }
    })
    const streamed = await fixture.handler(new Request("http://relay.test/relay/v1/accounts", {
      method: "POST",
      headers: { "x-api-key": tenant.admin.keyId, "x-api-secret": tenant.admin.secret, "content-type": "application/json" },
      body: chunks,
      duplex: "half"
    } as RequestInit))
    expect(streamed.status).toBe(413)
  })

  it("GEN-5XX-1: invalid UTF-8 in a body is 400", async () => {
    const answer = await fixture.handler(new Request("http://relay.test/relay/v1/accounts", {
      method: "POST",
      headers: { "x-api-key": tenant.admin.keyId, "x-api-secret": tenant.admin.secret, "content-type": "application/json" },
      body: new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d])
    }))
    expect(answer.status).toBe(400)
  })
})

describe("hostile values", () => {
  it("GEN-5XX-1: __proto__ and constructor keys neither pollute nor crash", async () => {
    const body = "{\"__proto__\":{\"polluted\":true},\"constructor\":{\"prototype\":{\"x\":1}},\"name\":\"Proto\",\"workspace\":\"custody\",\"assetId\":\"BTC\"}"
    const answer = await post("/relay/v1/accounts", body)
    expect(answer.status).toBe(201)
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined()
    const nested = await post("/relay/v1/accounts", "{\"__proto__\":{\"name\":\"Injected\"},\"workspace\":\"custody\",\"assetId\":\"BTC\"}")
    expect(nested.status).toBe(400)
  })

  it("GEN-5XX-1 TXN-PREC-1: huge numbers and huge decimal strings are 400", async () => {
    const base = { sourceAccountId: tenant.source, destinationId: tenant.whitelisted, destinationType: "external", assetType: "BTC" }
    for (const amount of ["1e400", "1".repeat(5000), "9".repeat(60), "0." + "0".repeat(100) + "1", "NaN", "Infinity", "-0"]) {
      const answer = await post("/relay/v1/transactions/initiate", JSON.stringify({ ...base, amount }))
      expect(answer.status, amount.slice(0, 20)).toBeGreaterThanOrEqual(400)
      expect(answer.status).toBeLessThan(500)
    }
    const numeric = await post("/relay/v1/transactions/initiate", `{"sourceAccountId":"${tenant.source}","destinationId":"${tenant.whitelisted}","destinationType":"external","assetType":"BTC","amount":1e400}`)
    expect(numeric.status).toBe(400)
  })

  it("GEN-5XX-1 LIM-SIZE-1: Unicode edge cases: lone surrogates, control and bidirectional override characters are 400, a name of invisible characters is 400; emoji count as one character", async () => {
    const lone = await post("/relay/v1/accounts", "{\"name\":\"bad\\ud800name\",\"workspace\":\"custody\",\"assetId\":\"BTC\"}")
    expect(lone.status).toBe(400)
    const control = await post("/relay/v1/accounts", "{\"name\":\"nul\\u0000byte\",\"workspace\":\"custody\",\"assetId\":\"BTC\"}")
    expect(control.status).toBe(400)
    const emoji = await post("/relay/v1/accounts", JSON.stringify({ name: "🚀".repeat(50), workspace: "custody", assetId: "BTC" }))
    expect(emoji.status).toBe(201)
    const tooMany = await post("/relay/v1/accounts", JSON.stringify({ name: "🚀".repeat(51), workspace: "custody", assetId: "BTC" }))
    expect(tooMany.status).toBe(400)
    // Invisible and direction-changing characters: refused, or not counted as the name's visible character.
    for (const name of ["\u202eevil", "a\u2066b", "next\u0085line", "\u200b\u200b\u200b", " \u00a0\u2003", "\u0301", "\u200d"]) {
      const refused = await post("/relay/v1/accounts", JSON.stringify({ name, workspace: "custody", assetId: "BTC" }))
      expect(refused.status, JSON.stringify(name)).toBe(400)
    }
    for (const name of ["caf\u00e9 \u2014 Z\u00fcrich", "\u05e9\u05dc\u05d5\u05dd", "\ud83d\udc68\u200d\ud83d\udcbb desk", "e\u0301t\u00e9"]) {
      const accepted = await post("/relay/v1/accounts", JSON.stringify({ name, workspace: "custody", assetId: "BTC" }))
      expect(accepted.status, JSON.stringify(name)).toBe(201)
    }
  })

  it("GEN-5XX-1: odd paths and query strings are 4xx", async () => {
    const as = fixture.as(tenant.admin)
    for (const path of [
      "/relay/v1/accounts/%E0%A4%A",
      "/relay/v1/accounts/%00",
      "/relay/v1/accounts?page=%FF",
      "/relay/v1/accounts?search=%E0%A4%A",
      "/relay/v1/accounts?role=" + "custody,".repeat(200),
      "/relay/v1/transactions/..%2F..%2Fetc"
    ]) {
      const answer = await as.get(path)
      expect(answer.status, path).toBeLessThan(500)
    }
  })
})

describe("property: random JSON never produces a 5xx", () => {
  const paths = [
    "/relay/v1/accounts",
    "/relay/v1/accounts/approve",
    "/relay/v1/accounts/reject",
    "/relay/v1/transactions/calculate-fee",
    "/relay/v1/transactions/initiate",
    "/relay/v1/whitelisted-addresses"
  ]
  it("GEN-5XX-1: arbitrary JSON values and near-valid transfer bodies", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...paths), fc.jsonValue({ maxDepth: 3 }), async (path, value) => {
        const answer = await post(path, JSON.stringify(value))
        return answer.status >= 400 && answer.status < 500
      }),
      { numRuns: 150 }
    )
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          sourceAccountId: fc.oneof(fc.constant(tenant.source), fc.uuid(), fc.string()),
          destinationId: fc.oneof(fc.constant(tenant.whitelisted), fc.constant(tenant.destination), fc.uuid()),
          destinationType: fc.constantFrom("internal", "external", "INTERNAL", ""),
          amount: fc.oneof(fc.string(), fc.stringMatching(/^-?[0-9]{0,45}(\.[0-9]{0,40})?$/), fc.double().map(String)),
          assetType: fc.constantFrom("BTC", "ETH", "btc", "", "🚀")
        }, { requiredKeys: [] }),
        async (body) => {
          const answer = await post("/relay/v1/transactions/calculate-fee", JSON.stringify(body))
          return answer.status < 500
        }
      ),
      { numRuns: 150 }
    )
  })
})
