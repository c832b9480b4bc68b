/**
 * The node:http adapter. A relay handler (from makeHandler) is served directly: node's IncomingMessage is read
 * as the pipeline's `Incoming` and the finished reply is written to the ServerResponse in one write, with no
 * `Request`, `Response` or web stream in between; replies finished in one turn of the event loop are written
 * together at its end, after its first (TurnEndWrites.ts). Any other fetch handler (one wrapped in middleware,
 * say) goes through the generic translation: IncomingMessage -> Request -> handler -> Response -> ServerResponse.
 * Either way the body is read through the handler's size limit, so a too-large body is refused early (413), and
 * the request URL is resolved on a fixed origin: the Host header is the caller's and never trusted.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { Readable } from "node:stream"
import { type RelayHandler, serveIncoming } from "./Handler.js"
import { PayloadTooLarge } from "./HttpError.js"
import { concat, type Incoming, ORIGIN, splitTarget } from "./Incoming.js"
import type { Reply } from "./Reply.js"
import { turnEndWrites } from "./TurnEndWrites.js"

export type FetchHandler = (request: Request) => Promise<Response>

/**
 * For adapters of other servers (and the hot-path benchmark): a relay handler's pipeline on a request in its own
 * terms, skipping the Web `Request` and `Response` (see Handler.ts). `fromIncomingMessage` below makes one from node.
 */
export { serveIncoming } from "./Handler.js"
export type { Incoming } from "./Incoming.js"
export type { Reply } from "./Reply.js"

const MALFORMED = JSON.stringify({ message: "malformed HTTP request", code: "MALFORMED_REQUEST" })
const UNEXPECTED = JSON.stringify({ message: "unexpected error", code: "INTERNAL_ERROR" })

const failWith = (outgoing: ServerResponse, status: number, body: string): void => {
  if (!outgoing.headersSent) outgoing.writeHead(status, { "content-type": "application/json; charset=utf-8" })
  outgoing.end(body)
}

/** Reads at most `limitBytes` of the body; past that the rest is drained unread and the answer is 413. */
const readBody = (incoming: IncomingMessage, limitBytes: number): Promise<Uint8Array | PayloadTooLarge> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    let total = 0
    const finish = () => {
      incoming.off("data", onData)
      incoming.off("end", onEnd)
      incoming.off("error", onError)
      incoming.off("close", onClose)
    }
    const onData = (chunk: Buffer) => {
      total += chunk.byteLength
      if (total > limitBytes) {
        finish()
        incoming.resume()
        resolve(new PayloadTooLarge({ limitBytes }))
      } else {
        chunks.push(chunk)
      }
    }
    const onEnd = () => {
      finish()
      resolve(concat(chunks, total))
    }
    const onError = (error: Error) => {
      finish()
      reject(error)
    }
    const onClose = () => {
      finish()
      reject(new Error("the request was aborted before its body ended"))
    }
    incoming.on("data", onData).on("end", onEnd).on("error", onError).on("close", onClose)
  })

/** node's request as the relay pipeline reads it. */
export const fromIncomingMessage = (incoming: IncomingMessage): Incoming => {
  const method = incoming.method ?? "GET"
  const { pathname, query } = splitTarget(incoming.url ?? "/")
  return {
    method,
    pathname,
    query,
    header: (name) => {
      const value = incoming.headers[name]
      return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value
    },
    body: (limitBytes) => (method === "GET" || method === "HEAD" ? null : readBody(incoming, limitBytes))
  }
}

/** How much of a refused body (413) is read and dropped, at most, before the connection is closed under it. */
const REFUSED_BODY_DRAIN_BYTES = 64 * 1024 * 1024
const REFUSED_BODY_DRAIN_MILLIS = 10_000

const writeReply = (reply: Reply, outgoing: ServerResponse, incoming: IncomingMessage): void => {
  const headers: Record<string, string> = { ...reply.headers, "content-length": String(Buffer.byteLength(reply.body, "utf8")) }
  if (reply.status !== 413 || incoming.readableEnded) {
    outgoing.writeHead(reply.status, headers)
    outgoing.end(reply.body, "utf8")
    return
  }
  // A body left unread must not be taken for the next request on the connection, so the connection closes; but a
  // client still sending its body when it closes sees a reset (EPIPE) instead of this answer. So the answer goes out
  // at once, and the connection is ended only once the client has sent the rest, which is read and dropped (up to
  // a bound in bytes and time, past which it is cut).
  headers["connection"] = "close"
  outgoing.writeHead(reply.status, headers)
  outgoing.write(reply.body, "utf8")
  let drained = 0
  const cut = setTimeout(() => incoming.destroy(), REFUSED_BODY_DRAIN_MILLIS)
  cut.unref()
  incoming.on("data", (chunk: Buffer) => {
    drained += chunk.byteLength
    if (drained > REFUSED_BODY_DRAIN_BYTES) incoming.destroy()
  })
  const done = () => {
    clearTimeout(cut)
    outgoing.end()
  }
  incoming.once("end", done)
  incoming.once("close", done)
  incoming.resume()
}

const relayListener = (serve: RelayHandler<unknown>[typeof serveIncoming]) => {
  const writes = turnEndWrites()
  return (incoming: IncomingMessage, outgoing: ServerResponse): void => {
    let reply: Reply | Promise<Reply>
    try {
      reply = serve(fromIncomingMessage(incoming))
    } catch {
      // Only a request target that cannot be resolved as a URL lands here.
      return failWith(outgoing, 400, MALFORMED)
    }
    if (reply instanceof Promise) {
      reply.then((done) => writeReply(done, outgoing, incoming), () => failWith(outgoing, 500, UNEXPECTED))
    } else {
      const ready = reply
      writes(() => writeReply(ready, outgoing, incoming))
    }
  }
}

const toRequest = (incoming: IncomingMessage): Request => {
  const headers = new Headers()
  const raw = incoming.rawHeaders
  for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i] ?? "", raw[i + 1] ?? "")
  const method = incoming.method ?? "GET"
  const hasBody = method !== "GET" && method !== "HEAD"
  return new Request(ORIGIN + (incoming.url ?? "/"), {
    method,
    headers,
    ...(hasBody ? { body: Readable.toWeb(incoming) as ReadableStream<Uint8Array>, duplex: "half" } : {})
  })
}

const writeResponse = async (response: Response, outgoing: ServerResponse): Promise<void> => {
  const headers: Record<string, string> = {}
  response.headers.forEach((value, name) => {
    headers[name] = value
  })
  const body = response.body === null ? undefined : Buffer.from(await response.arrayBuffer())
  if (body !== undefined) headers["content-length"] = String(body.byteLength)
  outgoing.writeHead(response.status, headers)
  outgoing.end(body)
}

const fetchListener = (handler: FetchHandler) => (incoming: IncomingMessage, outgoing: ServerResponse): void => {
  let request: Request
  try {
    request = toRequest(incoming)
  } catch {
    // Only a request line or header the WHATWG Request cannot represent lands here.
    return failWith(outgoing, 400, MALFORMED)
  }
  handler(request)
    .then((response) => writeResponse(response, outgoing))
    .catch(() => failWith(outgoing, 500, UNEXPECTED))
}

const isRelayHandler = (handler: FetchHandler): handler is RelayHandler<unknown> => serveIncoming in handler

/**
 * A `node:http` request listener serving `handler`: directly for a relay handler, by translation otherwise. Make it
 * once and mount that one: it keeps the replies of the turn (TurnEndWrites.ts).
 */
export const toNodeListener = (handler: FetchHandler) =>
  isRelayHandler(handler) ? relayListener(handler[serveIncoming]) : fetchListener(handler)

export interface Listening {
  readonly server: Server
  readonly url: string
  /**
   * Stops accepting connections, lets in-flight requests finish, then resolves. A kept-alive connection is served no
   * longer than the request it carries when close is called, and the next if one comes: that answer says
   * `Connection: close` and closes it.
   */
  readonly close: () => Promise<void>
}

/** While closing, how often connections that have become idle are closed: each kept-alive one ends this soon after its last answer. */
const CLOSE_IDLE_EVERY_MILLIS = 50

/**
 * How long a client has to send a whole request, headers and body, by default. A custody API's requests are small
 * (bodies of at most `maxBodyBytes`), so a request still arriving after this is a client holding a connection open by
 * sending slowly: node answers it 408 and closes the connection. Node's own default is 300 s.
 */
export const DEFAULT_REQUEST_TIMEOUT_MILLIS = 30_000

export interface ServeOptions {
  readonly port: number
  readonly host?: string
  /** How long a client has to send a whole request (DEFAULT_REQUEST_TIMEOUT_MILLIS); node answers 408 past it. */
  readonly requestTimeoutMillis?: number
}

/** Serves `handler` on `host:port` (port 0 picks a free one). */
export const serve = (handler: FetchHandler, options: ServeOptions): Promise<Listening> =>
  new Promise((resolve, reject) => {
    const requestTimeout = options.requestTimeoutMillis ?? DEFAULT_REQUEST_TIMEOUT_MILLIS
    const server = createServer({
      requestTimeout,
      // Headers are the first part of the request: within the same bound, and node's own 60 s at most.
      headersTimeout: Math.min(requestTimeout, 60_000),
      // How often node looks for requests past their bound (30 s by default, which would add up to 30 s to it).
      connectionsCheckingInterval: Math.max(100, Math.min(1_000, requestTimeout / 4))
    }, toNodeListener(handler))
    // Keep-alive sockets would hold close() open until they time out; idle ones are closed at shutdown.
    server.keepAliveTimeout = 5_000
    server.once("error", reject)
    server.listen(options.port, options.host ?? "127.0.0.1", () => {
      server.off("error", reject)
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : options.port
      const host = options.host ?? "127.0.0.1"
      resolve({
        server,
        url: `http://${host.includes(":") ? `[${host}]` : host}:${port}`,
        close: () =>
          new Promise<void>((done) => {
            // node goes on serving a kept-alive connection after close() for as long as its client sends on it: a
            // client that keeps one busy (back-to-back requests, a slow answer at the moment of close) would hold
            // the server open for ever. So every answer from now on closes its connection, and connections that
            // have finished their answers are closed as they go idle, not at their keep-alive timeout.
            server.prependListener("request", (_incoming: IncomingMessage, outgoing: ServerResponse) => {
              outgoing.shouldKeepAlive = false
            })
            const idle = setInterval(() => server.closeIdleConnections(), CLOSE_IDLE_EVERY_MILLIS)
            server.close(() => {
              clearInterval(idle)
              done()
            })
            server.closeIdleConnections()
          })
      })
    })
  })
