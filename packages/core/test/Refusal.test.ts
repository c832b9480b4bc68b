/**
 * Expected refusals are built without a stack trace (Refusal.ts); everything else about them is unchanged, and
 * infrastructure failures keep their stacks.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { RelayError, Storage } from "@custody-relay/core"

const frames = (error: Error): number => (error.stack ?? "").split("\n").filter((line) => line.trimStart().startsWith("at ")).length

describe("Refusal", () => {
  it("a refusal carries no stack frames and is otherwise the tagged error it was", () => {
    const limit = Error.stackTraceLimit
    const error = new RelayError.NotFound({ resource: "account", id: "x" })
    assert.strictEqual(frames(error), 0)
    assert.instanceOf(error, RelayError.NotFound)
    assert.instanceOf(error, Error)
    assert.strictEqual(error._tag, "NotFound")
    assert.strictEqual(error.message, "no account x")
    assert.strictEqual(Error.stackTraceLimit, limit)
    // Its Schema still knows it.
    assert.isTrue(Schema.is(RelayError.NotFound)(error))
  })

  it("the stack limit is restored even when the fields are refused", () => {
    const limit = Error.stackTraceLimit
    let refused: unknown
    try {
      new RelayError.NotFound({ resource: "nothing" as "account", id: "x" })
    } catch (error) {
      refused = error
    }
    assert.strictEqual(Error.stackTraceLimit, limit)
    // A bug at the call site: that error has a stack to find it by.
    assert.instanceOf(refused, TypeError)
    assert.isAbove(frames(refused as Error), 0)
    assert.isAbove(frames(new Error("a bug")), 0)
  })

  it.effect("a refusal fails an Effect as before", () =>
    Effect.gen(function*() {
      const failed = yield* Effect.flip(Effect.gen(function*() {
        return yield* new RelayError.Unauthenticated({ reason: "missing" })
      }))
      assert.instanceOf(failed, RelayError.Unauthenticated)
      assert.strictEqual(failed.reason, "missing")
    }))

  it("an infrastructure failure keeps its stack", () => {
    const error = new Storage.StorageError({ reason: new Storage.StorageFault({ message: "disk", cause: new Error("disk") }) })
    assert.isAbove(frames(error), 0)
  })
})
