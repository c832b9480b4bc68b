/**
 * The OpenAPI document is generated from the route table and the core's Schemas, served at
 * GET /relay/v1/openapi.json, and valid OpenAPI 3.1 under a real validator.
 */
import { Permission } from "@custody-relay/core"
import { Validator } from "@seriousme/openapi-schema-validator"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Routes } from "../src/index.js"
import { type Fixture, makeFixture, record } from "./RelayFixture.js"

let fixture: Fixture
beforeAll(() => {
  fixture = makeFixture()
})
afterAll(() => fixture.dispose())

describe("OpenAPI document", () => {
  it("GEN-PATH-1: is served without credentials and validates as OpenAPI 3.1", async () => {
    const answer = await fixture.send("GET", "/relay/v1/openapi.json")
    expect(answer.status).toBe(200)
    const document = record(answer.body)
    expect(document["openapi"]).toBe("3.1.0")
    const validator = new Validator()
    const result = await validator.validate(document)
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
    expect(validator.version).toBe("3.1")
  })

  it("AUTH-PERM-1: lists every route with its permission, request and response schemas", async () => {
    const document = record((await fixture.send("GET", "/relay/v1/openapi.json")).body)
    const paths = record(document["paths"])
    for (const route of Routes.routes) {
      const operation = record(record(paths[route.path])[route.method.toLowerCase()])
      expect(String(operation["operationId"]).startsWith(route.operation)).toBe(true)
      expect(String(operation["description"])).toContain(Permission.requiredPermission[route.operation])
      expect(Object.keys(record(operation["responses"]))).toContain(String(route.successStatus))
      if (route.body !== undefined) expect(operation["requestBody"]).toBeDefined()
      if (route.extension) expect(operation["x-extension"]).toBe(true)
    }
    const schemas = record(record(document["components"])["schemas"])
    const createBody = record(schemas["AccountsCreateBody"])
    expect(record(createBody["properties"])["workspace"]).toMatchObject({ enum: ["custody", "transactional"] })
    expect(createBody["required"]).toEqual(expect.arrayContaining(["name", "workspace", "assetId"]))
    const fee = record(record(schemas["TransactionsCalculateFeeResponse"])["properties"])
    expect(record(fee["estimatedFee"])["type"]).toBe("number")
  })

  it("is strict-reader friendly: unique operation ids, declared tags, plain length limits, no safe-integer bounds, closed answers", async () => {
    const document = record((await fixture.send("GET", "/relay/v1/openapi.json")).body)
    const operations = Object.values(record(document["paths"])).flatMap((byMethod) => Object.values(record(byMethod)).map(record))
    const ids = operations.map((operation) => operation["operationId"])
    expect(new Set(ids).size).toBe(ids.length)
    const declared = (document["tags"] as ReadonlyArray<{ name: string; description: string }>).map((tag) => tag.name)
    for (const operation of operations) for (const tag of operation["tags"] as ReadonlyArray<string>) expect(declared).toContain(tag)
    expect(record(document["info"])["license"]).toEqual({ name: "Apache-2.0", identifier: "Apache-2.0" })
    const text = JSON.stringify(document)
    expect(text).not.toContain('"allOf"')
    expect(text).not.toContain("9007199254740991")
    const schemas = record(record(document["components"])["schemas"])
    expect(record(record(record(schemas["AccountsCreateBody"])["properties"])["name"])).toEqual({ type: "string", minLength: 3, maxLength: 50 })
    // Request bodies say they ignore unknown fields (as the decoder does); answers are closed, so generated types are exact.
    expect(record(schemas["AccountsCreateBody"])["additionalProperties"]).toBe(true)
    expect(record(schemas["AccountsGetResponse"])["additionalProperties"]).toBe(false)
    // Request bodies carry an example from the demo, which a reference page offers to send as it is.
    for (const body of ["AccountsCreateBody", "TransactionsInitiateBody", "WhitelistedAddressesCreateBody"]) expect(record(schemas[body])["examples"]).toHaveLength(1)
  })

  it("AUTH-PERM-1 AUTH-SCOPE-1: one 403 schema that a strict validator accepts for both real 403 bodies", async () => {
    const document = record((await fixture.send("GET", "/relay/v1/openapi.json")).body)
    const forbidden = record(record(record(record(record(record(record(document["paths"])["/relay/v1/accounts"])["get"])["responses"])["403"])["content"])["application/json"])["schema"]
    expect(forbidden).toEqual({ $ref: "#/components/schemas/ForbiddenBody" })
    const schema = record(record(record(document["components"])["schemas"])["ForbiddenBody"])
    const validator = new Validator()
    // The two bodies a 403 really has, taken from the relay itself, validated against the document's schema.
    const lacking = await fixture.createUser(await fixture.createClient(), ["View custody transaction list"])
    const unscoped = await fixture.createUser(null, ["View custody account"])
    const bodies = [(await fixture.as(lacking).get("/relay/v1/accounts")).body, (await fixture.as(unscoped).get("/relay/v1/accounts")).body]
    expect(bodies[0]).toEqual({ message: "Missing required API scope: View custody account" })
    expect(record(bodies[1])["code"]).toBe("CREDENTIAL_NOT_CLIENT_SCOPED")
    expect(await validator.validate(document)).toMatchObject({ valid: true })
    for (const body of bodies) expect(matches(schema, body), JSON.stringify(body)).toBe(true)
  })
})

/** A small structural check of a body against a closed object schema of string properties (enough for ForbiddenBody). */
const matches = (schema: Readonly<Record<string, unknown>>, body: unknown): boolean => {
  if (typeof body !== "object" || body === null) return false
  const properties = record(schema["properties"])
  const required = (schema["required"] ?? []) as ReadonlyArray<string>
  const value = body as Record<string, unknown>
  if (!required.every((key) => key in value)) return false
  return Object.entries(value).every(([key, field]) => {
    const property = properties[key] as { type?: string; enum?: ReadonlyArray<string> } | undefined
    if (property === undefined) return schema["additionalProperties"] !== false
    return typeof field === property.type && (property.enum === undefined || property.enum.includes(String(field)))
  })
}
