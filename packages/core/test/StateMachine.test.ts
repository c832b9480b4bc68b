import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as fc from "fast-check"
import { Account, StateMachine, Transaction, WhitelistedAddress } from "@custody-relay/core"

const machines = [Account.machine, WhitelistedAddress.machine, Transaction.machine] as const

describe("StateMachine tables", () => {
  for (const machine of machines) {
    it(`${machine.entity}: random event sequences never leave the table, and terminal states stay terminal`, () => {
      const events = [...new Set(machine.transitions.map((t) => t.event))]
      fc.assert(
        fc.property(fc.array(fc.constantFrom(...events), { maxLength: 30 }), (sequence) => {
          let state: string = machine.initial
          let terminal = false
          for (const event of sequence) {
            const next = StateMachine.transition(machine as StateMachine.StateMachine<string, string>, state, event)
            if (terminal) assert.isTrue(Result.isFailure(next), `${state} is terminal but accepted ${event}`)
            if (Result.isSuccess(next)) {
              assert.isTrue(machine.transitions.some((t) => t.from === state && t.event === event && t.to === next.success))
              state = next.success
            }
            assert.include(machine.states as ReadonlyArray<string>, state)
            terminal = StateMachine.terminalStates(machine as StateMachine.StateMachine<string, string>).includes(state)
          }
        })
      )
    })
  }

  it("ACC-APPR-2: approve and reject are allowed only from pending_approval", () => {
    for (const state of Account.statuses) {
      for (const event of ["approve", "reject"] as const) {
        assert.strictEqual(Result.isSuccess(StateMachine.transition(Account.machine, state, event)), state === "pending_approval")
      }
    }
  })

  it("TXN-LIST-2 TXN-FLOW-1: every status is in exactly one group; all is their union; open means pending", () => {
    const union = Transaction.statusGroups.flatMap((g) => Transaction.statusesIn(g))
    assert.deepStrictEqual([...union].sort(), [...Transaction.statuses].sort())
    assert.strictEqual(new Set(union).size, union.length)
    for (const s of Transaction.statuses) assert.strictEqual(Transaction.isOpen(s), Transaction.groupOf[s] === "pending")
    assert.deepStrictEqual([...StateMachine.terminalStates(Transaction.machine)].sort(), [
      ...Transaction.statusesIn("completed"), ...Transaction.statusesIn("failed")
    ].sort())
    assert.deepStrictEqual(Transaction.lowerCaseStatuses.map((s) => s.toUpperCase()), [...Transaction.statuses])
  })

  it("WL-STATE-1: ARCHIVED is the only terminal whitelist state and every state can reach it", () => {
    assert.deepStrictEqual(StateMachine.terminalStates(WhitelistedAddress.machine), ["ARCHIVED"])
    for (const s of WhitelistedAddress.statuses.filter((s) => s !== "ARCHIVED")) {
      assert.include(StateMachine.eventsFrom(WhitelistedAddress.machine, s), "archive")
    }
  })

  it("docs diagrams are read from the tables", () => {
    const diagram = StateMachine.toMermaid(Account.machine)
    assert.include(diagram, "[*] --> pending_approval")
    assert.include(diagram, "approved --> active: activate")
    assert.include(diagram, "rejected --> [*]")
  })
})
