/**
 * Round trips to PostgreSQL per request, counted on the wire: the relay's pool reaches the database through a
 * counting proxy (storage-sql's CountingProxy). A round trip is what a request waits for on a network to the
 * database, so this is the figure that matters when the database is not on the same host (issue 17).
 * Needs RELAY_TEST_PG_URL; without it the suite says why and is skipped.
 */
import { Chain, CustodyProvider, type Outbox, OutboxWorker, ProviderReports, Relay, Storage, Timestamp, Transactions, Webhooks, WhitelistedAddresses } from "@custody-relay/core"
import { makeHandler, type RelayHandler } from "@custody-relay/http"
import { Clock, Effect, Logger } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { countingProxy } from "../../storage-sql/test/CountingProxy.js"
import { seedDemo } from "../src/seedDemo.js"
import { fromDatabase } from "../src/StorageLayer.js"
import { approvedDemoTransfer, asDemoUser, demoBtcTransfer } from "./DemoRequests.js"
import { dropDatabases, hasPostgres, newPostgresDatabase } from "./Tenant.js"

if (!hasPostgres) console.log("RoundTrips.test.ts: skipped because RELAY_TEST_PG_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/postgres)")

describe.skipIf(!hasPostgres)("round trips to PostgreSQL per request", () => {
  let proxy: Awaited<ReturnType<typeof countingProxy>>
  let relay: RelayHandler<unknown>
  let call: (method: string, path: string, role: string, body?: unknown, headers?: Record<string, string>) => Promise<number>
  let demo: Awaited<ReturnType<typeof seed>>
  /** Before this suite's database held anything. */
  let createdAt = 0
  const seed = (handler: RelayHandler<unknown>) => handler.runtime.runPromise(seedDemo)
  const btcTransfer = () => demoBtcTransfer(demo)

  beforeAll(async () => {
    createdAt = Date.now()
    proxy = await countingProxy(new URL(await newPostgresDatabase()))
    // Rate limits counted in memory (or Redis): counting in the database is a round trip of its own by design.
    // The outbox worker is left out: it polls the database on its own schedule, not for a request.
    relay = makeHandler({ layer: Relay.layer(fromDatabase(proxy.url, "memory")), outbox: false, logger: Logger.make(() => undefined), logLevel: "Warn" })
    await relay.ready
    demo = await seed(relay)
    call = async (method, path, role, body, headers = {}) => {
      const response = await asDemoUser(relay, demo, role, method, path, body, headers)
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

  it("GET a record by id, on a credential kept from an earlier request: the record, with the credential's re-read in the same round trip", async () => {
    let status = 0
    const trips = await proxy.count(async () => {
      status = await call("GET", `/relay/v1/accounts/${demo.accounts[0]?.id}`, "viewer")
    })
    expect(status).toBe(200)
    expect(trips).toBe(1)
  })

  it("GET a record by id, on a credential not kept yet (its first request on this node): the credential, then the record", async () => {
    let status = 0
    const trips = await proxy.count(async () => {
      status = await call("GET", `/relay/v1/accounts/${demo.accounts[0]?.id}`, "approver-2")
    })
    expect(status).toBe(200)
    expect(trips).toBe(2)
  })

  it("PAGE-1: GET a first page: the page and its total in one statement, no transaction, the credential's re-read with it", async () => {
    // The audit trail needs "View audit trail", which only the admin has; its first request keeps its credential.
    await call("GET", "/relay/v1/accounts", "admin")
    for (const [path, role] of [["/relay/v1/accounts", "viewer"], ["/relay/v1/transactions", "viewer"], ["/relay/v1/whitelisted-addresses", "viewer"], ["/relay/v1/events", "admin"]] as const) {
      let status = 0
      const trips = await proxy.count(async () => {
        status = await call("GET", path, role)
      })
      expect(status, path).toBe(200)
      // A lookup unit (Storage.unitForPage): the re-read and the page with its total go in one pipeline. A later
      // page counts first in a read unit's snapshot (BEGIN and COMMIT of their own).
      expect(trips, path).toBe(1)
    }
  })

  it("TXN-INIT-1: initiate: the validation before the fee quote (the source and the destination read together), then one write unit", async () => {
    // The initiator's first request on this node keeps its credential.
    expect(await proxy.count(async () => expect(await call("GET", "/relay/v1/transactions?limit=1", "initiator")).toBe(200))).toBe(2)
    let status = 0
    const trips = await proxy.count(async () => {
      status = await call("POST", "/relay/v1/transactions/initiate", "initiator", btcTransfer())
    })
    expect(status).toBe(201)
    // The validation, 1: the credential's re-read, the source and the destination. The unit, whose writes go with its
    // next read or its commit (PostgresSession), 2: BEGIN with the source and the destination locked and the one look
    // at the client's webhook subscriptions; the balance, the transaction, its counter and its two events with COMMIT.
    expect(trips).toBe(1 + 2)
  })

  it("approve and reject (our extension): one write unit, the transaction locked with the one look at the client's webhook subscriptions", async () => {
    // The unit, whose writes go with its next read or its commit: BEGIN with the transaction locked and the client's
    // subscriptions; an approval writes its decision, its events and (at its quorum, as here) the provider's outbox
    // entry with COMMIT; a rejection reads the source account (locked) to release the reservation, then writes with
    // COMMIT.
    const expected = { approve: 2, reject: 3 }
    for (const decision of ["approve", "reject"] as const) {
      const initiated = await asDemoUser(relay, demo, "initiator", "POST", "/relay/v1/transactions/initiate", btcTransfer())
      expect(initiated.status).toBe(201)
      const { id } = (await initiated.json()) as { id: string }
      // The approver's first request on this node keeps its credential.
      expect(await call("GET", `/relay/v1/transactions/${id}`, "approver-1")).toBe(200)
      let status = 0
      const trips = await proxy.count(async () => {
        status = await call("POST", `/relay/v1/transactions/${id}/${decision}`, "approver-1")
      })
      expect(status, decision).toBe(200)
      expect(trips, decision).toBe(expected[decision])
    }
  })

  const run = <A>(effect: Effect.Effect<A, unknown, Relay.RelayServices>) => relay.runtime.runPromise(effect)
  /** Outbox entries read in a read unit, whose COMMIT (not waited for) is counted, and so drained, here. */
  const entriesRead = async (read: (unit: Storage.StorageUnit) => Effect.Effect<ReadonlyArray<Outbox.OutboxEntry>, Storage.StorageError>) => {
    const entries = await run(Storage.run("read", read))
    await proxy.count(async () => {})
    return entries
  }
  /** The one outbox entry of `kind` about `subjectId`, in `state`. */
  const outboxEntry = async (subjectId: string, kind: Outbox.EffectKind, state: Outbox.EntryState = "pending") => {
    const entry = (await entriesRead((unit) => unit.listOutboxEntries(subjectId))).find((e) => e.kind === kind && e.state === state)
    expect(entry, `${kind} ${state}`).toBeDefined()
    return entry!
  }

  it("TXN-SHAPE-2: the provider's id recorded after the outbox hands it an approved transfer: the transaction read (outside any unit), then one write unit, the transaction locked with the one look at the client's webhook subscriptions", async () => {
    /** An approved transfer's submission, carried out as the outbox worker (left out of this relay) would; its round trips. */
    const submission = async () => {
      const id = await approvedDemoTransfer(relay, demo, btcTransfer())
      const entry = await outboxEntry(id, "submitTransfer")
      const trips = await proxy.count(() => run(Transactions.submitToProvider(entry)))
      const submitted = await run(Transactions.inspect(id))
      expect(submitted.providerTransactionId).not.toBeNull()
      return trips
    }
    // The first prepares the statements on the connection (as a node's first submissions do).
    await submission()
    const trips = await submission()
    // The look before calling the provider: a lookup, one statement outside any transaction. Then the write unit,
    // whose writes go with its next read or its COMMIT: BEGIN with the transaction locked and the client's
    // subscriptions; the provider's id with the entry's read (locked, to settle it); the entry settled and the event
    // with COMMIT (the entry's update is sure to match the row the unit holds locked).
    expect(trips).toBe(1 + 3)
  })

  /** The relay's provider, but polled, and reporting `progress` for every transfer and `review` for every address. */
  const asPolledProvider = (progress: CustodyProvider.TransferProgress, review: CustodyProvider.AddressReview) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.flatMap(CustodyProvider.CustodyProvider, (provider) =>
      Effect.provideService(effect, CustodyProvider.CustodyProvider, {
        ...provider,
        progressReporting: "polled",
        transferProgress: () => Effect.succeed(progress),
        addressReview: () => Effect.succeed(review)
      }))
  /** A transfer approved and handed to the provider; polled: its progress is followed by the outbox. */
  const submittedTransfer = async (polled: boolean) => {
    const id = await approvedDemoTransfer(relay, demo, btcTransfer())
    const submission = Transactions.submitToProvider(await outboxEntry(id, "submitTransfer"))
    await run(polled ? submission.pipe(asPolledProvider({ stage: "pending_policy" }, "pending")) : submission)
    return id
  }

  it("TXN-FLOW-1, TXN-SHAPE-4: a followed transfer's poll that moves it: the look, then one write unit, the transaction locked with the one look at the client's webhook subscriptions", async () => {
    const poll = async (stage: "pending_policy" | "signed") => {
      const id = await submittedTransfer(true)
      const entry = await outboxEntry(id, "followTransfer")
      const trips = await proxy.count(() => run(Transactions.followAtProvider(entry).pipe(asPolledProvider({ stage }, "pending"))))
      return { trips, status: (await run(Transactions.inspect(id))).status }
    }
    // The first prepares the statements on the connection (as a node's first polls do).
    await poll("signed")
    // The look before asking the provider: a lookup, one statement. Then the write unit, whose writes go with its
    // next read or its COMMIT: BEGIN with the transaction locked and the client's subscriptions (the report moves
    // the transaction as the look found it); the transaction and its event with the entry's read (locked, to settle
    // it); the entry due again with COMMIT.
    expect(await poll("signed")).toEqual({ trips: 1 + 3, status: "BROADCASTING" })
    // A poll that moves nothing appends no event and reads no subscription: BEGIN with the transaction locked; the
    // entry's read; the entry due again with COMMIT.
    expect(await poll("pending_policy")).toEqual({ trips: 1 + 3, status: "PENDING_PROVIDER_APPROVAL" })
  })

  it("TXN-FLOW-1: a transfer's progress pushed by the provider: the request's entry read, then one write unit, the transaction locked with the one look at the client's webhook subscriptions", async () => {
    const pushed = async () => {
      const id = await submittedTransfer(false)
      const submitted = await outboxEntry(id, "submitTransfer", "done")
      const trips = await proxy.count(() => run(ProviderReports.apply({ kind: "transfer", requestId: submitted.id, progress: { stage: "signed" } })))
      return { trips, status: (await run(Transactions.inspect(id))).status }
    }
    await pushed()
    // The request's outbox entry, a lookup (one statement, no transaction); then the unit: BEGIN with the transaction locked and the
    // client's subscriptions; the transaction and its event with COMMIT.
    expect(await pushed()).toEqual({ trips: 1 + 2, status: "BROADCASTING" })
  })

  it("WL-STATE-1, WL-FLOW-1: an address registered with the provider and its review, polled and pushed: each one write unit, its first read with the one look at the client's webhook subscriptions", async () => {
    let n = 0
    const whitelisted = async () => {
      const created = await asDemoUser(relay, demo, "initiator", "POST", "/relay/v1/whitelisted-addresses", {
        name: `Round trips ${++n}`,
        address: Chain.Bitcoin.addressFromSeed(new TextEncoder().encode(`round trips ${n}`)),
        assetType: "BTC"
      })
      expect(created.status, await created.clone().text()).toBe(201)
      return ((await created.json()) as { id: string }).id
    }
    const registered = async (polled: boolean) => {
      const id = await whitelisted()
      const entry = await outboxEntry(id, "registerWhitelistedAddress")
      const registration = WhitelistedAddresses.registerAtProvider(entry)
      const trips = await proxy.count(() => run(polled ? registration.pipe(asPolledProvider({ stage: "pending_policy" }, "pending")) : registration))
      return { id, entry, trips }
    }
    await registered(true)
    // The look before calling the provider: a lookup (1). The unit: BEGIN with the address locked and the
    // client's subscriptions; the provider's id, its event and (polled) the follow-up's entry with the entry's read
    // (locked, to settle it); the entry settled with COMMIT.
    expect((await registered(true)).trips).toBe(1 + 3)
    const polledReview = async (review: CustodyProvider.AddressReview) => {
      const { id } = await registered(true)
      const entry = await outboxEntry(id, "followWhitelistedAddress")
      const trips = await proxy.count(() => run(WhitelistedAddresses.followReview(entry).pipe(asPolledProvider({ stage: "pending_policy" }, review))))
      return trips
    }
    await polledReview("approved")
    // The look (1); the unit: BEGIN with the address locked and the subscriptions; the verdict and its event with the
    // entry's read; the entry settled with COMMIT.
    expect(await polledReview("approved")).toBe(1 + 3)
    // A review still pending appends nothing and reads no subscription.
    expect(await polledReview("pending")).toBe(1 + 3)
    const pushedReview = async () => {
      const { entry } = await registered(false)
      await proxy.count(async () => {})
      return proxy.count(() => run(ProviderReports.apply({ kind: "address", requestId: entry.id, review: "approved" })))
    }
    await pushedReview()
    // The request's entry (1); the unit: BEGIN with the address locked and the subscriptions; the verdict and its event
    // with COMMIT.
    expect(await pushedReview()).toBe(1 + 2)
  })

  it("a webhook delivery: the delivery looked at (then its subscription with whether an earlier one waits), then one write unit", async () => {
    // The admin's first request on this node keeps its credential; its subscription takes every event.
    expect(await call("GET", "/relay/v1/accounts?limit=1", "admin")).toBe(200)
    expect(await call("POST", "/relay/v1/webhooks", "admin", { url: "https://hooks.example.com/custody" })).toBe(201)
    const receiving = Effect.provideService(Webhooks.WebhookTransport, { post: () => Effect.succeed({ status: 200 }) })
    const delivery = async () => {
      expect(await call("POST", "/relay/v1/transactions/initiate", "initiator", btcTransfer())).toBe(201)
      const due = await entriesRead((unit) => Effect.flatMap(Timestamp.now, (now) => unit.dueOutboxEntries(now, 100)))
      const entry = due.find((e) => e.kind === "deliverWebhook")
      expect(entry).toBeDefined()
      const trips = await proxy.count(() => run(Webhooks.deliver(entry!).pipe(receiving)))
      await run(OutboxWorker.drain().pipe(receiving))
      return trips
    }
    // The first prepares the statements on the connection.
    await delivery()
    // The look, a lookup: the delivery; then its subscription and the look for an earlier delivery of its record
    // still pending, issued together. The unit, whose writes go with its next read or its COMMIT: BEGIN with the
    // delivery's log and the entry's read (locked, to settle it); the entry settled with COMMIT.
    expect(await delivery()).toBe(2 + 2)
  })

  it("an idle outbox worker's round: one statement, outside any transaction", async () => {
    // Idle as of a moment before this database's first entry: the tests before leave transfers followed at the
    // provider, due again every few seconds, so "now" could find one due between any drain and the round.
    const idleAt = createdAt - 1
    const atIdleMoment = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Clock.clockWith((clock) =>
        Effect.provideService(effect, Clock.Clock, {
          currentTimeMillisUnsafe: () => idleAt,
          currentTimeMillis: Effect.succeed(idleAt),
          currentTimeNanosUnsafe: () => BigInt(idleAt) * 1_000_000n,
          currentTimeNanos: Effect.succeed(BigInt(idleAt) * 1_000_000n),
          monotonicTimeNanosUnsafe: () => clock.monotonicTimeNanosUnsafe(),
          monotonicTimeNanos: clock.monotonicTimeNanos,
          sleep: (duration) => clock.sleep(duration)
        }))
    let carried = -1
    const trips = await proxy.count(async () => {
      carried = await run(atIdleMoment(OutboxWorker.runDue()))
    })
    expect({ carried, trips }).toEqual({ carried: 0, trips: 1 })
  })

  it("ACC-CREATE, ACC-APPR-1, WL-CREATE: creating and approving an account and whitelisting an address: one write unit each, its first read with the one look at the client's webhook subscriptions", async () => {
    const json = async (response: Response) => {
      expect(response.status, await response.clone().text()).toBeLessThan(300)
      return (await response.json()) as { id?: string; accountId?: string }
    }
    // The users' first requests on this node keep their credentials.
    expect(await call("GET", "/relay/v1/accounts?limit=1", "approver-2")).toBe(200)
    expect(await call("GET", "/relay/v1/accounts?limit=1", "initiator")).toBe(200)
    let created: { id?: string } = {}
    const createTrips = await proxy.count(async () => {
      created = await json(await asDemoUser(relay, demo, "initiator", "POST", "/relay/v1/accounts", { name: "Round trips", workspace: "custody", assetId: "BTC" }))
    })
    const approveTrips = await proxy.count(async () => {
      await json(await asDemoUser(relay, demo, "approver-2", "POST", "/relay/v1/accounts/approve", { accountId: created.id }))
    })
    const whitelistTrips = await proxy.count(async () => {
      await json(await asDemoUser(relay, demo, "initiator", "POST", "/relay/v1/whitelisted-addresses", { name: "Round trips", address: "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", assetType: "BTC" }))
    })
    // An account: BEGIN with the identity's look for a duplicate (or the account locked) and the subscriptions; the
    // writes with COMMIT. An address: BEGIN with the client locked (whitelisting is serialized on it) and the
    // subscriptions; the look for a duplicate in any spelling; the writes with COMMIT.
    expect({ createTrips, approveTrips, whitelistTrips }).toEqual({ createTrips: 2, approveTrips: 2, whitelistTrips: 3 })
  })

  it("PAGE-1: GET a later page of transactions: the count and what other nodes changed in one round trip with BEGIN, then the page, then COMMIT", async () => {
    for (let i = 0; i < 3; i++) expect(await call("POST", "/relay/v1/transactions/initiate", "initiator", btcTransfer())).toBe(201)
    let status = 0
    const trips = await proxy.count(async () => {
      status = await call("GET", "/relay/v1/transactions?page=2&limit=1", "viewer")
    })
    expect(status).toBe(200)
    // A read unit (one snapshot for the total and the page): BEGIN with the credential's re-read, the total and the
    // client's list changes since the node's kept snapshot (PageBoundaries), issued together; the page, read from
    // the nearest kept boundary; COMMIT.
    expect(trips).toBe(3)
  })

  it("PAGE-1: GET a later page of the audit trail: read first, the log's end with the trail's events after its counted strides in the round trip with BEGIN, then the page, then COMMIT; read before, the page guessed at in that round trip, then COMMIT; the same items as the trail's slice", async () => {
    const items = async (path: string) => {
      const response = await asDemoUser(relay, demo, "admin", "GET", path)
      expect(response.status, path).toBe(200)
      return ((await response.json()) as { items: Array<{ id: string }> }).items.map((item) => item.id)
    }
    // A trail no other test reads. Another read first keeps the admin's credential and lets the node see the log's
    // end; counted, so that its COMMIT, not waited for, falls in no later count.
    const trail = "/relay/v1/events?entityType=transaction"
    // An initiation's one event about the transaction: the trail's page 2 of 3 is full.
    for (let i = 0; i < 6; i++) expect(await call("POST", "/relay/v1/transactions/initiate", "initiator", btcTransfer())).toBe(201)
    await proxy.count(() => items("/relay/v1/events?page=3&limit=2"))
    let found: Array<string> = []
    const first = await proxy.count(async () => {
      found = await items(`${trail}&page=2&limit=3`)
    })
    const slice = (await items(`${trail}&limit=100`)).slice(3, 6)
    expect(slice).toHaveLength(3)
    expect(found).toEqual(slice)
    expect(first).toBe(3)
    // A transaction more since, and its events: the trail's total moved by fewer than a guess reads around its page.
    expect(await call("POST", "/relay/v1/transactions/initiate", "initiator", btcTransfer())).toBe(201)
    const trips = await proxy.count(async () => {
      found = await items(`${trail}&page=2&limit=3`)
    })
    expect(found).toEqual((await items(`${trail}&limit=100`)).slice(3, 6))
    expect(trips).toBe(2)
  })

  it("PAGE-1: GET a later page of a list read before: the page guessed at in the round trip with BEGIN, the total and the changes, then COMMIT; the same items as the list's slice", async () => {
    const items = async (path: string) => {
      const response = await asDemoUser(relay, demo, "viewer", "GET", path)
      expect(response.status, path).toBe(200)
      return ((await response.json()) as { items: Array<{ id: string }> }).items.map((item) => item.id)
    }
    expect(await call("POST", "/relay/v1/transactions/initiate", "initiator", btcTransfer())).toBe(201)
    const read = await items("/relay/v1/transactions?page=2&limit=2")
    // A transaction more since: the list's total moved by one, within what a guess reads around its page.
    expect(await call("POST", "/relay/v1/transactions/initiate", "initiator", btcTransfer())).toBe(201)
    const all = await items("/relay/v1/transactions?limit=100")
    let found: Array<string> = []
    const trips = await proxy.count(async () => {
      found = await items("/relay/v1/transactions?page=2&limit=2")
    })
    expect(found).toEqual(all.slice(2, 4))
    expect(found).not.toEqual(read)
    // The guess goes with BEGIN, the re-read, the total and the changes; COMMIT is not waited for.
    expect(trips).toBe(2)
  })
})
