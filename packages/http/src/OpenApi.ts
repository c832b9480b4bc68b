/**
 * The OpenAPI 3.1 document of the relay, generated, never written by hand: paths, methods, parameters and
 * permissions come from the route table, and every request and response body from the core's Schemas (via
 * `Schema.toJsonSchemaDocument` and `JsonSchema.toMultiDocumentOpenApi3_1`). Served at GET /relay/v1/openapi.json.
 */
import { Permission } from "@custody-relay/core"
import { JsonSchema, Schema } from "effect"
import { errorTable } from "./ErrorTable.js"
import * as Idempotency from "./Idempotency.js"
import type { Route } from "./Routes.js"
import { version } from "./version.js"

export const PATH = "/relay/v1/openapi.json"

/** The error body of every refusal but the 403 for a missing permission (ERR-BODY-1, our profile). */
export const ErrorBody = Schema.Struct({
  message: Schema.String,
  code: Schema.Literals(Object.values(errorTable).map((m) => m.code)),
  requestId: Schema.String,
  details: Schema.optionalKey(
    Schema.Array(Schema.Struct({ path: Schema.Array(Schema.Union([Schema.String, Schema.Number])), message: Schema.String }))
  )
})

/** The 403 body for a missing permission, exactly as the interface writes it (AUTH-PERM-1). */
export const PermissionDeniedBody = Schema.Struct({ message: Schema.String })

type Json = Readonly<Record<string, unknown>>

const pascal = (operation: string): string =>
  operation.split(/[.\-_]/).map((part) => part.charAt(0).toUpperCase() + part.slice(1)).join("")

export const make = (routes: ReadonlyArray<Route>, options: { readonly basePath?: string } = {}): Json => {
  const components: Record<string, JsonSchema.JsonSchema> = {}
  const component = (name: string, schema: Schema.Top): Json => {
    const document = Schema.toJsonSchemaDocument(schema)
    const openApi = JsonSchema.toMultiDocumentOpenApi3_1({
      dialect: "draft-2020-12",
      schemas: [document.schema],
      definitions: document.definitions
    })
    Object.assign(components, openApi.definitions)
    components[name] = openApi.schemas[0]
    return { $ref: `#/components/schemas/${name}` }
  }
  const errorRef = component("ErrorBody", ErrorBody)
  const permissionDeniedRef = component("PermissionDeniedBody", PermissionDeniedBody)
  const errorResponse = (description: string) => ({ description, content: { "application/json": { schema: errorRef } } })

  const paths: Record<string, Record<string, Json>> = {}
  for (const route of routes) {
    const name = pascal(route.operation)
    const permission = Permission.requiredPermission[route.operation]
    const pathParameters = [...route.path.matchAll(/\{([^}]+)\}/g)].map((m) => ({
      name: m[1],
      in: "path",
      required: true,
      schema: { type: "string", format: "uuid" }
    }))
    const queryParameters = Object.entries(route.query).map(([queryName, parameter]) => ({
      name: queryName,
      in: "query",
      required: false,
      description: parameter.description,
      ...(parameter.multi
        ? { schema: { type: "array", items: parameter.schema }, style: "form", explode: true }
        : { schema: parameter.schema })
    }))
    const headerParameters = route.method === "POST"
      ? [{
        name: "Idempotency-Key",
        in: "header",
        required: false,
        description: "Makes a retry safe: the same key and body replay the first 2xx answer for 24 hours",
        schema: { type: "string", minLength: 1, maxLength: 255 }
      }]
      : []
    const responses: Record<string, Json> = {
      [String(route.successStatus)]: {
        description: route.successStatus === 201 ? "Created" : "OK",
        content: { "application/json": { schema: component(`${name}Response`, route.response) } }
      },
      "400": errorResponse("Invalid request: malformed JSON, a missing or invalid field or parameter"),
      "401": errorResponse("Missing, malformed or revoked credentials"),
      "403": {
        description: `Missing the permission "${permission}", or the credential is not client-scoped`,
        content: { "application/json": { schema: { oneOf: [permissionDeniedRef, errorRef] } } }
      },
      "404": errorResponse("Not found within the client's scope"),
      "429": errorResponse("Rate limit exceeded; see Retry-After"),
      "500": errorResponse("Unexpected server or custody-provider fault")
    }
    if (route.method === "POST") {
      responses["409"] = errorResponse("Conflict with the current state, a duplicate, or an Idempotency-Key conflict")
      responses["413"] = errorResponse("Request body too large")
      responses["415"] = errorResponse("Content-Type is not application/json")
    }
    const operation: Record<string, unknown> = {
      operationId: route.operation,
      summary: route.summary,
      description: [
        route.description,
        `Requires the permission "${permission}".`,
        route.extension ? "Extension: not part of the Custody Relay interface document." : undefined
      ].filter((line) => line !== undefined).join("\n\n"),
      tags: [route.path.split("/")[3] ?? "relay"],
      parameters: [...pathParameters, ...queryParameters, ...headerParameters],
      responses,
      ...(route.extension ? { "x-extension": true } : {})
    }
    if (route.body !== undefined) {
      operation["requestBody"] = {
        required: true,
        content: { "application/json": { schema: component(`${name}Body`, route.body) } }
      }
    }
    const byMethod = paths[route.path] ?? {}
    byMethod[route.method.toLowerCase()] = operation
    paths[route.path] = byMethod
  }

  return {
    openapi: "3.1.0",
    info: {
      title: "Custody Relay",
      version,
      description: "The Custody Relay interface v1. Every endpoint needs the headers x-api-key and x-api-secret. " +
        `POST endpoints accept an optional ${Idempotency.HEADER} header.`
    },
    servers: [{ url: options.basePath === undefined || options.basePath === "" ? "/" : options.basePath }],
    security: [{ apiKeyId: [], apiSecret: [] }],
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        apiKeyId: { type: "apiKey", in: "header", name: "x-api-key" },
        apiSecret: { type: "apiKey", in: "header", name: "x-api-secret" }
      }
    }
  }
}
