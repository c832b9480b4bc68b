/**
 * Round trips to PostgreSQL per request, counted on the wire: the relay's pool reaches the database through a TCP
 * proxy that reads the PostgreSQL protocol's frontend messages and counts each one that asks the server to answer
 * (Sync after an extended-protocol query, or a simple Query). A round trip is what a request waits for on a network
 * to the database, so this is the figure that matters when the database is not on the same host (issue 17).
 * Needs RELAY_TEST_PG_URL; without it the suite says why and is skipped.
 */
import { createServer, type Server, type Socket, connect } from "node:net"
import { Relay } from "@custody-relay/core"
import { makeHandler, type RelayHandler } from "@custody-relay/http"
import { Logger } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { seedDemo } from "../src/seedDemo.js"
import { fromDatabase } from "../src/StorageLayer.js"
import { dropDatabases, hasPostgres, newPostgresDatabase } from "./Tenant.js"

if (!hasPostgres) console.log("RoundTrips.test.ts: skipped because RELAY_TEST_PG_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/postgres)")

/** Frontend messages that end a round trip: the server answers each with ReadyForQuery. */
const SYNC = 0x53
const QUERY = 0x51

/** A proxy to `target` that counts round trips on every connection through it. */
const countingProxy = async (target: URL) => {
  let roundTrips = 0
  const server: Server = createServer((client: Socket) => {
    const upstream = connect(Number(target.port || 5432), target.hostname)
    let started = false
    let pending = Buffer.alloc(0)
    client.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk])
      for (;;) {
        // The startup message has no type byte: its first four bytes are its length.
        if (!started) {
          if (pending.length < 4) break
          const length = pending.readInt32BE(0)
          if (pending.length < length) break
          pending = pending.subarray(length)
          started = true
          continue
        }
        if (pending.length < 5) break
        const length = pending.readInt32BE(1)
        if (pending.length < 1 + length) break
        if (pending[0] === SYNC || pending[0] === QUERY) roundTrips++
        pending = pending.subarray(1 + length)
      }
      upstream.write(chunk)
    })
    upstream.pipe(client)
    client.on("error", () => upstream.destroy())
    upstream.on("error", () => client.destroy())
    client.on("close", () => upstream.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  const url = new URL(target)
  url.hostname = "127.0.0.1"
  url.port = String(port)
  return {
    url: url.toString(),
    /** Round trips made while `work` ran. */
    count: async (work: () => Promise<unknown>): Promise<number> => {
      const before = roundTrips
      await work()
      return roundTrips - before
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

describe.skipIf(!hasPostgres)("round trips to PostgreSQL per request", () => {
  let proxy: Awaited<ReturnType<typeof countingProxy>>
  let relay: RelayHandler<unknown>
  let call: (method: string, path: string, role: string, body?: unknown, headers?: Record<string, string>) => Promise<number>
  let demo: Awaited<ReturnType<typeof seed>>
  const seed = (handler: RelayHandler<unknown>) => handler.runtime.runPromise(seedDemo)

  beforeAll(async () => {
    proxy = await countingProxy(new URL(await newPostgresDatabase()))
    // Rate limits counted in memory (or Redis): counting in the database is a round trip of its own by design.
    // The outbox worker is left out: it polls the database on its own schedule, not for a request.
    relay = makeHandler({ layer: Relay.layer(fromDatabase(proxy.url, "memory")), outbox: false, logger: Logger.make(() => undefined), logLevel: "Warn" })
    await relay.ready
    demo = await seed(relay)
    call = async (method, path, role, body, headers = {}) => {
      const user = demo.users.find((u) => u.role === role)
      if (user === undefined) throw new Error(`no demo user ${role}`)
      const response = await relay(new Request(`http://relay${path}`, {
        method,
        headers: { "x-api-key": user.keyId, "x-api-secret": user.secret, ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      }))
      await response.text()
      return response.status
    }
    // The pool's connections are opened before counting: a connection's start-up is not a request's.
    await Promise.all(Array.from({ length: 4 }, () => call("GET", `/relay/v1/accounts/${demo.accounts[0]?.id}`, "viewer")))
  }, 60_000)

  afterAll(async () => {
    await relay?.dispose()
    await proxy?.close()
    await dropDatabases()
  })

  it("GET a record by id: the credential and the record, one round trip each, no transaction around them", async () => {
    let status = 0
    const trips = await proxy.count(async () => {
      status = await call("GET", `/relay/v1/accounts/${demo.accounts[0]?.id}`, "viewer")
    })
    expect(status).toBe(200)
    expect(trips).toBe(2)
  })

  it("GET a page: the credential, then the page and its total on one snapshot", async () => {
    let status = 0
    const trips = await proxy.count(async () => {
      status = await call("GET", "/relay/v1/accounts", "viewer")
    })
    expect(status).toBe(200)
    // Three accounts fit on one page, so no total is counted: BEGIN, the rows, COMMIT.
    expect(trips).toBe(1 + 3)
  })

  it("TXN-INIT-1: initiate: the credential, the validation before the fee quote, then one write unit", async () => {
    const source = demo.accounts.find((a) => a.assetId === "BTC")
    const transfer = { sourceAccountId: source?.id, destinationId: demo.whitelistedAddressId, destinationType: "external", amount: "0.00001", assetType: "BTC" }
    let status = 0
    const trips = await proxy.count(async () => {
      status = await call("POST", "/relay/v1/transactions/initiate", "initiator", transfer)
    })
    expect(status).toBe(201)
    // credential 1 + validation 2 (source, destination) + the unit: BEGIN, source and destination locked, the
    // balance, the transaction, its counter, one look at the client's webhook subscriptions, its two events in one
    // insert, COMMIT.
    expect(trips).toBe(1 + 2 + 9)
  })
})
