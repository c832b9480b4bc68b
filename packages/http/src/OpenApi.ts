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

/**
 * Every 403 body: exactly `{message}` for a missing permission, as the interface writes it (AUTH-PERM-1), or the
 * error body (with `code` and `requestId`) for a credential that is not client-scoped. One schema that accepts
 * both, since the two cannot be told apart by a validator before reading them (a `oneOf` of both would match the
 * second twice).
 */
export const ForbiddenBody = Schema.Struct({
  message: Schema.String,
  code: Schema.optionalKey(Schema.Literals(["CREDENTIAL_NOT_CLIENT_SCOPED"])),
  requestId: Schema.optionalKey(Schema.String)
})

type Json = Readonly<Record<string, unknown>>
type Mutable = Record<string, unknown>

const isObject = (value: unknown): value is Mutable => typeof value === "object" && value !== null && !Array.isArray(value)

/** Keys an `allOf` branch may hold to be folded into its parent: plain constraints, nothing that composes. */
const foldable = new Set(["minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems", "format"])
const safeInteger = 9007199254740991

/**
 * What the Schema-to-JSON-Schema conversion writes and a strict reader stumbles on, made plain: constraint-only
 * `allOf` branches folded into their parent (a name is `{type: string, minLength: 3, maxLength: 50}`, not an
 * intersection), a union of one branch inlined, the safe-integer bounds of every `Int` dropped (they are JavaScript's, not the API's), and each
 * object closed (`additionalProperties: false`) or declared open, as it behaves.
 */
const tidy = (schema: unknown, objects: "closed" | "open"): void => {
  if (Array.isArray(schema)) return schema.forEach((item) => tidy(item, objects))
  if (!isObject(schema)) return
  const allOf = schema["allOf"]
  if (Array.isArray(allOf) && allOf.every((branch) => isObject(branch) && Object.keys(branch).every((key) => foldable.has(key)))) {
    for (const branch of allOf as ReadonlyArray<Mutable>) Object.assign(schema, branch)
    delete schema["allOf"]
  }
  for (const keyword of ["anyOf", "oneOf"]) {
    const branches = schema[keyword]
    // A union of one is that one (a literal union with a single member comes out this way).
    if (Array.isArray(branches) && branches.length === 1 && isObject(branches[0])) {
      delete schema[keyword]
      Object.assign(schema, branches[0])
    }
  }
  if (schema["type"] === "integer") {
    if (schema["minimum"] === -safeInteger) delete schema["minimum"]
    if (schema["maximum"] === safeInteger) delete schema["maximum"]
  }
  if (schema["type"] === "object" && isObject(schema["properties"])) schema["additionalProperties"] = objects === "open"
  for (const value of Object.values(schema)) tidy(value, objects)
}

/** The tag of each path's first segment after the version, with what it groups. */
const tagDescriptions: Readonly<Record<string, string>> = {
  accounts: "Custody accounts: one digital asset each, through approval to a deposit address",
  transactions: "Outgoing transactions: fee estimates, initiation, the quorum of approvers, status",
  "whitelisted-addresses": "External destinations of the client, through their approval workflow",
  events: "The audit trail: every state change of the client's records",
  webhooks: "Signed deliveries of the audit trail's events to the client's endpoints"
}

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
  const forbiddenRef = component("ForbiddenBody", ForbiddenBody)
  const requestBodies = new Set<string>()
  // Several routes share a permission operation (webhooks.manage): each gets an id and components of its own.
  const seen = new Map<string, number>()
  const operationIdOf = (route: Route): string => {
    const count = (seen.get(route.operation) ?? 0) + 1
    seen.set(route.operation, count)
    if (count === 1) return route.operation
    const tail = route.path.split("/").slice(3).filter((part) => !part.startsWith("{")).join("-")
    return `${route.operation}.${route.method.toLowerCase()}-${tail}${route.path.endsWith("}") ? "-by-id" : ""}`
  }
  const errorResponse = (description: string) => ({ description, content: { "application/json": { schema: errorRef } } })

  const paths: Record<string, Record<string, Json>> = {}
  for (const route of routes) {
    const operationId = operationIdOf(route)
    const name = pascal(operationId)
    const permission = Permission.requiredPermission[route.operation]
    const pathParameters = [...route.path.matchAll(/\{([^{}]+)\}/g)].map((m) => ({
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
        content: { "application/json": { schema: forbiddenRef } }
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
      operationId,
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
      requestBodies.add(`${name}Body`)
      operation["requestBody"] = {
        required: true,
        description: "A JSON object. Fields not listed are ignored; a listed field that is missing or invalid is 400.",
        content: { "application/json": { schema: component(`${name}Body`, route.body) } }
      }
    }
    const byMethod = paths[route.path] ?? {}
    byMethod[route.method.toLowerCase()] = operation
    paths[route.path] = byMethod
  }

  // Request bodies are open, as the decoder behaves (unknown fields ignored); everything the relay answers is closed.
  for (const [componentName, schema] of Object.entries(components)) tidy(schema, requestBodies.has(componentName) ? "open" : "closed")
  const tags = [...new Set(Object.values(paths).flatMap((byMethod) => Object.values(byMethod).flatMap((operation) => operation["tags"] as ReadonlyArray<string>)))]
  return {
    openapi: "3.1.0",
    info: {
      title: "Custody Relay",
      version,
      license: { name: "Apache-2.0", identifier: "Apache-2.0" },
      description: "The Custody Relay interface v1. Every endpoint needs the headers x-api-key and x-api-secret. " +
        `POST endpoints accept an optional ${Idempotency.HEADER} header.`
    },
    servers: [{ url: options.basePath === undefined || options.basePath === "" ? "/" : options.basePath }],
    security: [{ apiKeyId: [], apiSecret: [] }],
    tags: tags.map((tag) => ({ name: tag, description: tagDescriptions[tag] ?? tag })),
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
