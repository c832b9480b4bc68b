/**
 * Proofs of issue 3 under concurrency, each with two OS processes on one store (a SQLite file, a PostgreSQL
 * database) running the core's real operations:
 * - two processes each fire 200 concurrent initiations at one source whose balance covers a fraction of them:
 *   accepted reservations never exceed the balance, none is negative, every accepted transaction is stored once,
 *   every refused one left no trace;
 * - many parallel approve and reject calls on one pending transaction and one pending account: exactly one wins,
 *   every other gets the conflict error (TransitionNotAllowed);
 * - one address whitelisted at once in each of its spellings (in one process, on the store's connection pool):
 *   one entry, every other attempt DuplicateWhitelistedAddress.
 */
import { assert, describe, it } from "@effect/vitest"
import { Accounts, Chain, Ids, Money, RelayError, Storage, Transactions, WhitelistedAddresses } from "@custody-relay/core"
import { Cause, Effect, Exit, Schema } from "effect"
import { sql } from "kysely"
import { MIGRATION_TABLE, names as migrationNames } from "../src/migrations/Migrations.js"
import { openPostgres } from "../src/postgres/layerPostgres.js"
import { openSqlite } from "../src/sqlite/layerSqlite.js"
import { proofEngines } from "./ProofTargets.js"
import {
  accountBalance,
  allTransactions,
  approvedDestination,
  checkInvariants,
  fundedAccount,
  newClient,
  newCredential,
  principalOf,
  provideRelay,
  startWorker
} from "./proofs/ProofWorld.js"

const InitiateResult = Schema.Struct({
  accepted: Schema.Array(Schema.String),
  refused: Schema.Int,
  other: Schema.Array(Schema.String)
})
const Tally = Schema.Struct({ won: Schema.Array(Schema.String), conflicts: Schema.Int, other: Schema.Array(Schema.String) })
const DecideResult = Schema.Struct({ transaction: Tally, account: Tally })

const STARTING_BALANCE = "100"
const PER_PROCESS = 200

for (const { name, skip, target: makeTarget } of proofEngines) {
  describe.skipIf(skip)(`Concurrency proofs: ${name}`, () => {
    it.live("nodes starting together on an empty database migrate it once and all come up", () =>
      Effect.gen(function*() {
        const target = yield* makeTarget
        const workers = Array.from({ length: 3 }, () => startWorker("start", target, {}))
        const results = yield* Effect.promise(() => Promise.all(workers.map((w) => w.result())))
        assert.deepStrictEqual(results, Array(3).fill({ started: true }))
        const ran = yield* Effect.promise(async () => {
          const db = target.engine === "sqlite"
            ? await openSqlite({ filename: target.filename })
            : await openPostgres({ connectionString: target.url })
          try {
            return await sql<{ readonly name: string }>`select name from ${sql.table(MIGRATION_TABLE)} order by name`.execute(db)
          } finally {
            await db.destroy()
          }
        })
        assert.deepStrictEqual(ran.rows.map((row) => row.name), [...migrationNames])
      }), 60_000)

    it.live(`two processes x ${PER_PROCESS} concurrent initiations never spend one balance twice`, () =>
      Effect.gen(function*() {
        const target = yield* makeTarget
        const world = yield* provideRelay(target)(Effect.gen(function*() {
          const clientId = yield* newClient
          const credential = yield* newCredential(clientId, "Initiator")
          const source = yield* fundedAccount(credential, STARTING_BALANCE)
          const destination = yield* approvedDestination(credential)
          return { clientId, credential, source, destination }
        }))
        const params = {
          credential: world.credential,
          sourceAccountId: world.source,
          destinationId: world.destination,
          amount: "1",
          count: PER_PROCESS
        }
        const results = yield* Effect.promise(() =>
          Promise.all([startWorker("initiate", target, params), startWorker("initiate", target, params)].map((w) => w.result()))
        )
        const decoded = results.map((result) => Schema.decodeUnknownSync(InitiateResult)(result))
        const accepted = decoded.flatMap((r) => r.accepted)
        const refused = decoded.reduce((n, r) => n + r.refused, 0)
        assert.deepStrictEqual(decoded.flatMap((r) => r.other), [], "every initiation is accepted or refused for funds")
        assert.strictEqual(accepted.length + refused, 2 * PER_PROCESS)
        assert.isAbove(accepted.length, 0)
        assert.isAbove(refused, 0, "the balance covers only a fraction of the initiations")
        assert.strictEqual(new Set(accepted).size, accepted.length)

        const after = yield* provideRelay(target)(Effect.gen(function*() {
          const stored = yield* Storage.run("read", (unit) => allTransactions(unit, Ids.ClientId.make(world.clientId), world.source))
          const entries = yield* Storage.run("read", (unit) => unit.listLedgerEntries(Ids.AccountId.make(world.source)))
          const balance = yield* accountBalance(world.source)
          const problems = yield* checkInvariants(world.clientId, [world.source])
          return { stored, entries, balance, problems }
        }))
        // Stored exactly once each, and nothing else: a refused initiation left no transaction.
        assert.deepStrictEqual(after.stored.map((t) => t.id).sort(), [...accepted].sort())
        const reserved = Money.sum(after.stored.map((t) => t.reserved))
        assert.isAtMost(Money.compare(reserved, Money.canonical(STARTING_BALANCE)), 0, `reserved ${reserved}`)
        assert.strictEqual(after.balance, Money.subtract(Money.canonical(STARTING_BALANCE), reserved))
        assert.isFalse(Money.isNegative(after.balance))
        // Only the deposit moved funds for real: a refused initiation left no ledger entry either.
        assert.deepStrictEqual(after.entries.map((e) => e.kind), ["deposit"])
        assert.deepStrictEqual(after.problems, [])
      }), 60_000)

    it.live("parallel approvals and rejections from two processes: exactly one wins, the others get the conflict error", () =>
      Effect.gen(function*() {
        const target = yield* makeTarget
        const world = yield* provideRelay(target)(Effect.gen(function*() {
          const clientId = yield* newClient
          const initiator = yield* newCredential(clientId, "Initiator")
          const source = yield* fundedAccount(initiator, "10")
          const destination = yield* approvedDestination(initiator)
          const initiated = yield* Transactions.initiate(yield* principalOf(initiator), {
            sourceAccountId: source,
            destinationId: destination,
            destinationType: "external",
            amount: "2.5",
            assetType: "ETH"
          })
          const pending = yield* Accounts.create(yield* principalOf(initiator), { name: "Pending", workspace: "custody", assetId: "ETH" })
          const approvers = yield* Effect.forEach(Array.from({ length: 12 }), (_, i) =>
            Effect.map(newCredential(clientId, `Approver ${i}`), (credential) => ({
              credential,
              decision: i % 2 === 0 ? "approve" as const : "reject" as const
            })))
          return { clientId, source, transactionId: initiated.id, accountId: pending.id, approvers }
        }))
        const half = (part: 0 | 1) => ({
          approvers: world.approvers.filter((_, i) => Math.floor(i / 2) % 2 === part),
          transactionId: world.transactionId,
          accountId: world.accountId
        })
        const results = yield* Effect.promise(() =>
          Promise.all([startWorker("decide", target, half(0)), startWorker("decide", target, half(1))].map((w) => w.result()))
        )
        const decoded = results.map((result) => Schema.decodeUnknownSync(DecideResult)(result))
        for (const subject of ["transaction", "account"] as const) {
          const won = decoded.flatMap((r) => r[subject].won)
          assert.strictEqual(won.length, 1, `${subject}: exactly one decision wins (${JSON.stringify(decoded)})`)
          assert.strictEqual(decoded.reduce((n, r) => n + r[subject].conflicts, 0), world.approvers.length - 1)
          assert.deepStrictEqual(decoded.flatMap((r) => r[subject].other), [])
        }
        const txWinner = decoded.flatMap((r) => r.transaction.won)[0]
        const accountWinner = decoded.flatMap((r) => r.account.won)[0]
        const stored = yield* provideRelay(target)(Effect.all({
          tx: Transactions.inspect(world.transactionId),
          account: Accounts.inspect(world.accountId),
          problems: checkInvariants(world.clientId, [world.source])
        }))
        assert.strictEqual(stored.tx.decisions.length, 1)
        assert.strictEqual(stored.tx.decisions[0]?.decision, txWinner)
        assert.strictEqual(stored.tx.status, txWinner === "approve" ? "PENDING_PROVIDER_APPROVAL" : "REJECTED")
        assert.strictEqual(stored.account.status, accountWinner === "approve" ? "approved" : "rejected")
        assert.deepStrictEqual(stored.problems, [])
      }), 60_000)

    it.live("one address whitelisted at once in each of its spellings becomes one entry", () =>
      Effect.gen(function*() {
        const target = yield* makeTarget
        const ADDRESSES = 12
        const outcomes = yield* provideRelay(target)(Effect.gen(function*() {
          const principal = yield* principalOf(yield* newCredential(yield* newClient, "Whitelister"))
          return yield* Effect.forEach(
            Array.from({ length: ADDRESSES }, (_, i) => Chain.Ethereum.spellingsOf(Chain.Ethereum.addressFromSeed(new Uint8Array([i, 7])))),
            (spellings) =>
              Effect.forEach(
                spellings,
                (address) => Effect.exit(WhitelistedAddresses.create(principal, { name: "Exchange", address, assetType: "ETH" })),
                { concurrency: "unbounded" }
              ),
            { concurrency: "unbounded" }
          )
        }))
        for (const attempts of outcomes) {
          assert.strictEqual(attempts.length, 3)
          assert.strictEqual(attempts.filter(Exit.isSuccess).length, 1, JSON.stringify(attempts))
          for (const refused of attempts.filter(Exit.isFailure)) {
            assert.strictEqual(Cause.squash(refused.cause) instanceof RelayError.DuplicateWhitelistedAddress, true, String(refused.cause))
          }
        }
      }), 60_000)
  })
}
