/**
 * The core's operations are spans for an embedder's tracer when tracing is enabled, and open none when it is not
 * (Operation.ts): same answers, same failures, either way.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, References, Tracer } from "effect"
import { Accounts } from "@custody-relay/core"
import { operation } from "../src/Operation.js"
import { activeAccount, layer, newClient, principalOf } from "./TestWorld.js"

/** Runs `program` with tracing on or off under a tracer that records the names of the spans it is asked for. */
const spansOf = <A, E, R>(program: Effect.Effect<A, E, R>, enabled: boolean) =>
  Effect.gen(function*() {
    const names: Array<string> = []
    const base = yield* Effect.tracer
    const recording = Tracer.make({
      span(options) {
        names.push(options.name)
        return base.span(options)
      }
    })
    const exit = yield* Effect.exit(program.pipe(Effect.withTracer(recording), Effect.provideService(References.TracerEnabled, enabled)))
    return { exit, names }
  })

/** `program` opens one span, named `name`, with tracing on and none with it off, and ends in `expected` either way. */
const spanOnlyWhenTracing = <A, E, R>(program: Effect.Effect<A, E, R>, name: string, expected: Exit.Exit<A, E>) =>
  Effect.gen(function*() {
    const on = yield* spansOf(program, true)
    const off = yield* spansOf(program, false)
    assert.deepStrictEqual(on.names, [name])
    assert.deepStrictEqual(off.names, [])
    assert.deepStrictEqual(on.exit, expected)
    assert.deepStrictEqual(off.exit, expected)
  })

const double = operation("Test.double")(function*(n: number) {
  if (n < 0) return yield* Effect.fail("negative" as const)
  return n * 2
})

describe("Operation", () => {
  it.effect("with tracing on an operation is a span named as it is; with tracing off it opens none", () =>
    Effect.gen(function*() {
      yield* spanOnlyWhenTracing(double(21), "Test.double", Exit.succeed(42))
      // The same failure either way (traced, its cause also carries the span).
      const failedOn = yield* spansOf(Effect.flip(double(-1)), true)
      const failedOff = yield* spansOf(Effect.flip(double(-1)), false)
      assert.deepStrictEqual(failedOn.exit, Exit.succeed("negative"))
      assert.deepStrictEqual(failedOff.exit, Exit.succeed("negative"))
    }))

  it.effect("an operation whose body returns an Effect (not a generator) runs the same, traced or not", () =>
    Effect.gen(function*() {
      const triple = operation("Test.triple")((n: number) => Effect.succeed(n * 3))
      yield* spanOnlyWhenTracing(triple(5), "Test.triple", Exit.succeed(15))
    }))

  it.effect("the domain's operations are such spans: Accounts.get", () =>
    Effect.gen(function*() {
      const principal = yield* principalOf(yield* newClient)
      const account = yield* activeAccount(principal, "BTC")
      const on = yield* spansOf(Accounts.get(principal, account), true)
      const off = yield* spansOf(Accounts.get(principal, account), false)
      assert.include(on.names, "Accounts.get")
      assert.notInclude(off.names, "Accounts.get")
      assert.deepStrictEqual(on.exit, off.exit)
    }).pipe(Effect.provide(layer())))
})
