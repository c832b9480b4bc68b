/**
 * The outbox and its worker: a provider that fails N times and then succeeds has each effect carried out exactly
 * once (retries with backoff, under TestClock); a provider call that blocks holds no lock, so a write on the same
 * account completes meanwhile; a slow provider call or webhook receiver holds up only its own entries; a
 * submission never answered is retried past its attempts with its funds reserved, and one the provider refuses fails
 * its transfer at once and releases the funds; the live simulated provider carries a transfer to COMPLETED and an
 * address to APPROVED.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  Accounts,
  CustodyProvider,
  DomainEvent,
  Idempotency,
  Ids,
  OutageLog,
  Outbox,
  OutboxWorker,
  ProviderReports,
  Reconciliation,
  Relay,
  RelayConfig,
  RelayError,
  Retention,
  Storage,
  Timestamp,
  Transactions,
  Webhooks,
  WhitelistedAddresses
} from "@custody-relay/core"
import { Clock, Context, Deferred, Effect, Exit, Fiber, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { activeAccount, approvedWhitelistEntry, capturedLogs, newClient, principalOf, validAddress } from "./TestWorld.js"

interface ProviderCalls {
  submitted: Array<string>
  failuresLeft: number
  gate: Deferred.Deferred<void> | undefined
  /** When set, the first submission's call waits on it; the others go on. */
  holdFirst?: Deferred.Deferred<void>
  entered?: number
  /** Submission calls begun, counted before any gate. */
  begun?: number
  /** Whether the failures are the provider's refusal (it holds nothing) rather than calls without an answer. */
  refuse?: boolean
}

/** The simulated provider, with submissions counted, failing the first `failures` and optionally waiting on a gate. */
const countingProvider = (calls: ProviderCalls, lifecycle: CustodyProvider.SimulatedProviderOptions["lifecycle"] = "manual") =>
  Layer.effectContext(
    Effect.gen(function*() {
      const simulated = yield* CustodyProvider.CustodyProvider
      const controls = yield* CustodyProvider.SimulatedProviderControls
      return Context.make(CustodyProvider.CustodyProvider, {
        ...simulated,
        submitTransfer: (order) =>
          Effect.gen(function*() {
            calls.begun = (calls.begun ?? 0) + 1
            if (calls.gate !== undefined) yield* Deferred.await(calls.gate)
            calls.entered = (calls.entered ?? 0) + 1
            if (calls.holdFirst !== undefined && calls.entered === 1) yield* Deferred.await(calls.holdFirst)
            if (calls.failuresLeft > 0) {
              calls.failuresLeft--
              return yield* (calls.refuse === true
                ? new RelayError.CustodyProviderFailed({ operation: "submitTransfer", detail: "destination not served", refused: true })
                : new RelayError.CustodyProviderFailed({ operation: "submitTransfer", detail: "provider unavailable" }))
            }
            calls.submitted.push(order.requestId)
            return yield* simulated.submitTransfer(order)
          })
      }).pipe(Context.add(CustodyProvider.SimulatedProviderControls, controls))
    })
  ).pipe(Layer.provide(CustodyProvider.layerSimulated({ lifecycle })))

const world = (
  calls: ProviderCalls,
  lifecycle?: CustodyProvider.SimulatedProviderOptions["lifecycle"],
  config: Partial<RelayConfig.RelayConfigShape> = {}
) =>
  Relay.layerMemory({ ids: Ids.Ids.layerSequential, provider: countingProvider(calls, lifecycle) }).pipe(
    Layer.provideMerge(Layer.succeed(RelayConfig.RelayConfig, { ...RelayConfig.RelayConfig.defaultValue(), defaultRequiredApprovals: 0, ...config }))
  )

const options: OutboxWorker.WorkerOptions = { ...OutboxWorker.defaults, maxAttempts: 5, baseBackoffMillis: 1000, maxBackoffMillis: 60_000 }

/** Rounds of the worker, moving the clock past every backoff, until nothing is pending. */
const settleAll = Effect.gen(function*() {
  for (let round = 0; round < 50; round++) {
    yield* OutboxWorker.runDue(options)
    yield* TestClock.adjust("2 minutes")
  }
})

const setup = Effect.gen(function*() {
  const client = yield* newClient
  const principal = yield* principalOf(client)
  const source = yield* activeAccount(principal, "BTC", "10")
  const destination = yield* approvedWhitelistEntry(principal, "BTC")
  const initiate = (amount: string) =>
    Transactions.initiate(principal, { sourceAccountId: source, destinationId: destination, destinationType: "external", amount, assetType: "BTC" })
  return { principal, source, destination, initiate }
})

/** A provider that answers every call at once, nothing held or failed yet. */
const answering = (): ProviderCalls => ({ submitted: [], failuresLeft: 0, gate: undefined })

/** `setup`, with everything it left for the worker carried out. */
const settledSetup = Effect.tap(setup, () => settleAll)

/** Two transfers initiated, each reaching its quorum at once (no approvals needed here): two submissions due. */
const twoTransfers = Effect.gen(function*() {
  const { initiate } = yield* setup
  return { first: yield* initiate("0.1"), second: yield* initiate("0.2") }
})

/** A transfer and a new whitelisted address, both handed to the provider (and, when it is polled, followed). */
const transferAndAddress = Effect.gen(function*() {
  const { initiate, principal } = yield* setup
  const tx = yield* initiate("0.1")
  const entry = yield* WhitelistedAddresses.create(principal, { name: "Desk", address: validAddress("BTC"), assetType: "BTC" })
  yield* settleAll
  return { tx, entry, principal }
})

const entriesOf = (subjectId: string) => Storage.run("read", (unit) => unit.listOutboxEntries(subjectId))

/** A webhook transport whose posts to `heldUrl` wait for `release`; every other answers 200 at once. */
const receiverHolding = Effect.fnUntraced(function*(heldUrl: string) {
  const release = yield* Deferred.make<void>()
  const posted: Array<string> = []
  const transport = Webhooks.WebhookTransport.of({
    post: (url) =>
      Effect.gen(function*() {
        posted.push(url)
        if (url === heldUrl) yield* Deferred.await(release)
        return { status: 200 }
      })
  })
  return { release, posted, receiving: Effect.provideService(Webhooks.WebhookTransport, transport) }
})

/** Webhook receivers answering as `answer` says (never, for one that does not answer), every URL posted to kept. */
const receivers = (answer: (url: string) => Effect.Effect<{ readonly status: number }>) => {
  const posted: Array<string> = []
  const transport = Effect.provideService(Webhooks.WebhookTransport, Webhooks.WebhookTransport.of({
    post: (url) => Effect.andThen(Effect.sync(() => posted.push(url)), answer(url))
  }))
  return { posted, transport }
}

/** Yields to the other fibers until `done` holds (or a thousand turns passed). */
const turnsUntil = Effect.fnUntraced(function*(done: () => boolean) {
  for (let turn = 0; turn < 1000 && !done(); turn++) yield* Effect.yieldNow
})

/**
 * The running worker's pauses passed, `times` of them, each after a hundred turns (or until `done` holds): whether
 * the worker was already pausing or only about to, it looks again.
 */
const pauses = <E = never, R = never>(times: number, done: Effect.Effect<boolean, E, R> = Effect.succeed(false)) =>
  Effect.gen(function*() {
    for (let pause = 0; pause < times && !(yield* done); pause++) {
      for (let turn = 0; turn < 100; turn++) yield* Effect.yieldNow
      yield* TestClock.adjust(options.idleMillis)
    }
  })

/** A settled client with one subscription to `transaction.initiated`, whose receiver answers 500 until `receiver.up`. */
const downReceiver = Effect.gen(function*() {
  const { initiate, principal } = yield* settledSetup
  const receiver = { up: false }
  const { posted, transport } = receivers(() => Effect.succeed({ status: receiver.up ? 204 : 500 }))
  const subscription = yield* Webhooks.subscribe(principal, { url: "https://down.example.com/hook", eventTypes: ["transaction.initiated"] })
  return { initiate, principal, receiver, posted, transport, subscription }
})

/** A database outage: while `down`, every unit fails as the SQL stores fail when the server refuses connections. */
interface Outage {
  down: boolean
  /** Units asked for while down. */
  refused: number
}

/** `world`, its storage's units failing as unavailable while the outage is on. */
const worldWithOutage = (calls: ProviderCalls, outage: Outage) =>
  Layer.effectContext(Effect.gen(function*() {
    // The whole context, the world's RelayConfig included: only its storage is replaced.
    const context = yield* Effect.context<Relay.RelayServices>()
    const storage = Context.get(context, Storage.Storage)
    const refused = new Storage.StorageError({
      reason: new Storage.StorageUnavailable({ message: "connect ECONNREFUSED 127.0.0.1:5432", cause: new Error("ECONNREFUSED") })
    })
    return Context.add(context, Storage.Storage, {
      ...storage,
      transaction: (mode, work) => {
        if (!outage.down) return storage.transaction(mode, work)
        outage.refused++
        return Effect.fail(refused)
      }
    })
  })).pipe(Layer.provide(world(calls)))

/** `world`, where deleting expired idempotency keys fails as an unreachable database's statements do. */
const worldFailingKeyDeletes = (calls: ProviderCalls) =>
  Layer.effectContext(Effect.gen(function*() {
    const context = yield* Effect.context<Relay.RelayServices>()
    const storage = Context.get(context, Storage.Storage)
    const refused = new Storage.StorageError({ reason: new Storage.StorageUnavailable({ message: "connection terminated", cause: null }) })
    return Context.add(context, Storage.Storage, {
      ...storage,
      transaction: (mode, work) => storage.transaction(mode, (unit) => work({ ...unit, deleteExpiredIdempotencyRecords: () => Effect.fail(refused) }))
    })
  })).pipe(Layer.provide(world(calls)))

/**
 * `world`, where another node resumes a subscription's deliveries (one of them went out there) right after this
 * node's unit that held them commits, before any later unit of this node: the window between the unit that holds a
 * lane and the one that gives back what was leased with the failed delivery.
 */
const worldResumedElsewhere = (calls: ProviderCalls) =>
  Layer.effectContext(Effect.gen(function*() {
    const context = yield* Effect.context<Relay.RelayServices>()
    const storage = Context.get(context, Storage.Storage)
    let resumeNext: string | undefined
    const resumeElsewhere = (subscriptionId: string) =>
      storage.transaction("write", (unit) =>
        Effect.flatMap(unit.getWebhookSubscription(subscriptionId), (found) =>
          Effect.flatMap(Timestamp.now, (now) =>
            Effect.andThen(
              unit.updateWebhookSubscription({ ...Option.getOrThrow(found), deliveriesHeld: false, updatedAt: now }),
              unit.resumeLane(subscriptionId, now)
            ))))
    return Context.add(context, Storage.Storage, {
      ...storage,
      transaction: (mode, work) => {
        const pending = resumeNext
        resumeNext = undefined
        const watched = (unit: Storage.StorageUnit) =>
          work({ ...unit, holdLane: (lane, except, now) => Effect.tap(unit.holdLane(lane, except, now), () => Effect.sync(() => (resumeNext = lane))) })
        return pending === undefined ? storage.transaction(mode, watched) : Effect.andThen(Effect.orDie(resumeElsewhere(pending)), storage.transaction(mode, watched))
      }
    })
  })).pipe(Layer.provide(world(calls)))

describe("Outbox", () => {
  it("the default retries of an effect span more than a day, whatever the jitter (a receiver down overnight still gets it)", () => {
    const o = OutboxWorker.defaults
    const retries = Array.from({ length: o.maxAttempts - 1 }, (_, i) => OutboxWorker.backoffCeilingMillis(o, i + 1))
    const shortest = retries.reduce((sum, ceiling) => sum + ceiling * OutboxWorker.JITTER_FLOOR, 0)
    assert.isAbove(shortest, 24 * 60 * 60 * 1000)
  })

  it.effect("a provider that fails 3 times and then succeeds gets each transfer exactly once; the entry shows its attempts", () => {
    const calls: ProviderCalls = { submitted: [], failuresLeft: 3, gate: undefined }
    return Effect.gen(function*() {
      const { first, second } = yield* twoTransfers
      yield* settleAll
      const entries = [...(yield* entriesOf(first.id)), ...(yield* entriesOf(second.id))]
      assert.deepStrictEqual(entries.map((e) => [e.kind, e.state]), [["submitTransfer", "done"], ["submitTransfer", "done"]])
      assert.deepStrictEqual([...calls.submitted].sort(), entries.map((e) => e.id).sort())
      assert.strictEqual(entries.reduce((sum, e) => sum + e.attempts, 0), 3)
      for (const id of [first.id, second.id]) assert.isNotNull((yield* Transactions.inspect(id)).providerTransactionId)
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("a provider call that blocks holds no lock: a write on the same account completes meanwhile", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate, source } = yield* setup
      yield* initiate("0.1")
      calls.gate = yield* Deferred.make<void>()
      const worker = yield* Effect.forkChild(OutboxWorker.runDue(options))
      yield* Effect.yieldNow
      // The worker is inside the provider call now; writes on the same account go through.
      yield* Accounts.deposit(source, "1")
      const second = yield* initiate("0.2")
      assert.strictEqual(calls.submitted.length, 0)
      yield* Deferred.succeed(calls.gate, undefined)
      yield* Fiber.join(worker)
      assert.strictEqual(calls.submitted.length, 1)
      assert.strictEqual((yield* Transactions.inspect(second.id)).status, "PENDING_PROVIDER_APPROVAL")
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("a slow provider call holds up only its own entry: the round's other entries are carried out meanwhile", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { first, second } = yield* twoTransfers
      calls.holdFirst = yield* Deferred.make<void>()
      const worker = yield* Effect.forkChild(OutboxWorker.runDue(options))
      for (let turn = 0; turn < 20; turn++) yield* Effect.yieldNow
      // The first transfer's call is still in flight; the second was handed over and recorded beside it.
      const [held] = yield* entriesOf(first.id)
      const [handed] = yield* entriesOf(second.id)
      assert.deepStrictEqual(calls.submitted, [handed?.id])
      assert.deepStrictEqual([held?.state, handed?.state], ["pending", "done"])
      assert.isNotNull((yield* Transactions.inspect(second.id)).providerTransactionId)
      yield* Deferred.succeed(calls.holdFirst, undefined)
      yield* Fiber.join(worker)
      assert.deepStrictEqual([...calls.submitted].sort(), [held?.id, handed?.id].sort())
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("the running worker leases again while a slow lane is still out: a transfer approved meanwhile is handed over at once", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate } = yield* settledSetup
      calls.entered = 0
      calls.holdFirst = yield* Deferred.make<void>()
      const first = yield* initiate("0.1")
      const worker = yield* Effect.forkChild(OutboxWorker.run(options))
      yield* turnsUntil(() => calls.entered === 1)
      // The first transfer's provider call is held. A second transfer is approved; the worker, idle for lack of
      // anything else due, looks again after its pause.
      const second = yield* initiate("0.2")
      yield* pauses(10, Effect.sync(() => calls.submitted.length === 1))
      const [held] = yield* entriesOf(first.id)
      const [handed] = yield* entriesOf(second.id)
      assert.deepStrictEqual(calls.submitted, [handed?.id])
      assert.deepStrictEqual([held?.state, handed?.state], ["pending", "done"])
      yield* Deferred.succeed(calls.holdFirst, undefined)
      yield* turnsUntil(() => calls.submitted.length === 2)
      assert.deepStrictEqual([...calls.submitted].sort(), [held?.id, handed?.id].sort())
      yield* Fiber.interrupt(worker)
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("under the running worker a held webhook receiver's later deliveries wait for its lane, and transfers approved meanwhile are handed over", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate, principal } = yield* settledSetup
      const slow = yield* Webhooks.subscribe(principal, { url: "https://slow.example.com/hook" })
      const { posted, receiving, release } = yield* receiverHolding(slow.url)
      yield* initiate("0.1")
      const worker = yield* Effect.forkChild(OutboxWorker.run(options).pipe(receiving))
      yield* turnsUntil(() => posted.length === 1 && calls.submitted.length === 1)
      // The receiver holds its first delivery; each transfer approved now, with deliveries of its own to that
      // receiver, is handed over after the worker's pause, however many there are.
      for (const amount of ["0.2", "0.3"]) {
        const handed = calls.submitted.length
        yield* initiate(amount)
        yield* pauses(10, Effect.sync(() => calls.submitted.length === handed + 1))
        assert.strictEqual(calls.submitted.length, handed + 1, `the transfer of ${amount}`)
      }
      // Never a second delivery to it while the first is out.
      assert.deepStrictEqual(posted, [slow.url])
      yield* Deferred.succeed(release, undefined)
      const pending = Effect.map(Webhooks.deliveries(principal, slow.id, 100), (all) => all.filter((d) => d.state !== "delivered").length)
      yield* pauses(50, Effect.map(pending, (n) => n === 0))
      assert.strictEqual(yield* pending, 0)
      yield* Fiber.interrupt(worker)
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("a client at its share of the deliveries' places: when one of its lanes ends, its deliveries skipped meanwhile are leased at once, not after the worker's pause", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate, principal } = yield* settledSetup
      const slow = yield* Webhooks.subscribe(principal, { url: "https://slow.example.com/hook", eventTypes: ["transaction.initiated"] })
      const { posted, receiving, release } = yield* receiverHolding(slow.url)
      yield* initiate("0.1")
      // Two places: the client's share is one, which its slow receiver holds.
      const worker = yield* Effect.forkChild(OutboxWorker.run({ ...options, concurrency: 2 }).pipe(receiving))
      yield* turnsUntil(() => posted.length === 1)
      const healthy = yield* Webhooks.subscribe(principal, { url: "https://healthy.example.com/hook", eventTypes: ["transaction.initiated"] })
      yield* initiate("0.2")
      // Leases skip the client meanwhile, and find nothing else due: the pool goes quiet.
      yield* pauses(3)
      assert.deepStrictEqual(posted, [slow.url])
      yield* Deferred.succeed(release, undefined)
      // The clock stands still from here: only the lane's end can wake the pool before its quiet ends.
      yield* turnsUntil(() => posted.includes(healthy.url))
      assert.include(posted, healthy.url)
      yield* Fiber.interrupt(worker)
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("receivers that never answer, on more subscriptions than the worker has places, never hold up a transfer: deliveries and the provider's effects have pools of their own", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate, principal } = yield* settledSetup
      const { posted, transport: dead } = receivers(() => Effect.never)
      for (let n = 0; n < options.concurrency + 2; n++) yield* Webhooks.subscribe(principal, { url: `https://dead-${n}.example.com/hook` })
      yield* initiate("0.1")
      const worker = yield* Effect.forkChild(OutboxWorker.run(options).pipe(dead))
      const share = Math.floor(options.concurrency / 2)
      yield* pauses(10, Effect.sync(() => posted.length === share))
      // The client's share of the deliveries' places is held by receivers that never answer.
      assert.strictEqual(posted.length, share)
      const handed = calls.submitted.length
      const second = yield* initiate("0.2")
      yield* pauses(10, Effect.sync(() => calls.submitted.length === handed + 1))
      const [submission] = yield* entriesOf(second.id)
      assert.strictEqual(submission?.state, "done")
      assert.strictEqual(posted.length, share)
      yield* Fiber.interrupt(worker)
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("one client's receivers that never answer, on more subscriptions than the worker has places, hold at most its share of them: another client's deliveries go out meanwhile", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const silent = yield* setup
      const other = yield* setup
      yield* settleAll
      const { posted, transport } = receivers((url) => (url.includes("dead") ? Effect.never : Effect.succeed({ status: 200 })))
      for (let n = 0; n < options.concurrency + 4; n++) yield* Webhooks.subscribe(silent.principal, { url: `https://dead-${n}.example.com/hook` })
      const live = yield* Webhooks.subscribe(other.principal, { url: "https://live.example.com/hook" })
      yield* silent.initiate("0.1")
      const worker = yield* Effect.forkChild(OutboxWorker.run(options).pipe(transport))
      yield* pauses(10, Effect.sync(() => posted.length >= 2))
      yield* other.initiate("0.1")
      const delivered = Effect.map(Webhooks.deliveries(other.principal, live.id, 100), (all) => all.length > 0 && all.every((d) => d.state === "delivered"))
      yield* pauses(20, delivered)
      assert.isTrue(yield* delivered, "the other client's deliveries went out")
      // The silent client never held more than its share: the rest of its receivers were not even called.
      assert.strictEqual(posted.filter((url) => url.includes("dead")).length, Math.floor(options.concurrency / 2))
      yield* Fiber.interrupt(worker)
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("a lane of deliveries stops at its first failed attempt: its other deliveries, to the same receiver, are released and held until one goes out", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate, principal } = yield* settledSetup
      const { posted, transport: failing } = receivers(() => Effect.succeed({ status: 500 }))
      const subscription = yield* Webhooks.subscribe(principal, { url: "https://down.example.com/hook", eventTypes: ["transaction.initiated"] })
      // Three records, one delivery each: none waits for another.
      for (const amount of ["0.1", "0.2", "0.3"]) yield* initiate(amount)
      yield* OutboxWorker.runDue(options).pipe(failing)
      assert.strictEqual(posted.length, 1, "one attempt at the receiver, not one per delivery")
      const log = yield* Webhooks.deliveries(principal, subscription.id, 100)
      assert.deepStrictEqual(log.map((d) => d.attempts).sort(), [0, 0, 1])
      const entries = (yield* Storage.run("read", (unit) => Effect.forEach(log, (d) => unit.listOutboxEntries(d.id))))
        .flat().filter((entry) => entry.kind === "deliverWebhook")
      const tried = entries.find((entry) => entry.attempts === 1)
      assert.isDefined(tried)
      for (const entry of entries) {
        // Released, not left leased for the rest of a lease; the others held behind the one that failed.
        assert.strictEqual(entry.leasedUntil, null)
        if (entry.id !== tried?.id) assert.strictEqual(entry.nextAttemptAt, Outbox.HELD)
      }
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("a failed delivery holds its subscription's others, those queued later too, past what one lease took, until one goes out; then all go, in order", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate, principal, receiver, posted, transport, subscription } = yield* downReceiver
      for (const amount of ["0.1", "0.2", "0.3", "0.4", "0.5", "0.6"]) yield* initiate(amount)
      // A lease of two: four of the subscription's six deliveries are not leased with the one that fails.
      const small = { ...options, batch: 2 }
      yield* OutboxWorker.runDue(small).pipe(transport)
      assert.strictEqual(posted.length, 1)
      const entriesNow = Effect.gen(function*() {
        const log = yield* Webhooks.deliveries(principal, subscription.id, 100)
        return (yield* Storage.run("read", (unit) => Effect.forEach(log, (d) => unit.listOutboxEntries(d.id)))).flat()
      })
      const tried = (yield* entriesNow).find((entry) => entry.attempts === 1)!
      assert.isDefined(tried)
      const held = (yield* entriesNow).filter((entry) => entry.id !== tried.id)
      assert.deepStrictEqual(held.map((entry) => entry.nextAttemptAt), held.map(() => Outbox.HELD), "held, not due")
      // A delivery queued while it is held is held too.
      yield* initiate("0.7")
      assert.strictEqual((yield* entriesNow).filter((entry) => entry.nextAttemptAt === Outbox.HELD).length, 6)
      const now = Timestamp.fromMillis(yield* Clock.currentTimeMillis)
      assert.deepStrictEqual((yield* Storage.run("read", (unit) => unit.dueOutboxEntries(now, 100, [], { pool: "deliveries" }))).length, 0)
      // Until its retry, rounds call the receiver no more; at its retry, only the failed one is tried.
      yield* OutboxWorker.runDue(small).pipe(transport)
      assert.strictEqual(posted.length, 1)
      yield* TestClock.adjust(Date.parse(tried.nextAttemptAt) - Date.parse(now))
      yield* OutboxWorker.runDue(options).pipe(transport)
      assert.strictEqual(posted.length, 2)
      // The receiver is back: its retry goes out, and everything held comes due and goes, oldest first.
      receiver.up = true
      const retried = (yield* entriesNow).find((entry) => entry.id === tried.id)!
      yield* TestClock.adjust(Date.parse(retried.nextAttemptAt) - (yield* Clock.currentTimeMillis))
      for (let round = 0; round < 4; round++) yield* OutboxWorker.runDue(options).pipe(transport)
      assert.strictEqual(posted.length, 2 + 7)
      const log = yield* Webhooks.deliveries(principal, subscription.id, 100)
      assert.deepStrictEqual(log.map((d) => d.state), log.map(() => "delivered"))
      assert.isFalse((yield* Storage.run("read", (unit) => unit.getWebhookSubscription(subscription.id))).pipe(Option.getOrThrow).deliveriesHeld)
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("deliveries leased with a failed one are given back held only if their subscription still holds them: resumed meanwhile on another node, they come due", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate, principal, receiver, posted, transport, subscription } = yield* downReceiver
      for (const amount of ["0.1", "0.2", "0.3"]) yield* initiate(amount)
      // One lease takes all three; the first fails and holds the subscription; another node resumes it before this
      // node gives back the other two.
      yield* OutboxWorker.runDue(options).pipe(transport)
      assert.strictEqual(posted.length, 1)
      const log = yield* Webhooks.deliveries(principal, subscription.id, 100)
      const entries = (yield* Storage.run("read", (unit) => Effect.forEach(log, (d) => unit.listOutboxEntries(d.id)))).flat()
      const tried = entries.find((entry) => entry.attempts === 1)!
      // Nothing holds them: they are due with the failed one's retry, and all three go out then.
      receiver.up = true
      yield* TestClock.adjust(Date.parse(tried.nextAttemptAt) - (yield* Clock.currentTimeMillis))
      yield* OutboxWorker.runDue(options).pipe(transport)
      assert.strictEqual(posted.length, 4, "the two given back are due, not held with nothing left to resume them")
    }).pipe(Effect.provide(worldResumedElsewhere(calls)))
  })

  it.effect("a redelivery of an earlier event to a held subscription is not held: the failed delivery of its record, which waits for it, goes out once the receiver is back", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate, principal } = yield* settledSetup
      let answered = 0
      let up = false
      // The first delivery goes out, the second (the same record's later event) fails: the subscription holds.
      const { transport } = receivers(() => Effect.succeed({ status: up || answered++ === 0 ? 204 : 500 }))
      const subscription = yield* Webhooks.subscribe(principal, { url: "https://flaky.example.com/hook", eventTypes: ["transaction.initiated", "transaction.quorum_reached"] })
      yield* initiate("0.1")
      yield* OutboxWorker.runDue(options).pipe(transport)
      assert.isTrue((yield* Storage.run("read", (unit) => unit.getWebhookSubscription(subscription.id))).pipe(Option.getOrThrow).deliveriesHeld)
      const first = (yield* Webhooks.deliveries(principal, subscription.id, 100)).find((d) => d.state === "delivered")!
      // Its event is earlier in the log than the failed one's: held, the failed one would wait for it for good.
      yield* Webhooks.redeliver(principal, subscription.id, { eventId: first.eventId })
      up = true
      for (let round = 0; round < 10; round++) {
        yield* TestClock.adjust("1 minute")
        yield* OutboxWorker.runDue(options).pipe(transport)
      }
      const log = yield* Webhooks.deliveries(principal, subscription.id, 100)
      assert.deepStrictEqual(log.map((d) => d.state), ["delivered", "delivered", "delivered"])
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("housekeeping brings due the held deliveries of a subscription that holds none (a hold and a resumption that raced)", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate, principal } = yield* settledSetup
      const subscription = yield* Webhooks.subscribe(principal, { url: "https://hooks.example.com/hook", eventTypes: ["transaction.initiated"] })
      const { posted, transport } = receivers(() => Effect.succeed({ status: 204 }))
      // The worker's first round keeps house at once; the next is ten minutes later.
      const worker = yield* Effect.forkChild(OutboxWorker.run(options).pipe(transport))
      yield* pauses(2)
      // As a race leaves it: the entry held, the subscription holding nothing (the worker sleeps until the clock moves).
      yield* initiate("0.1")
      const [delivery] = yield* Webhooks.deliveries(principal, subscription.id, 100)
      yield* Storage.run("write", (unit) =>
        Effect.flatMap(unit.listOutboxEntries(delivery!.id), ([entry]) => unit.updateOutboxEntry({ ...entry!, nextAttemptAt: Outbox.HELD })))
      yield* pauses(5)
      assert.deepStrictEqual(posted, [], "held, so not delivered before housekeeping")
      yield* TestClock.adjust("11 minutes")
      yield* pauses(5, Effect.sync(() => posted.length === 1))
      assert.strictEqual(posted.length, 1)
      yield* Fiber.interrupt(worker)
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("a subscription turned off while its deliveries are held: they come due and are skipped, as every delivery due while it is off", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate, principal } = yield* settledSetup
      const { posted, transport } = receivers(() => Effect.succeed({ status: 500 }))
      const subscription = yield* Webhooks.subscribe(principal, { url: "https://down.example.com/hook", eventTypes: ["transaction.initiated"] })
      for (const amount of ["0.1", "0.2", "0.3"]) yield* initiate(amount)
      yield* OutboxWorker.runDue(options).pipe(transport)
      yield* Webhooks.setEnabled(principal, subscription.id, false)
      yield* OutboxWorker.runDue(options).pipe(transport)
      assert.strictEqual(posted.length, 1)
      const states = (yield* Webhooks.deliveries(principal, subscription.id, 100)).map((d) => d.state).sort()
      assert.deepStrictEqual(states, ["pending", "skipped", "skipped"])
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("a delivery waiting for an earlier one of its record looks again after a fifth of its wait, up to 30 s, and its log says what it waits for", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate, principal } = yield* settledSetup
      const { transport: failing } = receivers(() => Effect.succeed({ status: 500 }))
      const subscription = yield* Webhooks.subscribe(principal, { url: "https://down.example.com/hook", eventTypes: ["transaction.initiated", "transaction.quorum_reached"] })
      yield* initiate("0.1")
      // The first delivery fails, and holds the second; it comes due as when another node's delivery to the
      // subscription went out meanwhile.
      yield* OutboxWorker.runDue(options).pipe(failing)
      yield* Storage.run("write", (unit) => Effect.flatMap(Timestamp.now, (now) => unit.resumeLane(subscription.id, now)))
      yield* TestClock.adjust("10 minutes")
      const log = yield* Webhooks.deliveries(principal, subscription.id, 100)
      const entries = () => Effect.map(Storage.run("read", (unit) => Effect.forEach(log, (d) => unit.listOutboxEntries(d.id))), (found) => found.flat())
      // Past the retry, the first is out with another node (leased): the second, leased alone, waits behind it.
      const first = (yield* entries()).find((entry) => entry.attempts === 1)
      assert.isDefined(first)
      const leasedUntil = Timestamp.fromMillis((yield* Clock.currentTimeMillis) + 60_000)
      yield* Storage.run("write", (unit) => unit.updateOutboxEntry({ ...first!, leasedUntil }))
      yield* OutboxWorker.runDue(options).pipe(failing)
      const waiting = (yield* entries()).find((entry) => entry.attempts === 0)
      assert.isDefined(waiting)
      const now = yield* Clock.currentTimeMillis
      const waited = now - Date.parse(waiting?.createdAt ?? "")
      assert.strictEqual(Date.parse(waiting?.nextAttemptAt ?? "") - now, Math.min(Webhooks.WAITING_LOOK_CEILING_MILLIS, Math.round(waited / 5)))
      assert.include((yield* Webhooks.deliveries(principal, subscription.id, 100)).map((d) => d.lastError), "waits for an earlier delivery of the same record to this subscription")
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("a worker that stops gives back the leases of what it leased and had not begun, for another node to take at once; the call under way keeps its own", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate } = yield* settledSetup
      calls.begun = 0
      calls.gate = yield* Deferred.make<void>()
      const transfers = [yield* initiate("0.1"), yield* initiate("0.2"), yield* initiate("0.3")]
      const worker = yield* Effect.forkChild(OutboxWorker.run({ ...options, concurrency: 1 }))
      yield* pauses(5, Effect.sync(() => calls.begun === 1))
      assert.strictEqual(calls.begun, 1)
      const leased = Effect.map(Effect.forEach(transfers, (tx) => entriesOf(tx.id)), (all) => all.flat().map((entry) => entry.leasedUntil !== null))
      assert.deepStrictEqual(yield* leased, [true, true, true])
      // A rolling restart: the worker is stopped while the provider holds the first call.
      yield* Fiber.interrupt(worker)
      // Without it the other two would wait out their lease, a minute, before any node took them.
      assert.deepStrictEqual(yield* leased, [true, false, false])
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("a lease given back is only the one the worker was given: once it ran out and another worker leased the entry, that worker's lease stays", () =>
    Effect.gen(function*() {
      const { initiate } = yield* settledSetup
      const tx = yield* initiate("0.1")
      /** What a worker's lease writes, and the entries as it then holds them (each carrying its lease). */
      const lease = Effect.gen(function*() {
        const nowMillis = yield* Clock.currentTimeMillis
        const now = Timestamp.fromMillis(nowMillis)
        return yield* Storage.run("write", (unit) =>
          Effect.gen(function*() {
            const due = yield* unit.dueOutboxEntries(now, 16, [], { pool: "provider" })
            const held = due.map((entry) => ({ ...entry, leasedUntil: Timestamp.fromMillis(nowMillis + options.leaseMillis), updatedAt: now }))
            for (const entry of held) yield* unit.updateOutboxEntry(entry)
            return held
          }))
      })
      const byA = yield* lease
      assert.deepStrictEqual(byA.map((entry) => entry.subjectId), [tx.id])
      // A's lease runs out before A begins it; B leases it and carries it out.
      yield* TestClock.adjust(options.leaseMillis + 1)
      assert.strictEqual((yield* lease).length, 1)
      // A, stopping, gives back what it had leased and not begun: not B's lease.
      yield* Storage.run("write", (unit) => Outbox.release(unit, byA))
      yield* TestClock.adjust(1)
      assert.strictEqual((yield* lease).length, 0, "the entry B holds was leased again after A's release")
    }).pipe(Effect.provide(world(answering()))))

  it.effect("deliveries written before entries named their lane (their client's lane): one receiver's failure does not hold back another's", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate, principal } = yield* settledSetup
      const { posted, transport } = receivers((url) => Effect.succeed({ status: url.includes("down") ? 500 : 200 }))
      yield* Webhooks.subscribe(principal, { url: "https://down.example.com/hook", eventTypes: ["transaction.initiated"] })
      const healthy = yield* Webhooks.subscribe(principal, { url: "https://healthy.example.com/hook", eventTypes: ["transaction.initiated"] })
      yield* initiate("0.1")
      // As migration 9 leaves deliveries written before it: no lane of their own.
      const deliveries = yield* Storage.run("read", (unit) => unit.dueOutboxEntries(Timestamp.fromMillis(Date.UTC(2100, 0, 1)), 100, [], { pool: "deliveries" }))
      yield* Storage.run("write", (unit) => Effect.forEach(deliveries, (entry) => unit.updateOutboxEntry({ ...entry, lane: null }), { discard: true }))
      yield* OutboxWorker.runDue(options).pipe(transport)
      assert.include(posted, healthy.url)
      assert.deepStrictEqual((yield* Webhooks.deliveries(principal, healthy.id, 10)).map((d) => d.state), ["delivered"])
    }).pipe(Effect.provide(world(calls)))
  })

  it("the worker's options: a setting left out never refuses one given (places may outnumber a lease's batch; a first delay above the cap is the cap)", () => {
    assert.strictEqual(OutboxWorker.optionsOf({ batch: 2 }).concurrency, OutboxWorker.defaults.concurrency)
    assert.strictEqual(OutboxWorker.optionsOf({ baseBackoffMillis: 9 * 3600_000 }).maxBackoffMillis, OutboxWorker.defaults.maxBackoffMillis)
    assert.throws(() => OutboxWorker.optionsOf({ concurrency: 0 }), /outbox\.concurrency must be a whole number at least 1, got 0/)
  })

  it.effect("the running worker carries out at most `concurrency` lanes at once, however many are due", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate } = yield* settledSetup
      calls.begun = 0
      calls.gate = yield* Deferred.make<void>()
      for (const amount of ["0.1", "0.2", "0.3", "0.4", "0.5"]) yield* initiate(amount)
      const worker = yield* Effect.forkChild(OutboxWorker.run({ ...options, concurrency: 2 }))
      yield* pauses(5)
      assert.strictEqual(calls.begun, 2)
      yield* Deferred.succeed(calls.gate, undefined)
      yield* turnsUntil(() => calls.submitted.length === 5)
      assert.strictEqual(calls.submitted.length, 5)
      yield* Fiber.interrupt(worker)
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("a slow webhook receiver holds up only its own subscription's deliveries: the same client's other subscription's go out meanwhile", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate, principal } = yield* setup
      // The setup's own entries carried out first: the round below leases the transfer's and its deliveries only.
      yield* settleAll
      const slow = yield* Webhooks.subscribe(principal, { url: "https://slow.example.com/hook" })
      const fast = yield* Webhooks.subscribe(principal, { url: "https://fast.example.com/hook" })
      yield* initiate("0.1")
      const { posted, receiving, release } = yield* receiverHolding(slow.url)
      const deliveries = (subscription: { readonly id: string }) => Webhooks.deliveries(principal, subscription.id, 100)
      // What the round leases: the deliveries written so far (the transfer's submission in the round appends more).
      const leased = new Set([...(yield* deliveries(slow)), ...(yield* deliveries(fast))].map((d) => d.id))
      const stateOf = (subscription: { readonly id: string }) =>
        Effect.map(deliveries(subscription), (all) => all.filter((d) => leased.has(d.id)).map((d) => d.state))
      const worker = yield* Effect.forkChild(OutboxWorker.runDue(options).pipe(receiving))
      let fastStates = yield* stateOf(fast)
      for (let turn = 0; turn < 1000 && fastStates.includes("pending"); turn++) {
        yield* Effect.yieldNow
        fastStates = yield* stateOf(fast)
      }
      // The slow receiver's first delivery is still in flight; every delivery to the other one went out beside it.
      assert.isAbove(fastStates.length, 1)
      assert.deepStrictEqual(fastStates, fastStates.map(() => "delivered"))
      assert.deepStrictEqual(posted.filter((url) => url === slow.url), [slow.url])
      assert.notInclude(yield* stateOf(slow), "delivered")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(worker)
      yield* OutboxWorker.drain(options).pipe(receiving)
      for (const subscription of [slow, fast]) {
        const all = yield* deliveries(subscription)
        assert.deepStrictEqual(all.map((d) => d.state), all.map(() => "delivered"))
      }
    }).pipe(Effect.provide(world(calls)))
  })

  it("a round's lanes: one subscription's webhook deliveries in one lane, in lease order; every other entry alone", () => {
    const at = "2026-11-28T00:00:00.000Z" as Outbox.OutboxEntry["createdAt"]
    const entry = (id: string, kind: Outbox.EffectKind, clientId: string, lane: string | null = null): Outbox.OutboxEntry => ({
      id, kind, clientId: clientId as Outbox.OutboxEntry["clientId"], subjectId: `subject of ${id}`, lane, state: "pending", attempts: 0,
      nextAttemptAt: at, leasedUntil: null, lastError: null, createdAt: at, updatedAt: at
    })
    const round = [
      entry("1", "deliverWebhook", "a", "subscription a1"),
      entry("2", "submitTransfer", "a"),
      entry("3", "deliverWebhook", "b", "subscription b1"),
      entry("4", "deliverWebhook", "a", "subscription a1"),
      entry("5", "submitTransfer", "a"),
      entry("6", "followWhitelistedAddress", "b"),
      entry("7", "deliverWebhook", "a", "subscription a2"),
      // Written before entries named their lane: their client's.
      entry("8", "deliverWebhook", "a"),
      entry("9", "deliverWebhook", "a")
    ]
    assert.deepStrictEqual(OutboxWorker.lanesOf(round).map((lane) => lane.map((e) => e.id)), [["1", "4"], ["2"], ["3"], ["5"], ["6"], ["7"], ["8", "9"]])
  })

  it.effect("a provider call that outlasts half its lease is abandoned as a failed attempt, before another worker could take it", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { initiate } = yield* setup
      const tx = yield* initiate("0.1")
      calls.gate = yield* Deferred.make<void>()
      const worker = yield* Effect.forkChild(OutboxWorker.runDue(options))
      yield* TestClock.adjust(options.leaseMillis / 2 + 1)
      yield* Fiber.join(worker)
      const [entry] = yield* entriesOf(tx.id)
      assert.deepStrictEqual([entry?.state, entry?.attempts, entry?.leasedUntil], ["pending", 1, null])
      assert.match(entry?.lastError ?? "", /no answer within/)
      yield* Deferred.succeed(calls.gate, undefined)
      yield* settleAll
      assert.deepStrictEqual(calls.submitted, [entry?.id])
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("an entry its lane reaches half a lease or more after leasing is left for a later round, never carried out past its lease", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { first, second } = yield* twoTransfers
      calls.holdFirst = yield* Deferred.make<void>()
      // One lane at a time: the second transfer's submission waits behind the first's held call.
      const worker = yield* Effect.forkChild(OutboxWorker.runDue({ ...options, concurrency: 1 }))
      yield* TestClock.adjust(options.leaseMillis / 2 + 1)
      yield* Fiber.join(worker)
      // The first call was abandoned at half the lease; the second was never made.
      assert.strictEqual(calls.entered, 1)
      const [abandoned] = yield* entriesOf(first.id)
      const [left] = yield* entriesOf(second.id)
      assert.deepStrictEqual([abandoned?.state, abandoned?.attempts], ["pending", 1])
      assert.deepStrictEqual([left?.state, left?.attempts], ["pending", 0])
      // Once its lease has run out, a later round carries it out.
      yield* Deferred.succeed(calls.holdFirst, undefined)
      yield* settleAll
      assert.deepStrictEqual([...calls.submitted].sort(), [abandoned?.id, left?.id].sort())
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("a submission no attempt of which was answered is not given up: its funds stay reserved, and it goes through once the provider answers", () => {
    const calls: ProviderCalls = { submitted: [], failuresLeft: 1000, gate: undefined }
    const { layer: logging, lines } = capturedLogs()
    return Effect.gen(function*() {
      const { initiate, source } = yield* setup
      const tx = yield* initiate("0.1")
      const reserved = (yield* Accounts.inspect(source)).availableBalance
      // Three times the attempts after which another effect is given up, the last ones a minute apart.
      for (let round = 0; round < 3 * options.maxAttempts; round++) {
        yield* OutboxWorker.runDue(options)
        yield* TestClock.adjust("2 minutes")
      }
      const [entry] = yield* entriesOf(tx.id)
      assert.strictEqual(entry?.state, "pending")
      assert.isAtLeast(entry?.attempts ?? 0, 2 * options.maxAttempts)
      assert.match(entry?.lastError ?? "", /provider unavailable/)
      // The provider may hold the order: the transfer stays open and its funds reserved.
      assert.strictEqual((yield* Transactions.inspect(tx.id)).status, "PENDING_PROVIDER_APPROVAL")
      assert.strictEqual((yield* Accounts.inspect(source)).availableBalance, reserved)
      // Past its attempts, each failure is an error for an operator to look at.
      assert.isTrue(lines.some((line) => line.level === "ERROR" && String(line.message).includes("still unanswered after its attempts")))
      // The provider answers: the same request id goes through, once.
      calls.failuresLeft = 0
      yield* settleAll
      assert.deepStrictEqual(calls.submitted, [entry?.id])
      assert.isNotNull((yield* Transactions.inspect(tx.id)).providerTransactionId)
      assert.strictEqual((yield* Accounts.inspect(source)).availableBalance, reserved)
      assert.isTrue((yield* Reconciliation.reconcileAccount(source)).consistent)
    }).pipe(Effect.provide(world(calls)), Effect.provide(logging))
  })

  it.effect("TXN-FLOW-1: following a submitted transfer is not given up while the provider's status goes unanswered: its funds stay reserved, and it completes once the provider answers", () => {
    const down = { progress: true }
    const lifecycle = { policyMillis: 1000, broadcastMillis: 1000, confirmationMillis: 1000 }
    const statusDown = Layer.effectContext(Effect.gen(function*() {
      const simulated = yield* CustodyProvider.CustodyProvider
      const controls = yield* CustodyProvider.SimulatedProviderControls
      return Context.make(CustodyProvider.CustodyProvider, {
        ...simulated,
        transferProgress: (id: string) =>
          down.progress ? Effect.fail(new RelayError.CustodyProviderFailed({ operation: "transferProgress", detail: "status endpoint down" })) : simulated.transferProgress(id)
      }).pipe(Context.add(CustodyProvider.SimulatedProviderControls, controls))
    })).pipe(Layer.provide(CustodyProvider.layerSimulated({ lifecycle })))
    const statusWorld = Relay.layerMemory({ ids: Ids.Ids.layerSequential, provider: statusDown }).pipe(
      Layer.provideMerge(Layer.succeed(RelayConfig.RelayConfig, { ...RelayConfig.RelayConfig.defaultValue(), defaultRequiredApprovals: 0 }))
    )
    return Effect.gen(function*() {
      const { initiate, source } = yield* setup
      const tx = yield* initiate("0.1")
      const reserved = (yield* Accounts.inspect(source)).availableBalance
      // Three times the attempts after which another effect is given up.
      for (let round = 0; round < 3 * options.maxAttempts; round++) {
        yield* OutboxWorker.runDue(options)
        yield* TestClock.adjust("2 minutes")
      }
      const follow = (yield* entriesOf(tx.id)).find((entry) => entry.kind === "followTransfer")
      assert.strictEqual(follow?.state, "pending", "given up, nothing would ever ask where the transfer stands")
      assert.isAtLeast(follow?.attempts ?? 0, 2 * options.maxAttempts)
      assert.strictEqual((yield* Transactions.inspect(tx.id)).status, "PENDING_PROVIDER_APPROVAL")
      assert.strictEqual((yield* Accounts.inspect(source)).availableBalance, reserved)
      down.progress = false
      for (let round = 0; round < 10 && (yield* Transactions.inspect(tx.id)).status !== "COMPLETED"; round++) {
        yield* OutboxWorker.runDue(options)
        yield* TestClock.adjust("2 minutes")
      }
      assert.strictEqual((yield* Transactions.inspect(tx.id)).status, "COMPLETED")
      assert.isTrue((yield* Reconciliation.reconcileAccount(source)).consistent)
    }).pipe(Effect.provide(statusWorld))
  })

  it.effect("a submission the provider accepts after an operator closed its transfer is logged as an error, with both ids", () => {
    const calls = answering()
    const { layer: logging, lines } = capturedLogs()
    return Effect.gen(function*() {
      const { initiate } = yield* setup
      calls.gate = yield* Deferred.make<void>()
      const tx = yield* initiate("0.1")
      const worker = yield* Effect.forkChild(OutboxWorker.runDue(options))
      yield* Effect.yieldNow
      // While the call is out, an operator fails the transfer; then the provider takes the order.
      yield* Transactions.applyProviderEvent(tx.id, "fail", "PROVIDER_ERROR")
      yield* Deferred.succeed(calls.gate, undefined)
      yield* Fiber.join(worker)
      const said = lines.filter((line) => line.level === "ERROR")
      assert.deepStrictEqual(said.map((line) => line.message), ["the provider accepted a transfer the relay had already closed; settle it with the provider"])
      assert.strictEqual(said[0]?.annotations["transaction"], tx.id)
      assert.isString(said[0]?.annotations["providerTransactionId"])
    }).pipe(Effect.provide(world(calls)), Effect.provide(logging))
  })

  it.effect("WL-STATE-1: a registration carried out twice (a worker past its lease beside the one that took it over) records it once and follows the review once", () => {
    const calls = answering()
    const lifecycle = { policyMillis: 0, broadcastMillis: 0, confirmationMillis: 0, addressReviewMillis: 3_600_000, failureShare: 0 }
    return Effect.gen(function*() {
      const { principal } = yield* setup
      const address = yield* WhitelistedAddresses.create(principal, { name: "Twice", address: validAddress("BTC"), assetType: "BTC" })
      const [registration] = yield* entriesOf(address.id)
      assert.strictEqual(registration?.kind, "registerWhitelistedAddress")
      // Both workers call the provider with the entry's request id, and each records what it answered.
      yield* WhitelistedAddresses.registerAtProvider(registration!)
      yield* WhitelistedAddresses.registerAtProvider(registration!)
      const entries = yield* entriesOf(address.id)
      assert.deepStrictEqual(entries.map((entry) => entry.kind), ["registerWhitelistedAddress", "followWhitelistedAddress"])
      const events = yield* Storage.run("read", (unit) => unit.listEvents({ entityId: address.id }, 0, 100))
      assert.strictEqual(events.filter((event) => event.type === "whitelisted_address.registered").length, 1)
    }).pipe(Effect.provide(world(calls, lifecycle)))
  })

  it.effect("the provider's refusal of a submission gives it up at once: the transfer fails (PROVIDER_ERROR) and releases its funds", () => {
    const calls: ProviderCalls = { submitted: [], failuresLeft: 1000, gate: undefined, refuse: true }
    return Effect.gen(function*() {
      const { initiate, source } = yield* setup
      const before = (yield* Accounts.inspect(source)).availableBalance
      const tx = yield* initiate("0.1")
      yield* settleAll
      const [entry] = yield* entriesOf(tx.id)
      assert.deepStrictEqual([entry?.state, entry?.attempts], ["given_up", 1])
      assert.match(entry?.lastError ?? "", /refused: destination not served/)
      const failed = yield* Transactions.inspect(tx.id)
      assert.deepStrictEqual([failed.status, failed.subStatus], ["FAILED", "PROVIDER_ERROR"])
      assert.strictEqual((yield* Accounts.inspect(source)).availableBalance, before)
      const reconciled = yield* Reconciliation.reconcileAccount(source)
      assert.isTrue(reconciled.consistent)
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("TXN-FLOW-1 WL-STATE-1: the live simulated provider completes a transfer and approves an address, each step an event", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { tx, entry } = yield* transferAndAddress
      assert.strictEqual((yield* Transactions.inspect(tx.id)).status, "COMPLETED")
      const events = yield* Storage.run("read", (unit) => unit.listEvents({ entityId: tx.id }, 0, 100))
      assert.deepStrictEqual(events.map((e) => e.type), [
        "transaction.initiated",
        "transaction.quorum_reached",
        "transaction.submitted",
        "transaction.provider_approved",
        "transaction.broadcast",
        "transaction.completed"
      ] satisfies ReadonlyArray<DomainEvent.EventType>)
      const entryEvents = yield* Storage.run("read", (unit) => unit.listEvents({ entityId: entry.id }, 0, 100))
      assert.deepStrictEqual(entryEvents.map((e) => e.type).at(-1), "whitelisted_address.approved")
      const follows = (yield* entriesOf(tx.id)).map((e) => [e.kind, e.state])
      assert.deepStrictEqual(follows, [["submitTransfer", "done"], ["followTransfer", "done"]] satisfies ReadonlyArray<[Outbox.EffectKind, Outbox.EntryState]>)
    }).pipe(Effect.provide(world(calls, { policyMillis: 1000, broadcastMillis: 1000, confirmationMillis: 1000, addressReviewMillis: 1000 })))
  })

  it.effect("a pushed report (the provider's callback, named by its request id) moves the transfer and the address, as events", () => {
    const calls = answering()
    return Effect.gen(function*() {
      const { tx, entry, principal } = yield* transferAndAddress
      // A pushed provider is never polled: only the submission and the registration ran.
      const [submission] = yield* entriesOf(tx.id)
      const [registration] = yield* entriesOf(entry.id)
      assert.deepStrictEqual([(yield* entriesOf(tx.id)).length, (yield* entriesOf(entry.id)).length], [1, 1])
      yield* ProviderReports.apply({ kind: "transfer", requestId: submission!.id, progress: { stage: "broadcast" } })
      assert.strictEqual((yield* Transactions.inspect(tx.id)).status, "CONFIRMING")
      // A report behind the transaction changes nothing.
      yield* ProviderReports.apply({ kind: "transfer", requestId: submission!.id, progress: { stage: "signed" } })
      yield* ProviderReports.apply({ kind: "transfer", requestId: submission!.id, progress: { stage: "completed" } })
      assert.strictEqual((yield* Transactions.inspect(tx.id)).status, "COMPLETED")
      const events = yield* Storage.run("read", (unit) => unit.listEvents({ entityId: tx.id }, 0, 100))
      assert.deepStrictEqual(events.slice(-3).map((e) => [e.type, e.actor.kind]), [
        ["transaction.provider_approved", "provider"],
        ["transaction.broadcast", "provider"],
        ["transaction.completed", "provider"]
      ])
      yield* ProviderReports.apply({ kind: "address", requestId: registration!.id, review: "approved" })
      assert.strictEqual((yield* WhitelistedAddresses.get(principal, entry.id)).status, "APPROVED")
      const refused = yield* Effect.flip(ProviderReports.apply({ kind: "address", requestId: submission!.id, review: "approved" }))
      assert.strictEqual(refused._tag, "InvalidRequest")
      const unknown = yield* Effect.flip(ProviderReports.apply({ kind: "transfer", requestId: entry.id, progress: { stage: "completed" } }))
      assert.strictEqual(unknown._tag, "InvalidRequest")
    }).pipe(Effect.provide(world(calls)))
  })

  it.effect("while the database is unreachable the running worker says so once, then once a minute, in one line each; it leases less and less often, and says when it resumes", () => {
    const calls = answering()
    const outage: Outage = { down: false, refused: 0 }
    const logs = capturedLogs()
    return Effect.gen(function*() {
      const { initiate } = yield* settledSetup
      const tx = yield* initiate("0.1")
      outage.down = true
      const worker = yield* Effect.forkChild(OutboxWorker.run(options))
      const outageSeconds = 600
      for (let second = 0; second < outageSeconds; second++) {
        for (let turn = 0; turn < 20; turn++) yield* Effect.yieldNow
        yield* TestClock.adjust("1 second")
      }
      // At the idle pause (200 ms) the worker would have tried 3,000 times; it backs off to one try every 5 s.
      const ceilingSeconds = OutboxWorker.LEASE_RETRY_CEILING_MILLIS / 1000
      assert.isAtMost(outage.refused, 8 + outageSeconds / ceilingSeconds)
      assert.isAtLeast(outage.refused, outageSeconds / ceilingSeconds - 2)
      // One line at once, then one a minute: the outage's ten minutes are about eleven lines, none with a stack.
      const reminders = outageSeconds / (OutageLog.REMIND_EVERY_MILLIS / 1000)
      assert.deepStrictEqual(logs.lines.map((line) => line.level), logs.lines.map(() => "WARN"))
      assert.isAtLeast(logs.lines.length, reminders)
      assert.isAtMost(logs.lines.length, reminders + 1)
      assert.deepStrictEqual(logs.lines[0]?.message, ["outbox paused: leasing due entries failed; retrying", "StorageUnavailable: connect ECONNREFUSED 127.0.0.1:5432"])
      assert.strictEqual((logs.lines.at(-1)?.message as Array<string>)[0], "outbox still paused: leasing due entries fails")
      assert.isAbove(Number(logs.lines.at(-1)?.annotations["failures"]), 100)
      assert.notInclude(JSON.stringify(logs.lines), "    at ")
      assert.deepStrictEqual(calls.submitted, [])

      // Back: within the pause's ceiling the worker leases again, says so, and hands the transfer over once.
      outage.down = false
      const refusedInAll = outage.refused
      logs.lines.length = 0
      yield* pauses(OutboxWorker.LEASE_RETRY_CEILING_MILLIS / options.idleMillis, Effect.sync(() => calls.submitted.length === 1))
      const [entry] = yield* entriesOf(tx.id)
      assert.deepStrictEqual(calls.submitted, [entry?.id])
      const resumed = logs.lines.find((line) => line.level === "INFO")
      assert.deepStrictEqual(resumed?.message, "outbox resumed: leasing due entries again")
      assert.strictEqual(resumed?.annotations["failures"], refusedInAll)
      assert.isAtLeast(Number(resumed?.annotations["outageSeconds"]), outageSeconds)
      yield* Fiber.interrupt(worker)
    }).pipe(Effect.provide(Layer.merge(worldWithOutage(calls, outage), logs.layer)))
  })

  describe("Retention", () => {
    /** Every outbox entry and delivery about the transactions and deliveries named, as the store holds them. */
    const held = (transactionIds: ReadonlyArray<string>, subscriptionIds: ReadonlyArray<string>) =>
      Storage.run("read", (unit) =>
        Effect.gen(function*() {
          const deliveries = (yield* Effect.forEach(subscriptionIds, (id) => unit.listWebhookDeliveries(id, 1000))).flat()
          const entries = (yield* Effect.forEach([...transactionIds, ...deliveries.map((d) => d.id)], unit.listOutboxEntries)).flat()
          return { deliveries, entries }
        }))
    const ids = (rows: ReadonlyArray<{ readonly id: string }>) => rows.map((row) => row.id).sort()
    /** A settled client whose transfer went out, and whose one subscription (a receiver answering 204) got its delivery. */
    const deliveredTransfer = Effect.gen(function*() {
      const { initiate, principal } = yield* settledSetup
      const { posted, transport } = receivers(() => Effect.succeed({ status: 204 }))
      const subscription = yield* Webhooks.subscribe(principal, { url: "https://up.example.com/hook", eventTypes: ["transaction.initiated"] })
      const tx = yield* initiate("0.1")
      yield* OutboxWorker.runDue(options).pipe(transport)
      return { initiate, posted, transport, subscription, tx }
    })
    const settledBefore = (before: string) => (row: { readonly state: string; readonly updatedAt: string }) =>
      row.state !== "pending" && row.updatedAt < before
    /** An entry Retention deletes once settled before `before`: of a kind deleted once settled. */
    const prunableBefore = (before: string) => (entry: Outbox.OutboxEntry) =>
      settledBefore(before)(entry) && Outbox.deletedOnceSettled.includes(entry.kind)

    it.effect("settled outbox entries and webhook deliveries past their retention are deleted, a batch per unit, and expired idempotency keys; pending ones (held included) and newer ones stay", () => {
      const calls = answering()
      return Effect.gen(function*() {
        const { destination, initiate, principal, source } = yield* settledSetup
        const { transport } = receivers((url) => Effect.succeed({ status: url.includes("down") ? 500 : 204 }))
        const up = yield* Webhooks.subscribe(principal, { url: "https://up.example.com/hook", eventTypes: ["transaction.initiated"] })
        const down = yield* Webhooks.subscribe(principal, { url: "https://down.example.com/hook", eventTypes: ["transaction.initiated"] })
        const old = [yield* initiate("0.1"), yield* initiate("0.2")]
        old.push(yield* Idempotency.withKey(initiate("0.3"), new Idempotency.CommandKey("crk_retention", "key-1", "fingerprint")))
        // The healthy receiver gets all three; the failing one's first fails and holds the other two.
        yield* OutboxWorker.runDue(options).pipe(transport)
        // Eight days on (past the outbox's 7), a transfer whose entries and delivery settle now.
        yield* TestClock.adjust("8 days")
        const recent = yield* initiate("0.4")
        yield* OutboxWorker.runDue(options).pipe(transport)
        const now = Timestamp.fromMillis(yield* Clock.currentTimeMillis)
        const before = yield* held([source, destination, ...old.map((tx) => tx.id), recent.id], [up.id, down.id])
        const outboxCut = Timestamp.fromMillis(Date.parse(now) - 7 * 86_400_000)
        const deletable = before.entries.filter(prunableBefore(outboxCut))
        assert.isAtLeast(deletable.length, 3, "the healthy receiver's deliveries")
        assert.isTrue(before.entries.some((e) => settledBefore(outboxCut)(e) && e.kind === "submitTransfer"), "the old submissions, kept")
        assert.isTrue(before.entries.some((e) => e.state === "pending" && e.nextAttemptAt === Outbox.HELD), "held deliveries are pending")
        assert.isTrue(before.entries.some((e) => e.state !== "pending" && e.updatedAt >= outboxCut), "the recent transfer's")

        const pruned = yield* Retention.prune({ batch: 2, pauseMillis: 0 })
        const after = yield* held([source, destination, ...old.map((tx) => tx.id), recent.id], [up.id, down.id])
        assert.deepStrictEqual(pruned, { idempotencyKeys: 1, outboxEntries: deletable.length, webhookDeliveries: 0 })
        assert.deepStrictEqual(ids(after.entries), ids(before.entries.filter((e) => !prunableBefore(outboxCut)(e))))
        // Deliveries are kept 30 days: all eight still in the two logs.
        assert.deepStrictEqual(ids(after.deliveries), ids(before.deliveries))

        // Thirty-one days on (past the deliveries' 30): the four delivered go, with the recent transfer's delivery entry;
        // the failing receiver's deliveries and their entries, pending, stay however old, as do the submissions.
        yield* TestClock.adjust("31 days")
        const later = yield* Retention.prune({ batch: 2, pauseMillis: 0 })
        const last = yield* held([source, destination, ...old.map((tx) => tx.id), recent.id], [up.id, down.id])
        assert.strictEqual(later.webhookDeliveries, 4)
        assert.deepStrictEqual(last.deliveries.map((d) => [d.subscriptionId, d.state]), [[down.id, "pending"], [down.id, "pending"], [down.id, "pending"], [down.id, "pending"]])
        assert.isTrue(last.entries.every((e) => e.state === "pending" || !Outbox.deletedOnceSettled.includes(e.kind)))
        assert.strictEqual(last.entries.filter((e) => e.kind === "submitTransfer").length, 4)
        assert.deepStrictEqual(yield* Retention.prune({ batch: 2, pauseMillis: 0 }), { idempotencyKeys: 0, outboxEntries: 0, webhookDeliveries: 0 })
      }).pipe(Effect.provide(world(calls)))
    })

    it.effect("a table whose deletes fail leaves the others pruned: the pass fails after all three were tried", () => {
      const calls = answering()
      return Effect.gen(function*() {
        const { subscription, tx } = yield* deliveredTransfer
        yield* TestClock.adjust("31 days")
        const failed = yield* Effect.exit(Retention.prune())
        assert.isTrue(Exit.hasDies(failed))
        assert.include(String(failed), "connection terminated")
        const left = yield* held([tx.id], [subscription.id])
        assert.deepStrictEqual(left.deliveries, [])
        assert.deepStrictEqual(left.entries.map((e) => e.kind), ["submitTransfer"])
      }).pipe(Effect.provide(worldFailingKeyDeletes(calls)))
    })

    it("between full batches a pass rests four times as long as the batch took, at least 2 ms: deleting takes at most a fifth of the time", () => {
      assert.deepStrictEqual([0, 0.4, 1, 25].map((took) => Retention.restAfter(Retention.defaults, took)), [2, 2, 4, 100])
      assert.strictEqual(Retention.restAfter({ ...Retention.defaults, restFactor: 0 }, 25), 2)
    })

    it.effect("a retention of 0 keeps settled outbox entries and deliveries for good", () => {
      const calls = answering()
      return Effect.gen(function*() {
        const { subscription, tx } = yield* deliveredTransfer
        yield* TestClock.adjust("3650 days")
        const before = yield* held([tx.id], [subscription.id])
        assert.isTrue(before.entries.length >= 2 && before.entries.every((e) => e.state === "done"))
        assert.deepStrictEqual(yield* Retention.prune(), { idempotencyKeys: 0, outboxEntries: 0, webhookDeliveries: 0 })
        assert.deepStrictEqual(yield* held([tx.id], [subscription.id]), before)
      }).pipe(Effect.provide(world(calls, "manual", { outboxEntryRetentionSeconds: 0, webhookDeliveryRetentionSeconds: 0 })))
    })

    it.effect("the running worker's housekeeping prunes at its first lease and every 10 minutes after, and the worker carries out transfers meanwhile", () => {
      const calls = answering()
      return Effect.gen(function*() {
        const { initiate, posted, subscription, transport, tx: first } = yield* deliveredTransfer
        /** A transfer's delivery and outbox entries, by kind and state; the delivery's entry among them. */
        const left = (tx: { readonly id: string }) =>
          Effect.map(held([tx.id], [subscription.id]), ({ deliveries, entries }) => ({
            deliveries: deliveries.filter((d) => d.entityId === tx.id).map((d) => d.state),
            entries: entries.filter((e) => e.subjectId === tx.id || deliveries.some((d) => d.entityId === tx.id && d.id === e.subjectId))
              .map((e) => `${e.kind} ${e.state}`).sort()
          }))
        const settled = { deliveries: ["delivered"], entries: ["deliverWebhook done", "submitTransfer done"] }
        const pruned = { deliveries: [], entries: ["submitTransfer done"] }
        assert.deepStrictEqual(yield* left(first), settled)
        // Settled two minutes before the worker starts (the retention here is a minute): its first pass deletes them.
        yield* TestClock.adjust("2 minutes")
        const worker = yield* Effect.forkChild(OutboxWorker.run(options).pipe(transport))
        const second = yield* initiate("0.2")
        yield* pauses(5, Effect.map(left(first), (found) => found.entries.length === 1 && posted.length === 2))
        assert.deepStrictEqual(yield* left(first), pruned)
        assert.deepStrictEqual(yield* left(second), settled, "settled this minute by the running worker: kept")
        // Ten minutes on, the next pass deletes the second's.
        yield* TestClock.adjust("11 minutes")
        yield* pauses(5, Effect.map(left(second), (found) => found.entries.length === 1))
        assert.deepStrictEqual(yield* left(second), pruned)
        const third = yield* initiate("0.3")
        yield* pauses(5, Effect.sync(() => posted.length === 3))
        assert.deepStrictEqual(yield* left(third), settled)
        yield* Fiber.interrupt(worker)
      }).pipe(Effect.provide(world(calls, "manual", { outboxEntryRetentionSeconds: 60, webhookDeliveryRetentionSeconds: 60 })))
    })

    it.effect("a provider's callback long after its transfer's submission settled still moves the transfer: the entry it names is kept for good", () => {
      const calls = answering()
      return Effect.gen(function*() {
        const { initiate } = yield* settledSetup
        const tx = yield* initiate("0.1")
        yield* OutboxWorker.runDue(options)
        const [submission] = yield* entriesOf(tx.id)
        assert.deepStrictEqual([submission?.kind, submission?.state], ["submitTransfer", "done"])
        // Held in the provider's review for a year, past every retention, then completed.
        yield* TestClock.adjust("365 days")
        yield* Retention.prune()
        yield* ProviderReports.apply({ kind: "transfer", requestId: submission!.id, progress: { stage: "completed" } })
        assert.strictEqual((yield* Transactions.inspect(tx.id)).status, "COMPLETED")
      }).pipe(Effect.provide(world(calls)))
    })
  })
})
