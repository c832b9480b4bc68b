/**
 * Properties of the transaction workflow over random command sequences, run against the real operations on the
 * in-memory relay: transitions never leave the table, refused commands change nothing, and the quorum completes
 * exactly when the required number of distinct eligible approvers has approved.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import * as fc from "fast-check"
import { Accounts, type Principal, Reconciliation, StateMachine, Transaction, Transactions } from "@custody-relay/core"
import { activeAccount, layer, newClient, principalOf } from "./TestWorld.js"

type Command =
  | { readonly kind: "approve" | "reject"; readonly approver: number }
  | { readonly kind: "provider"; readonly event: Transactions.ProviderEvent }
  | { readonly kind: "cancel" }
  | { readonly kind: "advance"; readonly to: "completed" | "failed" }

const command: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constantFrom("approve" as const), approver: fc.integer({ min: 0, max: 4 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constantFrom("reject" as const), approver: fc.integer({ min: 0, max: 4 }) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("provider" as const),
      event: fc.constantFrom(...Transaction.providerEvents)
    })
  },
  { weight: 1, arbitrary: fc.constant({ kind: "cancel" as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("advance" as const), to: fc.constantFrom("completed" as const, "failed" as const) }) }
)

const runCommand = (c: Command, approvers: ReadonlyArray<Principal.Principal>, id: string) => {
  switch (c.kind) {
    case "approve":
      return Effect.asVoid(Transactions.approve(approvers[c.approver]!, id))
    case "reject":
      return Effect.asVoid(Transactions.reject(approvers[c.approver]!, id))
    case "provider":
      return Effect.asVoid(Transactions.applyProviderEvent(id, c.event))
    case "cancel":
      return Effect.asVoid(Transactions.cancel(id))
    case "advance":
      return Effect.asVoid(Transactions.advanceTo(id, c.to))
  }
}

describe("Transactions (properties)", () => {
  it("TXN-FLOW-1 quorum: random decisions and provider events follow the table; refusals change nothing", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 3 }), fc.array(command, { maxLength: 14 }), async (quorum, commands) => {
        const program = Effect.gen(function*() {
          const client = yield* newClient
          const initiator = yield* principalOf(client)
          // Approver 0 is the initiator (never counts); 1..3 are eligible; 4 lacks the permission.
          const approvers = [
            initiator,
            ...(yield* Effect.all([1, 2, 3].map((i) => principalOf(client, ["Approve transaction"], `approver-${i}`)))),
            yield* principalOf(client, ["View custody transaction detail"], "viewer")
          ]
          const source = yield* activeAccount(initiator, "BTC", "10", quorum)
          const destination = yield* activeAccount(initiator, "BTC")
          const { id } = yield* Transactions.initiate(initiator, {
            sourceAccountId: source, destinationId: destination, destinationType: "internal", amount: "1", assetType: "BTC"
          })
          const eligibleApprovals = new Set<number>()
          for (const c of commands) {
            const before = yield* Transactions.inspect(id)
            const exit = yield* Effect.exit(runCommand(c, approvers, id))
            const after = yield* Transactions.inspect(id)
            if (Exit.isFailure(exit)) {
              assert.deepStrictEqual(after, before, `refused ${JSON.stringify(c)} changed the transaction`)
              continue
            }
            if (c.kind === "approve" && before.status === "AWAITING_SIGNATURE") eligibleApprovals.add(c.approver)
            if (before.status !== after.status && c.kind !== "advance") {
              assert.isTrue(
                Transaction.machine.transitions.some((t) => t.from === before.status && t.to === after.status),
                `${before.status} -> ${after.status} is not in the table`
              )
            }
            assert.isFalse(
              StateMachine.terminalStates(Transaction.machine).includes(before.status),
              `terminal ${before.status} accepted ${JSON.stringify(c)}`
            )
            if (c.kind === "approve") {
              assert.notStrictEqual(c.approver, 0, "the initiator's approval was accepted")
              assert.notStrictEqual(c.approver, 4, "an approval without the permission was accepted")
              // The quorum is reached exactly when the number of distinct eligible approvals meets the policy.
              assert.strictEqual(after.status === "PENDING_PROVIDER_APPROVAL", eligibleApprovals.size >= quorum)
            }
          }
          assert.isTrue((yield* Reconciliation.reconcileAccount(source)).consistent)
          assert.isTrue((yield* Reconciliation.reconcileAccount(destination)).consistent)
          const final = yield* Transactions.inspect(id)
          if (final.status === "COMPLETED") assert.strictEqual((yield* Accounts.inspect(destination)).availableBalance, "1")
        })
        await Effect.runPromise(program.pipe(Effect.provide(layer())))
      }),
      { numRuns: 150 }
    )
  })
})
