/**
 * Building blocks of the fault variants: each fault wraps a correct handler (any implementation's, in process) and
 * bends one behaviour, so the implementation's code is never touched. A wrapper may call the control protocol on
 * the same handler. The kit's own tests prove with them that every MUST requirement has a fault that fails a run.
 */
import type { Handler } from "../Transport.js"

export interface FaultContext {
  readonly token: string
}

export interface Fault {
  readonly name: string
  /** The requirement id the kit must report the fault under. */
  readonly requirement: string
  /** Checks to run (default: every check that covers `requirement`). */
  readonly checks?: ReadonlyArray<string>
  /** "fake": the fault lives in the spec-written fake (it ignores the handler); otherwise it wraps any handler. */
  readonly target?: "fake"
  readonly wrap: (handler: Handler, context: FaultContext) => Handler
}

export const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/** A copy of the request with another JSON body. */
export const withBody = (request: Request, body: unknown): Request =>
  new Request(request.url, { method: request.method, headers: request.headers, body: JSON.stringify(body) })

export const readJsonBody = async (request: Request): Promise<{ request: Request; body: unknown }> => {
  const text = await request.text()
  let body: unknown
  try {
    body = JSON.parse(text) as unknown
  } catch {
    body = undefined
  }
  return { request: new Request(request.url, { method: request.method, headers: request.headers, body: text.length > 0 ? text : null }), body }
}

/** A response with its JSON body rewritten (status and headers kept unless given). */
export const rewrite = async (response: Response, change: (body: unknown) => unknown, status = response.status): Promise<Response> => {
  const text = await response.text()
  let body: unknown
  try {
    body = JSON.parse(text) as unknown
  } catch {
    return new Response(text, { status, headers: response.headers })
  }
  const headers = new Headers(response.headers)
  headers.delete("content-length")
  return new Response(JSON.stringify(change(body)), { status, headers })
}

export const pathOf = (request: Request): string => new URL(request.url).pathname

/** The request asked again at another URL (its path or query bent), with its method and headers; no body. */
export const askAt = (handler: Handler, request: Request, url: URL): Promise<Response> =>
  handler(new Request(url, { method: request.method, headers: request.headers }))

/** Calls the control protocol on the same handler. */
export const control = (handler: Handler, token: string, method: string, path: string, body?: unknown): Promise<Response> =>
  handler(
    new Request(`http://fault.invalid/__control${path}`, {
      method,
      headers: { "x-control-token": token, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
  )

export const precisionOf = async (handler: Handler, token: string): Promise<Map<string, number>> => {
  const response = await control(handler, token, "GET", "/profile")
  const profile = (await response.json()) as { assets: Array<{ assetId: string; precision: number }> }
  return new Map(profile.assets.map((asset) => [asset.assetId, asset.precision]))
}
