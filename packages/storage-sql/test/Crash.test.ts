/**
 * Proof of issue 3 under crashes: a worker process writes in a loop through the core's operations (initiate,
 * complete, fail, cancel, deposit, four at a time) and is killed with SIGKILL at a random moment, again and again.
 * After each kill the store is reopened (SQLite recovers its WAL, PostgreSQL has aborted the dead sessions) and the
 * invariant must hold for every account: balance = deposits - settled - open reservations, never negative, and
 * each transaction's reservation open exactly while it is pending; its events end at its status and it has one
 * submission to the provider exactly when it reached its quorum. Every initiation the writer was answered for (it
 * prints each id as it gets the answer) is stored.
 */
import { assert, describe, it } from "@effect/vitest"
import { Ids, Storage } from "@custody-relay/core"
import { Effect, Option } from "effect"
import { proofEngines } from "./ProofTargets.js"
import {
  allTransactions,
  approvedDestination,
  checkInvariants,
  fundedAccount,
  newClient,
  newCredential,
  provideRelay,
  quiescent,
  startWorker
} from "./proofs/ProofWorld.js"

const ROUNDS = 5
/**
 * Initiations a round's writer must have been answered for (or 10 s gone) before the kill's random moment is counted
 * from: a new writer starts with no transaction of its own to move on, and on a loaded machine a kill 50 ms after its
 * first write left it no time to complete, fail or cancel any, so a run could end with every transaction pending.
 */
const ANSWERED_BEFORE_KILL = 3

for (const { name, skip, target: makeTarget } of proofEngines) {
  describe.skipIf(skip)(`Crash proof: ${name}`, () => {
    it.live(`a writer killed with SIGKILL ${ROUNDS} times leaves balances that reconcile, events and outbox entries exactly where their changes committed, and every initiation it was answered for stored`, () =>
      Effect.gen(function*() {
        const target = yield* makeTarget
        const world = yield* provideRelay(target)(Effect.gen(function*() {
          const clientId = yield* newClient
          const credential = yield* newCredential(clientId, "Writer")
          const accounts = yield* Effect.forEach([0, 1, 2], () => fundedAccount(credential, "20", 0))
          const destination = yield* approvedDestination(credential)
          return { clientId, credential, accounts, destination }
        }))
        let acknowledged = 0
        for (let round = 1; round <= ROUNDS; round++) {
          const worker = startWorker("churn", target, {
            credential: world.credential,
            accountIds: world.accounts,
            destinationId: world.destination
          })
          yield* Effect.promise(() => worker.ready)
          for (let waited = 0; worker.acknowledged().length < ANSWERED_BEFORE_KILL && waited < 10_000; waited += 20) {
            yield* Effect.sleep("20 millis")
          }
          yield* Effect.sleep(`${50 + Math.floor(Math.random() * 400)} millis`)
          worker.kill("SIGKILL")
          yield* Effect.promise(() => worker.exited)
          // What the killed writer had already sent may still commit; the checks below read in several units.
          yield* quiescent(target)
          assert.notInclude(worker.stderr(), "unexpected outcome", `the writer's own operations failed only as the domain allows`)
          const problems = yield* provideRelay(target)(checkInvariants(world.clientId, world.accounts))
          assert.deepStrictEqual(problems, [], `after kill ${round}`)
          // Nothing answered is lost: on SQLite a unit is answered only after its group's COMMIT (CommitGroup).
          const answered = worker.acknowledged()
          const lost = yield* provideRelay(target)(Storage.run("lookup", (unit) =>
            Effect.filter(answered, (id) => Effect.map(unit.getTransaction(Ids.TransactionId.make(id)), Option.isNone))))
          assert.deepStrictEqual(lost, [], `initiations answered before kill ${round} and not stored`)
          acknowledged += answered.length
        }
        assert.isAbove(acknowledged, ROUNDS, "the writer was answered between kills")
        const written = yield* provideRelay(target)(Storage.run("read", (unit) =>
          Effect.forEach(world.accounts, (account) => allTransactions(unit, Ids.ClientId.make(world.clientId), account))))
        const statuses = new Set(written.flat().map((t) => t.status))
        assert.isAbove(written.flat().length, ROUNDS, "the worker wrote between kills")
        assert.isAbove(statuses.size, 2, `transactions reached several states: ${[...statuses].join(", ")}`)
      }), 60_000)
  })
}
