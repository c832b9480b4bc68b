/**
 * A request as the relay's pipeline reads it: method, target (path and query), headers by lower-case name, and a
 * body read with a size limit. Made from a Web `Request` (`fromRequest`, the handler's public face) or straight
 * from node's `IncomingMessage` (node.ts), so the node adapter need not build a `Request` and its streams for
 * every call, a fifth of a short request's cost.
 */
import { PayloadTooLarge } from "./HttpError.js"

export interface Incoming {
  readonly method: string
  /** The path, as sent (dot segments resolved, as a URL would). */
  readonly pathname: string
  /** The query string without its `?`, as sent; empty when there is none. */
  readonly query: string
  /** A header's value by lower-case name; repeated headers joined with ", "; null when absent. */
  readonly header: (name: string) => string | null
  /** The body's bytes, at most `limitBytes` of them; null when the request carries no body. */
  readonly body: (limitBytes: number) => Promise<Uint8Array | PayloadTooLarge> | null
}

/** The base every request URL is resolved against: the Host header is the caller's and never trusted. */
export const ORIGIN = "http://relay.local"

// A path made only of these characters, with no empty or dot segment, is already what URL parsing would make of it.
const PLAIN_PATH = /^\/[A-Za-z0-9._~!$&'()*+,;=:@%-]*(?:\/[A-Za-z0-9._~!$&'()*+,;=:@%-]+)*\/?$/
const DOT_SEGMENT = /(?:^|\/)(?:\.|%2e){1,2}(?:\/|$)/i
// URL parsing drops tabs, newlines and surrounding spaces, and cuts a fragment: a query of only these needs none.
const PLAIN_QUERY = /^[\x21-\x22\x24-\x7e]*$/

// The absolute form of a request target (RFC 9112 3.2.2), which a server must accept: the scheme and authority
// are the caller's and dropped, as the Host header is.
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/

/** Splits a request target into path and query as `new URL(ORIGIN + target)` would, cheaply when it can. */
export const splitTarget = (requestTarget: string): { readonly pathname: string; readonly query: string } => {
  const target = requestTarget.startsWith("/") ? requestTarget : absolutePath(requestTarget)
  const mark = target.indexOf("?")
  const path = mark < 0 ? target : target.slice(0, mark)
  const query = mark < 0 ? "" : target.slice(mark + 1)
  if (PLAIN_PATH.test(path) && !DOT_SEGMENT.test(path) && PLAIN_QUERY.test(query)) return { pathname: path, query }
  const url = new URL(ORIGIN + target)
  return { pathname: url.pathname, query: url.search.slice(1) }
}

const absolutePath = (target: string): string => {
  const authority = ABSOLUTE_FORM.exec(target)
  if (authority === null) return target
  const rest = target.slice(authority[0].length)
  return rest.startsWith("/") ? rest : `/${rest}`
}

/** The query's parameters (URLSearchParams drops one leading "?", so it is given one to drop). */
export const searchParams = (request: Pick<Incoming, "query">): URLSearchParams => new URLSearchParams(`?${request.query}`)

const readStream = async (body: ReadableStream<Uint8Array>, limitBytes: number): Promise<Uint8Array | PayloadTooLarge> => {
  const reader = body.getReader()
  const chunks: Array<Uint8Array> = []
  let total = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    total += value.byteLength
    if (total > limitBytes) {
      await reader.cancel()
      return new PayloadTooLarge({ limitBytes })
    }
    chunks.push(value)
  }
  return concat(chunks, total)
}

export const concat = (chunks: ReadonlyArray<Uint8Array>, total: number): Uint8Array => {
  if (chunks.length === 1 && chunks[0] !== undefined) return chunks[0]
  const bytes = new Uint8Array(total)
  let offset = 0
  for (const chunk of chunks) {
    bytes.set(chunk, offset)
    offset += chunk.byteLength
  }
  return bytes
}

/** A Web `Request` as the pipeline reads it. */
export const fromRequest = (request: Request): Incoming => {
  const url = new URL(request.url)
  return {
    method: request.method,
    pathname: url.pathname,
    query: url.search.slice(1),
    header: (name) => request.headers.get(name),
    body: (limitBytes) => (request.body === null ? null : readStream(request.body, limitBytes))
  }
}
