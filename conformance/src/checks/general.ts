/**
 * General checks: JSON bodies (GEN-JSON-1), the version prefix (GEN-PATH-1), fuzzed input never answered with a
 * 5xx (GEN-5XX-1) and the self-consistency of error bodies (ERR-BODY-1).
 */
import fc from "fast-check"
import { defineCheck } from "../Check.js"
import { endpointPath, endpoints } from "../Endpoints.js"
import { atPointer } from "../Profile.js"
import { isRecord } from "../Shape.js"
import { randomUuid } from "./records.js"

const postEndpoints = endpoints.filter((e) => e.method === "POST")

export const jsonBodies = defineCheck({
  id: "gen.json.malformed-body",
  title: "A body that is not JSON, or not a JSON object, is 400; answers are JSON",
  requirements: ["GEN-JSON-1", "ERR-CODE-1"],
  tags: ["general", "validation"],
  needs: [],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const bodies = ["{not json", "[]", '"text"', "42", "null", "{\"name\": "]
    for (const e of postEndpoints) {
      for (const body of bodies) {
        const result = await tenant.client.raw("POST", endpointPath(e), body)
        context.expectStatus(result, 400, ["GEN-JSON-1", "ERR-CODE-1"], `POST ${e.path} with body ${body}`)
      }
    }
    const list = await tenant.client.listAccounts()
    context.expect((list.headers.get("content-type") ?? "").includes("application/json"), "GEN-JSON-1", "a JSON answer should carry Content-Type application/json", list)
    context.expect(list.json !== undefined, "GEN-JSON-1", "the answer body is not JSON", list)
    const error = await tenant.client.raw("POST", endpointPath(postEndpoints[0] ?? endpoints[0]!), "{")
    context.expect(error.json !== undefined, "GEN-JSON-1", "an error answer body is not JSON", error)
  }
})

export const pathPrefix = defineCheck({
  id: "gen.path.prefix",
  title: "Endpoints live under /relay/v1 only",
  requirements: ["GEN-PATH-1"],
  tags: ["general"],
  needs: [],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const ok = await tenant.client.raw("GET", "/relay/v1/accounts")
    context.expectStatus(ok, 200, "GEN-PATH-1", "GET /relay/v1/accounts")
    for (const path of ["/relay/v2/accounts", "/relay/accounts", "/accounts", "/v1/accounts", "/relay/v1/accountz"]) {
      const result = await context.transport.send("GET", path, { headers: { "x-api-key": tenant.credential.keyId, "x-api-secret": tenant.credential.secret } })
      context.expect(result.status >= 400 && result.status < 500, "GEN-PATH-1", `GET ${path} outside the version prefix should be a 4xx (404), got ${result.status}`, result)
    }
  }
})

const fuzzValue = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.constantFrom(-1, 0, 1e308, -1e308, 1.5, "", " ", "0", "1e999", "NaN", "-0", "💥".repeat(20), "\u0000", "'; DROP TABLE accounts; --")
)
const fieldNames = ["name", "workspace", "assetId", "description", "role", "accountId", "sourceAccountId", "destinationId", "destinationType", "amount", "assetType", "address"]

export const fuzzNo5xx = defineCheck({
  id: "gen.fuzz.no-5xx",
  title: "Fuzzed bodies, query strings and ids never get a 5xx",
  requirements: ["GEN-5XX-1", "ERR-CODE-1"],
  tags: ["general", "fuzz", "property"],
  needs: [],
  async run(context) {
    const body = (source: string) =>
      fc.oneof(
        fc.dictionary(fc.constantFrom(...fieldNames), fuzzValue, { maxKeys: 6 }),
        fc.record({ sourceAccountId: fc.constant(source), destinationId: fc.oneof(fc.constant(source), fc.uuid()), destinationType: fuzzValue, amount: fuzzValue, assetType: fuzzValue }),
        fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)),
        fc.string({ unit: "binary", maxLength: 60 })
      )
    const query = fc.dictionary(fc.constantFrom("page", "limit", "status", "assetId", "assetType", "workspace", "role", "search", "accountId"), fc.string({ unit: "grapheme", maxLength: 12 }), { maxKeys: 4 })
    // The generated body may name the run's own account, so the placeholder is swapped in per run.
    const placeholder = "00000000-0000-4000-8000-00000000f022"
    await context.property(
      ["GEN-5XX-1"],
      [fc.constantFrom(...endpoints), body(placeholder), query, fc.string({ unit: "grapheme", minLength: 1, maxLength: 20 })],
      async (e, payload, params, id) => {
        // A fresh tenant with one account per run: runs never see each other's data.
        const tenant = await context.fixtures.tenant()
        const account = await context.fixtures.pendingAccount(tenant)
        const path = endpointPath(e, id.replace(/[/?#%.]/g, "x")) + (e.method === "GET" ? "?" + new URLSearchParams(params).toString() : "")
        const sent = typeof payload === "string" ? payload : JSON.stringify(payload).replaceAll(placeholder, account.id)
        const result = await tenant.client.raw(e.method, path, e.method === "POST" ? sent : undefined)
        context.expect(result.status < 500, "GEN-5XX-1", `${e.method} ${e.path} answered ${result.status} to client input`, result)
      },
      { numRuns: context.settings.numRuns * 4 }
    )
  }
})

export const errorBodies = defineCheck({
  id: "err.body.consistent",
  title: "Error bodies other than the permission 403 are JSON objects of one shape, whatever shape the implementation chose",
  requirements: ["ERR-BODY-1", "ERR-CODE-1"],
  tags: ["errors"],
  needs: [],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const samples = [
      await tenant.client.createAccount({ name: "x" }),
      await tenant.client.raw("POST", "/relay/v1/accounts", "{"),
      await tenant.client.getAccount(randomUuid()),
      await tenant.client.getAccount("not-a-uuid"),
      await tenant.client.listAccounts({ page: "0" }),
      await tenant.client.getWhitelist(randomUuid()),
      await tenant.client.listTransactions({ status: "nope" }),
      await tenant.client.withCredential({ keyId: tenant.credential.keyId, secret: "wrong" }).listAccounts()
    ]
    const expected = [400, 400, 404, 400, 400, 404, 400, 401]
    const bodies: Array<[Record<string, unknown>, (typeof samples)[number]]> = []
    for (const [index, result] of samples.entries()) {
      context.expectStatus(result, expected[index] ?? 400, "ERR-CODE-1", `error sample ${index}`)
      context.expect(isRecord(result.json), "ERR-BODY-1", "an error body should be a JSON object", result)
      const body = result.json as Record<string, unknown>
      bodies.push([body, result])
      const pointer = context.profile.errorMessagePointer
      if (typeof pointer === "string") {
        const message = atPointer(body, pointer)
        context.expect(typeof message === "string" && message.length > 0, "ERR-BODY-1", `the profile declares the error message at ${pointer || "(the whole body)"}; this body has ${JSON.stringify(message) ?? "nothing"} there`, result)
      }
    }
    // One shape: every field that most error bodies carry (the profile's error body) appears, with the same JSON
    // type, in every error body; detail fields that only some errors carry are allowed.
    const counts = new Map<string, number>()
    for (const [body] of bodies) for (const key of Object.keys(body)) counts.set(key, (counts.get(key) ?? 0) + 1)
    const core = [...counts.entries()].filter(([, count]) => count * 2 > bodies.length).map(([key]) => key)
    for (const key of core) {
      const typed = bodies.find(([body]) => key in body)
      for (const [body, result] of bodies) {
        context.expect(
          key in body && typeof body[key] === typeof typed?.[0][key],
          "ERR-BODY-1",
          `error bodies differ in shape: most carry {${core.join(", ")}}, this one lacks ${key} or gives it another type`,
          result,
          ...(typed === undefined ? [] : [typed[1]])
        )
      }
    }
  }
})

export const generalChecks = [jsonBodies, pathPrefix, fuzzNo5xx, errorBodies]
