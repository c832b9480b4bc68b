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
      expect(operation["operationId"]).toBe(route.operation)
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
})
