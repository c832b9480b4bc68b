/**
 * Where the relay is mounted and who may call it from a browser: a base path in front of `/relay/v1` (so the API
 * can live at `/custody/relay/v1` beside an app's own routes), and CORS, off unless origins are listed. A browser
 * on a listed origin gets its preflight answered (204) and may read the answers' rate-limit, replay and request-id
 * headers; any other origin gets no CORS header at all, so the browser keeps the answer from it. CORS changes
 * nothing for callers outside a browser: credentials are still required on every call.
 */
import type { Incoming } from "./Incoming.js"
import type { Reply } from "./Reply.js"

export interface CorsOptions {
  /** Origins allowed to call from a browser, exactly as the browser sends them (`https://ops.example.com`), or "*". */
  readonly origins: ReadonlyArray<string> | "*"
  /** How long a browser may cache a preflight answer; 600 s by default. */
  readonly maxAgeSeconds?: number
}

/** What a browser may send beyond the simple headers, and read beyond the simple ones. */
const allowedHeaders = "content-type, idempotency-key, x-api-key, x-api-secret, x-request-id"
const exposedHeaders = "idempotent-replayed, retry-after, x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset, x-request-id"

export interface Mounting {
  /** The request as the router sees it (the base path taken off), or undefined when it lies outside the mount. */
  readonly inside: (request: Incoming) => Incoming | undefined
  /** The answer to a CORS preflight from an allowed origin, or undefined when the request is not one. */
  readonly preflight: (request: Incoming) => Reply | undefined
  /** A finished reply with the CORS headers its origin is allowed, if any. */
  readonly finish: (request: Incoming, reply: Reply) => Reply
  readonly basePath: string
}

/** `path` without its trailing slashes: a loop, because `/\/+$/` retries from every slash, quadratic on a run of them. */
const withoutTrailingSlashes = (path: string): string => {
  let end = path.length
  while (end > 0 && path[end - 1] === "/") end--
  return path.slice(0, end)
}

/** "/custody/" and "custody" both mean "/custody"; "" and "/" mean no base path. */
export const normalizeBasePath = (basePath: string | undefined): string => {
  const trimmed = withoutTrailingSlashes(basePath ?? "")
  if (trimmed === "") return ""
  const path = trimmed.startsWith("/") ? trimmed : `/${trimmed}`
  if (!/^(\/[A-Za-z0-9._~-]+)+$/.test(path)) throw new Error(`basePath ${JSON.stringify(basePath)} must be path segments of letters, digits and ._~-`)
  return path
}

export const make = (options: { readonly basePath?: string; readonly cors?: CorsOptions }): Mounting => {
  const basePath = normalizeBasePath(options.basePath)
  const cors = options.cors
  const allowOrigin = (origin: string | null): string | undefined => {
    if (cors === undefined || origin === null) return undefined
    if (cors.origins === "*") return "*"
    return cors.origins.includes(origin) ? origin : undefined
  }
  return {
    basePath,
    inside: (request) => {
      if (basePath === "") return request
      const { pathname } = request
      if (pathname !== basePath && !pathname.startsWith(`${basePath}/`)) return undefined
      return { ...request, pathname: pathname.slice(basePath.length) || "/" }
    },
    preflight: (request) => {
      if (request.method !== "OPTIONS" || request.header("access-control-request-method") === null) return undefined
      const origin = allowOrigin(request.header("origin"))
      if (origin === undefined) return undefined
      return {
        status: 204,
        body: "",
        headers: {
          "access-control-allow-origin": origin,
          "access-control-allow-methods": "GET, HEAD, POST",
          "access-control-allow-headers": allowedHeaders,
          "access-control-max-age": String(cors?.maxAgeSeconds ?? 600),
          vary: "origin"
        }
      }
    },
    finish: (request, reply) => {
      if (cors === undefined) return reply
      const origin = allowOrigin(request.header("origin"))
      // Vary on Origin whenever CORS is on, so a cache never hands one origin's answer to another.
      if (origin === undefined) return { ...reply, headers: { ...reply.headers, vary: "origin" } }
      return {
        ...reply,
        headers: { ...reply.headers, "access-control-allow-origin": origin, "access-control-expose-headers": exposedHeaders, vary: "origin" }
      }
    }
  }
}
