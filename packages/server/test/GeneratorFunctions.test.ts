/**
 * No request, and no round of the outbox worker, makes a generator function of its own: every generator body the
 * relay runs (an `Effect.fnUntraced`, an operation, a unit of work's body) is made once, when its module or its
 * handler is, and each call only starts a new generator from it. A body written inline, `(unit) => Effect.gen(
 * function*() { ... })`, is a new function object on every call, and V8 gives each one its own `prototype` and,
 * on its first call, a new map for its generator objects: measured at 2 to 3 µs a call here, and it leaves the run
 * loop's `iterator.next` call site seeing a new map every time (docs/benchmarks.md, "generator bodies made once").
 *
 * Seen from outside: every generator object's prototype is its function's own `prototype` object, so a prototype
 * not seen before is a generator function never run before. The test watches `next` on the one prototype all
 * generators share, warms each kind of request up (its first run may reach code nothing ran yet), then repeats it
 * three times, each watched on its own: a body made per call is new in every repeat, so none may be new in two of
 * them. A body new in one repeat only is code that ran for the first time, not a body made again: node's own
 * (`*parseChannelMessages`, when the test runner's first message to this worker arrives meanwhile), or a path
 * nothing took before. On SQLite, and on PostgreSQL where RELAY_TEST_PG_URL is set.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { Session } from "node:inspector"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Accounts, Administration, OutboxWorker, Reconciliation, Relay, Transactions, Webhooks } from "@custody-relay/core"
import { makeHandler, type RelayHandler } from "@custody-relay/http"
import { Effect, Logger } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { seedDemo } from "../src/seedDemo.js"
import { fromDatabase } from "../src/StorageLayer.js"
import { asDemoUser, demoBtcTransfer } from "./DemoRequests.js"
import { dropDatabases, hasPostgres, newPostgresDatabase } from "./Tenant.js"

if (!hasPostgres) console.log("GeneratorFunctions.test.ts: PostgreSQL skipped because RELAY_TEST_PG_URL is not set")

/** The prototype every generator object inherits `next` from (%GeneratorPrototype%). */
const generatorPrototype = Object.getPrototypeOf(function*() {}).prototype as { next: (...args: Array<unknown>) => unknown }

/** The source of the generator function behind a generator object, read through the inspector, for the message. */
const sourceOf = (generator: object): string => {
  const session = new Session()
  try {
    session.connect()
    let text = "?"
    const holder = globalThis as { __generatorUnderTest?: object }
    holder.__generatorUnderTest = generator
    session.post("Runtime.evaluate", { expression: "globalThis.__generatorUnderTest" }, (error, evaluated) => {
      if (error !== null || evaluated.result.objectId === undefined) return
      session.post("Runtime.getProperties", { objectId: evaluated.result.objectId, ownProperties: true }, (failed, found) => {
        const fn = failed === null ? found.internalProperties?.find((p) => p.name === "[[GeneratorFunction]]") : undefined
        text = (fn?.value?.description ?? "?").replace(/\s+/g, " ").slice(0, 200)
      })
    })
    delete holder.__generatorUnderTest
    return text
  } finally {
    session.disconnect()
  }
}

/** Watches generator functions run for the first time; `during` answers the sources of those `work` ran. */
const watchGeneratorFunctions = () => {
  const next = generatorPrototype.next
  const seen = new WeakSet<object>()
  let fresh: Array<object> | undefined
  generatorPrototype.next = function(this: object, ...args: Array<unknown>) {
    const own = Object.getPrototypeOf(this) as object
    if (!seen.has(own)) {
      seen.add(own)
      fresh?.push(this)
    }
    return next.apply(this, args)
  }
  return {
    during: async (work: () => Promise<unknown>): Promise<Array<string>> => {
      fresh = []
      try {
        await work()
        return [...new Set(fresh.map(sourceOf))]
      } finally {
        fresh = undefined
      }
    },
    stop: () => {
      generatorPrototype.next = next
    }
  }
}

type Demo = Awaited<ReturnType<typeof seed>>
const seed = (relay: RelayHandler<unknown>) => relay.runtime.runPromise(seedDemo)

const suite = (name: string, database: () => Promise<string>, rateLimits: "memory" | "database") =>
  describe(`generator functions made once, ${name}, rate limits counted in ${rateLimits}`, () => {
    let relay: RelayHandler<unknown>
    let demo: Demo
    let receiver: Server
    let receiverUrl: string
    let watch: ReturnType<typeof watchGeneratorFunctions>
    let made = 0

    const call = async (role: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
      const response = await asDemoUser(relay, demo, role, method, path, body, headers)
      const text = await response.text()
      return { status: response.status, body: text === "" ? undefined : JSON.parse(text) as { readonly id: string } }
    }
    const btc = () => demo.accounts.find((a) => a.assetId === "BTC")?.id ?? ""
    const transfer = () => demoBtcTransfer(demo)
    const initiated = async () => {
      const answer = await call("initiator", "POST", "/relay/v1/transactions/initiate", transfer())
      expect(answer.status).toBe(201)
      return answer.body?.id ?? ""
    }

    beforeAll(async () => {
      receiver = createServer((request, response) => {
        request.resume()
        request.on("end", () => response.writeHead(204).end())
      })
      await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
      const address = receiver.address()
      receiverUrl = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}/hook`
      // The worker is run by the test (`drain`), so no round of it runs while a request is watched.
      relay = makeHandler({
        layer: Relay.layer(fromDatabase(await database(), rateLimits)),
        outbox: false,
        webhooks: { allowPrivateTargets: true },
        logger: Logger.make(() => undefined)
      })
      await relay.ready
      demo = await seed(relay)
      watch = watchGeneratorFunctions()
    }, 60_000)

    afterAll(async () => {
      watch?.stop()
      await relay?.dispose()
      await new Promise((resolve) => receiver?.close(resolve))
    })

    /** Runs `work` twice to warm it up, then three times watched: no generator function may be new in two of them. */
    const repeatedMakesNone = async (work: () => Promise<unknown>) => {
      await work()
      await work()
      const repeats: Array<ReadonlyArray<string>> = []
      for (let i = 0; i < 3; i++) repeats.push(await watch.during(work))
      const madeAgain = [...new Set(repeats.flat())].filter((source) => repeats.filter((made) => made.includes(source)).length >= 2)
      expect(madeAgain).toEqual([])
    }

    it("reads: a record, a page, a status, the audit trail", () =>
      repeatedMakesNone(async () => {
        expect((await call("viewer", "GET", `/relay/v1/accounts/${btc()}`)).status).toBe(200)
        expect((await call("viewer", "GET", "/relay/v1/accounts")).status).toBe(200)
        expect((await call("viewer", "GET", "/relay/v1/transactions?limit=5")).status).toBe(200)
        expect((await call("viewer", "GET", "/relay/v1/whitelisted-addresses")).status).toBe(200)
        expect((await call("viewer", "GET", `/relay/v1/whitelisted-addresses/${demo.whitelistedAddressId}`)).status).toBe(200)
        expect((await call("admin", "GET", "/relay/v1/events?limit=5")).status).toBe(200)
      }))

    it("TXN-INIT-1, TXN-FEE-1: a fee quote and an initiation, without and under an Idempotency-Key, and its replay", () =>
      repeatedMakesNone(async () => {
        expect((await call("initiator", "POST", "/relay/v1/transactions/calculate-fee", transfer())).status).toBe(200)
        const id = await initiated()
        expect((await call("viewer", "GET", `/relay/v1/transactions/${id}`)).status).toBe(200)
        expect((await call("viewer", "GET", `/relay/v1/transactions/${id}/status`)).status).toBe(200)
        const key = { "idempotency-key": `generators-${made++}` }
        expect((await call("initiator", "POST", "/relay/v1/transactions/initiate", transfer(), key)).status).toBe(201)
        expect((await call("initiator", "POST", "/relay/v1/transactions/initiate", transfer(), key)).status).toBe(201)
      }))

    it("approvals: a transaction approved and one rejected; an account created, approved and one rejected", () =>
      repeatedMakesNone(async () => {
        expect((await call("approver-1", "POST", `/relay/v1/transactions/${await initiated()}/approve`, {})).status).toBe(200)
        expect((await call("approver-1", "POST", `/relay/v1/transactions/${await initiated()}/reject`, {})).status).toBe(200)
        for (const decision of ["approve", "reject"]) {
          const created = await call("initiator", "POST", "/relay/v1/accounts", { name: `Generators ${made++}`, workspace: "custody", assetId: "BTC" })
          expect(created.status).toBe(201)
          expect((await call("approver-1", "POST", `/relay/v1/accounts/${decision}`, { accountId: created.body?.id })).status).toBe(200)
        }
      }))

    it("whitelisting, webhook subscriptions and refusals (401, 403, 404, 400, 409)", () =>
      repeatedMakesNone(async () => {
        const address = await call("initiator", "POST", "/relay/v1/whitelisted-addresses", {
          name: `Generators ${made++}`,
          address: "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",
          assetType: "BTC"
        })
        expect(address.status).toBe(409)
        const subscription = await call("admin", "POST", "/relay/v1/webhooks", { url: `${receiverUrl}?n=${made++}`, eventTypes: ["transaction.initiated"] })
        expect(subscription.status).toBe(201)
        const id = subscription.body?.id
        expect((await call("admin", "POST", `/relay/v1/webhooks/${id}/rotate-secret`, {})).status).toBe(200)
        expect((await call("admin", "POST", `/relay/v1/webhooks/${id}/disable`, {})).status).toBe(200)
        expect((await call("admin", "POST", `/relay/v1/webhooks/${id}/enable`, {})).status).toBe(200)
        expect((await call("viewer", "POST", "/relay/v1/transactions/initiate", transfer())).status).toBe(403)
        expect((await call("viewer", "GET", "/relay/v1/nothing")).status).toBe(404)
        expect((await call("initiator", "POST", "/relay/v1/transactions/initiate", { amount: "1" })).status).toBe(400)
        const unknown = await relay(new Request("http://relay/relay/v1/accounts", { headers: { "x-api-key": "crk_nobody", "x-api-secret": "nothing" } }))
        expect(unknown.status).toBe(401)
      }))

    it("the outbox worker: transfers handed to the provider, addresses registered, webhooks delivered", () =>
      repeatedMakesNone(async () => {
        expect((await call("approver-1", "POST", `/relay/v1/transactions/${await initiated()}/approve`, {})).status).toBe(200)
        expect((await call("initiator", "POST", "/relay/v1/whitelisted-addresses", {
          name: `Generators ${made++}`,
          address: "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
          assetType: "BTC"
        })).status).toBeLessThan(500)
        expect(await relay.runtime.runPromise(OutboxWorker.drain())).toBeGreaterThan(0)
      }))

    // Made once, as the relay's own bodies are: a body written inline here would itself be new on every round.
    const operatorRound = Effect.fnUntraced(function*() {
      const credential = yield* Administration.createApiUser({ clientId: demo.clientId, permissions: ["View custody account"] })
      yield* Administration.setPermissions(credential.apiUserId, ["View custody account", "View whitelisted address"])
      yield* Administration.rotateSecret(credential.apiUserId)
      yield* Administration.revokeApiUser(credential.apiUserId)
      yield* Accounts.deposit(btc(), "0.001")
      yield* Accounts.setApprovalPolicy(btc(), 1)
      const approved = yield* Effect.promise(initiated)
      yield* Transactions.advanceTo(approved, "completed")
      yield* Transactions.cancel(yield* Effect.promise(initiated))
      yield* Transactions.applyProviderEvent(yield* Effect.promise(initiated), "fail", "DROPPED_BY_NETWORK")
      expect((yield* Reconciliation.reconcileAccount(btc())).consistent).toBe(true)
      for (const subscription of yield* Webhooks.listOfClient(demo.clientId)) {
        yield* Webhooks.setEnabledByOperator(subscription.id, true)
      }
    })

    it("operator operations: credentials, deposits, approval policies, provider steps, reconciliation, webhooks", () =>
      repeatedMakesNone(() => relay.runtime.runPromise(operatorRound())))
  })

const directory = mkdtempSync(join(tmpdir(), "relay-generators-"))
afterAll(async () => {
  rmSync(directory, { recursive: true, force: true })
  await dropDatabases()
})

suite("SQLite", async () => join(directory, "relay.db"), "database")
if (hasPostgres) suite("PostgreSQL", newPostgresDatabase, "memory")
