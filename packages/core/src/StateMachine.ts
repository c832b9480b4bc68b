/**
 * A state machine as data: one table of transitions per entity. The code applies transitions only through
 * `transition`, and the property tests and the docs' diagrams read the same table, so the three cannot disagree.
 */
import { Result } from "effect"

export interface Transition<State extends string, Event extends string> {
  readonly from: State
  readonly event: Event
  readonly to: State
}

export interface StateMachine<State extends string, Event extends string> {
  readonly entity: string
  readonly states: ReadonlyArray<State>
  readonly initial: State
  readonly transitions: ReadonlyArray<Transition<State, Event>>
}

export const make = <State extends string, Event extends string>(
  machine: StateMachine<State, Event>
): StateMachine<State, Event> => machine

/** The state `event` leads to from `from`, or a failure naming both when the table has no such row. */
export const transition = <State extends string, Event extends string>(
  machine: StateMachine<State, Event>,
  from: State,
  event: Event
): Result.Result<State, { readonly from: State; readonly event: Event }> => {
  const row = machine.transitions.find((t) => t.from === from && t.event === event)
  return row === undefined ? Result.fail({ from, event }) : Result.succeed(row.to)
}

/** States with no outgoing transition: once there, a record never changes state again. */
export const terminalStates = <State extends string, Event extends string>(
  machine: StateMachine<State, Event>
): ReadonlyArray<State> => machine.states.filter((s) => !machine.transitions.some((t) => t.from === s))

export const eventsFrom = <State extends string, Event extends string>(
  machine: StateMachine<State, Event>,
  from: State
): ReadonlyArray<Event> => machine.transitions.filter((t) => t.from === from).map((t) => t.event)

/** A Mermaid `stateDiagram-v2` of the table, for the docs. */
export const toMermaid = <State extends string, Event extends string>(machine: StateMachine<State, Event>): string =>
  [
    "stateDiagram-v2",
    `  [*] --> ${machine.initial}`,
    ...machine.transitions.map((t) => `  ${t.from} --> ${t.to}: ${t.event}`),
    ...terminalStates(machine).map((s) => `  ${s} --> [*]`)
  ].join("\n")
