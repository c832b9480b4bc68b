/**
 * @custody-relay/http: the Custody Relay interface as a Web-standard handler, `(request: Request) =>
 * Promise<Response>`, built from the core's layers. Mount it in any runtime that speaks Request and Response
 * (Bun, Deno, Hono, workers) or in Node through `@custody-relay/http/node`.
 */
export { makeHandler, DEFAULT_MAX_BODY_BYTES, type HandlerOptions, type RelayHandler } from "./Handler.js"
export { type CorsOptions, normalizeBasePath } from "./Mounting.js"
export * as ErrorTable from "./ErrorTable.js"
export { errorTable, defectMapping, type ErrorMapping, type ErrorTag } from "./ErrorTable.js"
export * as HttpError from "./HttpError.js"
export * as OpenApi from "./OpenApi.js"
export * as Routes from "./Routes.js"
export * as Control from "./Control.js"
export type { RateLimitOptions } from "./RateLimitPolicies.js"
export { DEFAULT_POLICY as DEFAULT_RATE_LIMIT } from "./RateLimitPolicies.js"
export { DEFAULT_SLOW_READ_MILLIS } from "./RequestLine.js"
export { version, interfaceVersion } from "./version.js"
