/**
 * The node:http adapter is translation only: a real socket in, the same answers out, the body streamed through
 * the handler's size limit, and close() waiting for requests in flight.
 */
import { Agent, request as httpRequest, ServerResponse } from "node:http"
import { connect } from "node:net"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { ORIGIN, searchParams, splitTarget } from "../src/Incoming.js"
import { type Incoming, type Listening, serve, serveIncoming } from "../src/node.js"
import { type Fixture, makeFixture, makeTenant, record, type Tenant } from "./RelayFixture.js"
import { sendSlowly } from "./SlowClient.js"

let fixture: Fixture
let tenant: Tenant
let listening: Listening

beforeAll(async () => {
  fixture = makeFixture({ maxBodyBytes: 1024 })
  tenant = await makeTenant(fixture)
  listening = await serve(fixture.handler, { port: 0 })
})
afterAll(async () => {
  await listening.close()
  await fixture.dispose()
})

const auth = () => ({ "x-api-key": tenant.admin.keyId, "x-api-secret": tenant.admin.secret })

/** A raw connection to `server` on which GETs of `paths` are sent pipelined, in one write. */
const pipelinedGets = async (server: Listening, paths: ReadonlyArray<string>, headers: Readonly<Record<string, string>> = {}) => {
  const socket = connect(Number(new URL(server.url).port), "127.0.0.1")
  await new Promise((resolve) => socket.once("connect", resolve))
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("")
  socket.write(paths.map((path) => `GET ${path} HTTP/1.1\r\nHost: relay\r\n${lines}\r\n`).join(""))
  return socket
}

describe("node adapter", () => {
  it("GEN-JSON-1: serves the handler's answers, headers included", async () => {
    const answer = await fetch(`${listening.url}/relay/v1/accounts?limit=1`, { headers: auth() })
    expect(answer.status).toBe(200)
    expect(answer.headers.get("x-ratelimit-limit")).toBe("600")
    expect(record(await answer.json())["limit"]).toBe(1)
    const created = await fetch(`${listening.url}/relay/v1/accounts`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/json" },
      body: JSON.stringify({ name: "Via node", workspace: "custody", assetId: "BTC" })
    })
    expect(created.status).toBe(201)
  })

  it("serveIncoming, exported for other servers' adapters, answers as the Web face does", async () => {
    const path = `/relay/v1/accounts/${tenant.source}`
    const headers: Readonly<Record<string, string>> = auth()
    const incoming: Incoming = { method: "GET", pathname: path, query: "", header: (name) => headers[name] ?? null, body: () => null }
    const reply = await fixture.handler[serveIncoming](incoming)
    const response = await fixture.handler(new Request(`${ORIGIN}${path}`, { headers: auth() }))
    expect(reply.status).toBe(200)
    expect(JSON.parse(reply.body)).toEqual(await response.json())
    expect(reply.headers["x-ratelimit-limit"]).toBe(response.headers.get("x-ratelimit-limit"))
  })

  it("LIM-SIZE-1: a streamed body over the limit is 413 without a Content-Length", async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const url = new URL(`${listening.url}/relay/v1/accounts`)
      const req = httpRequest({
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: "POST",
        headers: { ...auth(), "content-type": "application/json", "transfer-encoding": "chunked" }
      }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on("error", reject)
      for (let i = 0; i < 8; i++) req.write("x".repeat(512))
      req.end()
    })
    expect(status).toBe(413)
  })

  it("LIM-SIZE-1: a 5 MB body is answered 413 that Node's fetch reads every time (the rest of the body is drained, not reset)", async () => {
    const body = "x".repeat(5 * 1024 * 1024)
    const statuses: Array<number | string> = []
    for (let i = 0; i < 10; i++) {
      statuses.push(await fetch(`${listening.url}/relay/v1/accounts`, {
        method: "POST",
        headers: { ...auth(), "content-type": "application/json" },
        body
      }).then((answer) => answer.status, (error: unknown) => String(error)))
    }
    expect(statuses).toEqual(Array.from({ length: 10 }, () => 413))
  })

  it("RFC 9110: HEAD works on every GET route (the GET's status and headers, no body); an absolute-form target is served", async () => {
    const head = await fetch(`${listening.url}/relay/v1/accounts/${tenant.source}`, { method: "HEAD", headers: auth() })
    expect(head.status).toBe(200)
    expect(await head.text()).toBe("")
    expect(Number(head.headers.get("content-length"))).toBeGreaterThan(0)
    const absolute = await new Promise<number>((resolve, reject) => {
      const url = new URL(listening.url)
      const req = httpRequest({ host: url.hostname, port: url.port, path: `http://example.test/relay/v1/accounts/${tenant.source}`, headers: auth() }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on("error", reject)
      req.end()
    })
    expect(absolute).toBe(200)
    expect(splitTarget("https://relay.example:8443/relay/v1/accounts?limit=1")).toEqual({ pathname: "/relay/v1/accounts", query: "limit=1" })
    expect(splitTarget("http://relay.example")).toEqual({ pathname: "/", query: "" })
  })

  it("ignores the Host header: a hostile one changes nothing", async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const url = new URL(`${listening.url}/relay/v1/openapi.json`)
      const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, headers: { host: "evil.example:99999" } }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on("error", reject)
      req.end()
    })
    expect(status).toBe(200)
  })

  it("a client that sends its request slower than requestTimeoutMillis is answered 408 and its connection closed; one in time is served", async () => {
    const bounded = await serve(fixture.handler, { port: 0, requestTimeoutMillis: 400 })
    try {
      // Cut at its bound: the body, 20 s away at the client's pace, never came whole.
      expect(await sendSlowly(bounded.url, tenant.admin)).toMatch(/^HTTP\/1\.1 408/)
      const served = await fetch(`${bounded.url}/relay/v1/accounts?limit=1`, { headers: auth() })
      expect(served.status).toBe(200)
    } finally {
      await bounded.close()
    }
  })

  it("close() lets a request in flight finish", async () => {
    // The request is held inside the server until close() has begun, so it is in flight then on any machine (a
    // fixed wait before closing lost the race on a loaded one: the connection was refused).
    let arrived = () => {}
    const arrival = new Promise<void>((resolve) => (arrived = resolve))
    let release = () => {}
    const held = new Promise<void>((resolve) => (release = resolve))
    const own = await serve(async (request) => {
      arrived()
      await held
      return fixture.handler(request)
    }, { port: 0 })
    const inFlight = fetch(`${own.url}/relay/v1/accounts`, { headers: auth() })
    await arrival
    const closing = own.close()
    release()
    expect((await inFlight).status).toBe(200)
    await closing
  })

  it("close() ends while a client keeps sending on a kept-alive connection: the next answer says Connection: close and closes it", async () => {
    let arrived = () => {}
    let release = () => {}
    let holding = false
    const own = await serve(async (request) => {
      if (holding) {
        holding = false
        arrived()
        await new Promise<void>((resolve) => (release = resolve))
      }
      return fixture.handler(request)
    }, { port: 0 })
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    const get = () =>
      new Promise<{ readonly status: number; readonly connection: string | undefined }>((resolve, reject) => {
        httpRequest(`${own.url}/relay/v1/accounts`, { agent, headers: auth() }, (response) => {
          response.resume()
          response.on("end", () => resolve({ status: response.statusCode ?? 0, connection: response.headers.connection }))
        }).on("error", reject).end()
      })
    try {
      expect((await get()).status).toBe(200)
      // The connection is busy with a request when close is called, and its client sends again at once after each
      // answer, as a client that polls back to back does.
      holding = true
      const arrival = new Promise<void>((resolve) => (arrived = resolve))
      const busy = get()
      await arrival
      let closed = false
      const closing = own.close().then(() => (closed = true))
      release()
      const answers = [await busy]
      while (!closed && answers.length < 100) {
        const next = await get().catch(() => undefined)
        if (next === undefined) break
        answers.push(next)
      }
      // The answer in flight, and at most the next one, which closes the connection (unless the connection, idle
      // after the first, was closed before the next request reached it); then no new connection is taken.
      expect(answers.length).toBeLessThanOrEqual(2)
      if (answers.length === 2) expect(answers[1]).toEqual({ status: 200, connection: "close" })
      await closing
    } finally {
      agent.destroy()
      await own.close()
    }
  })

  it("requests handled in one turn: the first reply is written at once, the others together at the turn's end, each on its own request in order (TurnEndWrites)", async () => {
    const events: Array<string> = []
    const answering = Object.assign(async () => new Response(null, { status: 500 }), {
      [serveIncoming]: (incoming: Incoming) => {
        events.push(`handle ${incoming.pathname}`)
        return { status: 200, headers: { "content-type": "text/plain" }, body: `answer to ${incoming.pathname}` }
      }
    })
    const end = ServerResponse.prototype.end
    vi.spyOn(ServerResponse.prototype, "end").mockImplementation(function(this: ServerResponse, ...args: Array<unknown>) {
      events.push(`write ${this.req.url}`)
      return Reflect.apply(end, this, args) as ServerResponse
    } as typeof end)
    const own = await serve(answering, { port: 0 })
    try {
      // Three requests pipelined in one packet are parsed, and handled, in one turn.
      const socket = await pipelinedGets(own, ["/1", "/2", "/3"])
      let received = ""
      socket.setEncoding("utf8").on("data", (chunk: string) => (received += chunk))
      await vi.waitFor(() => expect(received.match(/answer to \/\d/g)).toHaveLength(3))
      socket.destroy()
      expect(received.match(/answer to \/\d/g)).toEqual(["answer to /1", "answer to /2", "answer to /3"])
      expect(events).toEqual(["handle /1", "write /1", "handle /2", "handle /3", "write /2", "write /3"])
    } finally {
      vi.restoreAllMocks()
      await own.close()
    }
  })

  it("a client gone before its turn's replies are written costs the server nothing: the next request is answered", async () => {
    const own = await serve(fixture.handler, { port: 0 })
    try {
      const path = `/relay/v1/accounts/${tenant.source}`
      for (let round = 0; round < 20; round++) {
        const socket = await pipelinedGets(own, [path, path, path, path], auth())
        if (round % 2 === 0) socket.destroy()
        else socket.resetAndDestroy()
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
      const answer = await fetch(own.url + path, { headers: auth() })
      expect(answer.status).toBe(200)
    } finally {
      await own.close()
    }
  })

  it("a relay handler is served directly and answers exactly as the generic Request/Response translation does", async () => {
    // A plain fetch handler (here the relay wrapped in a closure) takes the generic path.
    const generic = await serve((request) => fixture.handler(request), { port: 0 })
    try {
      const raw = (base: string, path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) =>
        new Promise<{ status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
          const url = new URL(base)
          const req = httpRequest({ host: url.hostname, port: url.port, path, method: init.method ?? "GET", headers: init.headers ?? {} }, (res) => {
            let body = ""
            res.setEncoding("utf8")
            res.on("data", (chunk: string) => (body += chunk))
            res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
          })
          req.on("error", reject)
          req.end(init.body)
        })
      const json = { ...auth(), "content-type": "application/json" }
      const cases: ReadonlyArray<readonly [string, { method?: string; headers?: Record<string, string>; body?: string }]> = [
        ["/relay/v1/accounts?limit=2&page=1", { headers: auth() }],
        ["/relay/v1/accounts?role=staking&role=trading&status=active", { headers: auth() }],
        ["/relay/v1/./accounts", { headers: auth() }],
        ["/relay/v1/x/../accounts?limit=1", { headers: auth() }],
        ["/relay/v1/%61ccounts", { headers: auth() }],
        ["/relay//v1/accounts", { headers: auth() }],
        ["/relay/v1/accounts/not-a-uuid", { headers: auth() }],
        ["/relay/v1/accounts", { headers: {} }],
        ["/relay/v1/accounts", { headers: { ...auth(), "x-api-secret": "wrong" } }],
        ["/relay/v1/accounts?limit=%F0", { headers: auth() }],
        ["/relay/v1/nothing", {}],
        ["/relay/v1/accounts", { method: "DELETE", headers: auth() }],
        ["/relay/v1/accounts", { method: "POST", headers: json, body: "{not json" }],
        ["/relay/v1/accounts", { method: "POST", headers: { ...auth(), "content-type": "text/plain" }, body: "{}" }],
        ["/relay/v1/accounts", { method: "POST", headers: json, body: JSON.stringify({ name: "x".repeat(2000) }) }],
        ["/relay/v1/accounts", { method: "POST", headers: json, body: JSON.stringify({ name: "", workspace: "nope" }) }]
      ]
      for (const [path, init] of cases) {
        const direct = await raw(listening.url, path, init)
        const translated = await raw(generic.url, path, init)
        const comparable = (answer: typeof direct) => ({
          status: answer.status,
          body: answer.body.replace(/"requestId":"[^"]+"/, ""),
          contentType: answer.headers["content-type"],
          allow: answer.headers["allow"],
          limit: answer.headers["x-ratelimit-limit"],
          hasRequestId: typeof answer.headers["x-request-id"] === "string"
        })
        expect(comparable(direct), `${init.method ?? "GET"} ${path}`).toEqual(comparable(translated))
      }
    } finally {
      await generic.close()
    }
  })
})

describe("request targets", () => {
  it("are split into the path and query parameters URL parsing would give, cheaply or not", () => {
    const segment = fc.oneof(
      fc.constantFrom(".", "..", "%2e", "%2E%2e", "", "accounts", "a%20b", "~x", "é", "a\\b", "%zz", "v1;p"),
      fc.string({ maxLength: 6 })
    )
    const target = fc.tuple(fc.array(segment, { maxLength: 5 }), fc.option(fc.string({ maxLength: 12 }), { nil: undefined }))
      .map(([segments, query]) => `/${segments.join("/")}${query === undefined ? "" : `?${query}`}`)
    fc.assert(
      fc.property(target, (t) => {
        const url = new URL(ORIGIN + t)
        const split = splitTarget(t)
        expect(split.pathname).toBe(url.pathname)
        expect([...searchParams(split)]).toEqual([...url.searchParams])
      }),
      { numRuns: 2000 }
    )
  })
})
