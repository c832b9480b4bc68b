/**
 * The node:http adapter: IncomingMessage -> Request -> handler -> Response -> ServerResponse, and nothing else.
 * The body is passed on as a stream, so the handler's size limit stops reading a too-large body early (413). The
 * request URL is built on a fixed origin: the Host header is the caller's and never trusted.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { Readable } from "node:stream"
import { knownBody } from "./Reply.js"

export type FetchHandler = (request: Request) => Promise<Response>

const ORIGIN = "http://relay.local"

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
  const known = knownBody(response)
  if (known !== undefined) {
    // A string body goes out in one write with the headers; a Buffer would take a second, vectored one.
    headers["content-length"] = String(Buffer.byteLength(known, "utf8"))
    outgoing.writeHead(response.status, headers)
    outgoing.end(known, "utf8")
    return
  }
  const body = response.body === null ? undefined : Buffer.from(await response.arrayBuffer())
  if (body !== undefined) headers["content-length"] = String(body.byteLength)
  outgoing.writeHead(response.status, headers)
  outgoing.end(body)
}

/** A `node:http` request listener serving `handler`. */
export const toNodeListener = (handler: FetchHandler) => (incoming: IncomingMessage, outgoing: ServerResponse): void => {
  let request: Request
  try {
    request = toRequest(incoming)
  } catch {
    // Only a request line or header the WHATWG Request cannot represent lands here.
    outgoing.writeHead(400, { "content-type": "application/json; charset=utf-8" })
    outgoing.end(JSON.stringify({ message: "malformed HTTP request", code: "MALFORMED_REQUEST" }))
    return
  }
  handler(request)
    .then((response) => writeResponse(response, outgoing))
    .catch(() => {
      if (!outgoing.headersSent) outgoing.writeHead(500, { "content-type": "application/json; charset=utf-8" })
      outgoing.end(JSON.stringify({ message: "unexpected error", code: "INTERNAL_ERROR" }))
    })
}

export interface Listening {
  readonly server: Server
  readonly url: string
  /** Stops accepting connections, lets in-flight requests finish, then resolves. */
  readonly close: () => Promise<void>
}

/** Serves `handler` on `host:port` (port 0 picks a free one). */
export const serve = (handler: FetchHandler, options: { readonly port: number; readonly host?: string }): Promise<Listening> =>
  new Promise((resolve, reject) => {
    const server = createServer(toNodeListener(handler))
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
            server.close(() => done())
            server.closeIdleConnections()
          })
      })
    })
  })
