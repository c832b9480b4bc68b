/**
 * OutageLog: an outage said when it begins, once a reminder interval while it lasts, and when it ends; nothing said
 * while nothing fails.
 */
import { assert, describe, it } from "@effect/vitest"
import { OutageLog } from "@custody-relay/core"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { capturedLogs } from "./TestWorld.js"

const messages: OutageLog.Messages = { began: "down", continues: "still down", ended: "back" }

describe("OutageLog", () => {
  it.effect("a failure a second for five minutes is said once, then once a minute; the first success after it once, with the failures and seconds", () => {
    const logs = capturedLogs()
    return Effect.gen(function*() {
      const outage = OutageLog.make(messages)
      yield* outage.succeeded
      assert.isFalse(outage.isOn())
      for (let second = 0; second < 300; second++) {
        yield* outage.failed({ level: "Warn", detail: "ECONNREFUSED" })
        yield* TestClock.adjust("1 second")
      }
      assert.strictEqual(outage.failures(), 300)
      yield* outage.succeeded
      yield* outage.succeeded
      assert.isFalse(outage.isOn())
      assert.deepStrictEqual(logs.lines.map((line) => [line.level, line.message]), [
        ["WARN", ["down", "ECONNREFUSED"]],
        ...Array.from({ length: 4 }, () => ["WARN", ["still down", "ECONNREFUSED"]]),
        ["INFO", "back"]
      ])
      assert.deepStrictEqual(logs.lines[1]?.annotations, { failures: 61, outageSeconds: 60 })
      assert.deepStrictEqual(logs.lines.at(-1)?.annotations, { failures: 300, outageSeconds: 300 })
    }).pipe(Effect.provide(logs.layer))
  })

  it.effect("a failure at Error is said at Error; a new outage after a success is said anew", () => {
    const logs = capturedLogs()
    return Effect.gen(function*() {
      const outage = OutageLog.make(messages, 1000)
      yield* outage.failed({ level: "Error", detail: "a fault" })
      yield* outage.succeeded
      yield* outage.failed({ level: "Warn", detail: "refused" })
      assert.deepStrictEqual(logs.lines.map((line) => [line.level, line.message]), [
        ["ERROR", ["down", "a fault"]],
        ["INFO", "back"],
        ["WARN", ["down", "refused"]]
      ])
    }).pipe(Effect.provide(logs.layer))
  })
})
