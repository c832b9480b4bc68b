/**
 * The core's operations (`Accounts.get`, `Transactions.initiate`, ...) as named spans for an embedder's tracer,
 * at no cost when there is none. `Effect.fn` opens a span and captures a call-site stack on every call, tracer on
 * or off: about 4 µs a call, measured, a few percent of a whole request. An operation reads the fiber's
 * `References.TracerEnabled` first and runs as `Effect.fn` when tracing is on, as `Effect.fnUntraced` when it is
 * off. With tracing on, the span is the same; the call-site frame it records is this module's.
 */
import { Effect, References } from "effect"

type Made = (...args: ReadonlyArray<unknown>) => Effect.Effect<unknown, unknown, unknown>
type Maker = (body: unknown, ...pipeables: ReadonlyArray<unknown>) => Made

type Pipeable = (effect: Effect.Effect<unknown, unknown, unknown>, ...args: ReadonlyArray<unknown>) => Effect.Effect<unknown, unknown, unknown>

const isGeneratorFunction = (body: unknown): boolean =>
  typeof body === "function" && body.constructor.name === "GeneratorFunction"

// `Effect.fn` also takes a body that returns an Effect; `Effect.fnUntraced` takes only a generator.
const returningEffect = (body: unknown, pipeables: ReadonlyArray<unknown>): Made => {
  const run = body as Made
  return (...args) => (pipeables as ReadonlyArray<Pipeable>).reduce((effect, pipeable) => pipeable(effect, ...args), Effect.suspend(() => run(...args)))
}

/** `Effect.fn(name)`, with the span and stack capture only while a tracer is enabled. */
export const operation = (name: string): Effect.fn.Traced => {
  const traced = Effect.fn(name) as unknown as Maker
  const untraced = Effect.fnUntraced as unknown as Maker
  const make: Maker = (body, ...pipeables) => {
    const withSpan = traced(body, ...pipeables)
    const withoutSpan = isGeneratorFunction(body) ? untraced(body, ...pipeables) : returningEffect(body, pipeables)
    return (...args) => Effect.withFiber((fiber) => (fiber.getRef(References.TracerEnabled) ? withSpan(...args) : withoutSpan(...args)))
  }
  return make as unknown as Effect.fn.Traced
}
