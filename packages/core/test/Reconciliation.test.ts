/**
 * Balance conservation over random sequences of deposits, initiations, approvals, rejections, failures and
 * completions: funds are neither created nor lost, no balance is ever negative, and every account reconciles.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import { Accounts, Money, Reconciliation, Transactions } from "@custody-relay/core"
import { activeAccount, approvedWhitelistEntry, layer, newClient, principalOf } from "./TestWorld.js"

type Step =
  | { readonly kind: "deposit"; readonly account: number; readonly amount: Money.DecimalString }
  | { readonly kind: "initiate"; readonly from: number; readonly to: number; readonly amount: Money.DecimalString }
  | { readonly kind: "approve" | "reject" | "complete" | "fail"; readonly tx: number }

const amount = fc
  .tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 99_999_999 }))
  .filter(([whole, fraction]) => whole > 0 || fraction > 0)
  .map(([whole, fraction]) => Money.canonical(`${whole}.${fraction.toString().padStart(8, "0")}`))

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant("deposit" as const), account: fc.integer({ min: 0, max: 2 }), amount }),
  fc.record({ kind: fc.constant("initiate" as const), from: fc.integer({ min: 0, max: 2 }), to: fc.integer({ min: 0, max: 3 }), amount }),
  fc.record({ kind: fc.constantFrom("approve" as const, "reject" as const, "complete" as const, "fail" as const), tx: fc.nat(20) })
)

describe("Reconciliation (properties)", () => {
  it("balances are conserved: deposits = available + open reservations + what left the custody", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 25 }), async (steps) => {
        const program = Effect.gen(function*() {
          const client = yield* newClient
          const initiator = yield* principalOf(client)
          const approver = yield* principalOf(client, ["Approve transaction"])
          const accounts = [
            yield* activeAccount(initiator, "BTC"),
            yield* activeAccount(initiator, "BTC"),
            yield* activeAccount(initiator, "BTC", undefined, 0)
          ]
          const external = yield* approvedWhitelistEntry(initiator, "BTC")
          const transactions: Array<string> = []
          let deposited = Money.ZERO
          for (const s of steps) {
            if (s.kind === "deposit") {
              yield* Accounts.deposit(accounts[s.account]!, s.amount)
              deposited = Money.add(deposited, s.amount)
            } else if (s.kind === "initiate") {
              const internal = s.to < 3 && s.to !== s.from
              const result = yield* Effect.result(Transactions.initiate(initiator, {
                sourceAccountId: accounts[s.from]!,
                destinationId: internal ? accounts[s.to]! : external,
                destinationType: internal ? "internal" : "external",
                amount: s.amount,
                assetType: "BTC"
              }))
              if (result._tag === "Success") transactions.push(result.success.id)
              else assert.strictEqual(result.failure._tag, "InsufficientFunds")
            } else if (transactions.length > 0) {
              const id = transactions[s.tx % transactions.length]!
              const run = s.kind === "approve"
                ? Transactions.approve(approver, id)
                : s.kind === "reject"
                ? Transactions.reject(approver, id)
                : Transactions.advanceTo(id, s.kind === "complete" ? "completed" : "failed")
              yield* Effect.ignore(run)
            }
            let held = Money.ZERO
            for (const account of accounts) {
              const r = yield* Reconciliation.reconcileAccount(account)
              assert.isTrue(r.consistent, JSON.stringify(r))
              assert.isFalse(Money.isNegative(r.availableBalance))
              held = Money.add(held, Money.add(r.availableBalance, r.reserved))
            }
            let left = Money.ZERO
            for (const id of transactions) {
              const tx = yield* Transactions.inspect(id)
              if (tx.status === "COMPLETED") {
                left = Money.add(left, tx.destinationType === "internal" ? Money.subtract(tx.reserved, tx.amount) : tx.reserved)
              }
            }
            assert.strictEqual(Money.add(held, left), deposited)
          }
        })
        await Effect.runPromise(program.pipe(Effect.provide(layer())))
      }),
      { numRuns: 100 }
    )
  })

  it("an unknown account cannot be reconciled", async () => {
    const exit = await Effect.runPromiseExit(
      Reconciliation.reconcileAccount("00000000-0000-7000-8000-000000000bad").pipe(Effect.provide(layer()))
    )
    assert.strictEqual(exit._tag, "Failure")
  })
})
