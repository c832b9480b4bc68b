/**
 * The default log output (JsonLogLines): the lines Effect's `Logger.formatJson` would print, gathered and written
 * together below Warn, at once from Warn up; a value that could hold a secret still goes through Effect's redacting
 * serialisation (AUTH-SEC-1).
 */
import { Effect, Logger, Redacted } from "effect"
import { describe, expect, it, vi } from "vitest"
import { makeHandler } from "../src/Handler.js"
import * as JsonLogLines from "../src/JsonLogLines.js"
import { makeFixture, makeTenant } from "./RelayFixture.js"

/** Every entry logged through both loggers: JsonLogLines' lines (as written, in writes) and formatJson's. */
const both = () => {
  const writes: Array<string> = []
  const reference: Array<string> = []
  const lines = JsonLogLines.make((text) => writes.push(text))
  const logger = Logger.make<unknown, void>((entry) => {
    reference.push(Logger.formatJson.log(entry))
    lines.logger.log(entry)
  })
  const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runSync(Effect.provide(effect, Logger.layer([logger])))
  return { writes, reference, lines, run }
}

describe("JsonLogLines", () => {
  it("prints what Logger.formatJson prints, for plain entries and for every other kind", () => {
    const { writes, reference, lines, run } = both()
    run(Effect.logInfo("request").pipe(Effect.annotateLogs({ requestId: "r-1", status: 200, ok: true, none: null })))
    run(Effect.logInfo("two", "parts", 3))
    run(Effect.logInfo({ nested: { deep: [1, 2] } }).pipe(Effect.annotateLogs({ list: [1, "a"] })))
    run(Effect.logInfo("spanned").pipe(Effect.withLogSpan("step")))
    run(Effect.logError("failed", new Error("boom")))
    lines.flush()
    const written = writes.flatMap((text) => text.split("\n"))
    expect(written).toHaveLength(reference.length)
    // The timestamp too: the ISO text kept per millisecond is the entry's own.
    written.forEach((line, index) => expect(JSON.parse(line)).toEqual(JSON.parse(reference[index] ?? "{}")))
  })

  it("writes what it gathered at once once it passes GATHER_BYTES, without waiting for the timer", () => {
    const { writes, run } = both()
    const long = "x".repeat(1024)
    for (let i = 0; i < JsonLogLines.GATHER_BYTES / 1024; i++) run(Effect.logInfo(long))
    expect(writes).toHaveLength(1)
    expect(writes[0]!.length).toBeGreaterThanOrEqual(JsonLogLines.GATHER_BYTES)
  })

  it("AUTH-SEC-1: a Redacted value in a message or an annotation is printed redacted", () => {
    const { writes, lines, run } = both()
    const secret = Redacted.make("crs_the-secret-itself")
    run(Effect.logInfo("credential", secret).pipe(Effect.annotateLogs({ secret })))
    lines.flush()
    expect(writes.join("\n")).not.toContain("crs_the-secret-itself")
    expect(writes.join("\n")).toContain("<redacted>")
  })

  it("gathers lines below Warn into one write, and writes a Warn line at once, after what was gathered", async () => {
    const { writes, run } = both()
    run(Effect.logInfo("first"))
    run(Effect.logInfo("second"))
    run(Effect.logInfo("third"))
    expect(writes).toEqual([])
    run(Effect.logWarning("warned"))
    expect(writes.map((text) => text.split("\n").map((line) => JSON.parse(line).message))).toEqual([["first", "second", "third"], ["warned"]])
    run(Effect.logInfo("later"))
    await new Promise((resolve) => setTimeout(resolve, JsonLogLines.GATHER_MILLIS * 5))
    expect(writes.at(-1)).toContain("\"later\"")
  })

  it("the request line the default output writes without an Effect log entry is the line Effect's logger prints", async () => {
    const requestLines = async (lines: JsonLogLines.JsonLogLines | undefined, request: Request, logLevel: "Info" | "Debug") => {
      const printed: Array<string> = []
      const spy = vi.spyOn(process.stdout, "write").mockImplementation((text: unknown) => {
        printed.push(...String(text).split("\n").filter((line) => line !== ""))
        return true
      })
      try {
        // No control protocol: nothing captures, so on the default output the handler writes the line itself.
        const handler = makeHandler(lines === undefined ? { logLevel } : { logger: lines.logger, logLevel })
        await handler.ready
        await handler(request.clone())
        await handler.dispose()
        lines?.flush()
        return printed
          .map((line) => JSON.parse(line) as Record<string, unknown>)
          .filter((line) => (line["annotations"] as Record<string, unknown>)?.["requestId"] === "req-same")
          .map(({ timestamp, fiberId, annotations, ...rest }) => ({
            ...rest,
            timestamp: typeof timestamp === "string" && !Number.isNaN(Date.parse(timestamp)),
            fiberId: typeof fiberId === "string" && /^#\d+$/.test(fiberId),
            annotations: { ...(annotations as Record<string, unknown>), durationMs: typeof (annotations as Record<string, unknown>)["durationMs"] }
          }))
      } finally {
        spy.mockRestore()
      }
    }
    // A refused read, at Info (the default level).
    const refused = new Request("http://relay/relay/v1/accounts", { headers: { "x-request-id": "req-same", "x-api-key": "crk_unknown" } })
    const direct = await requestLines(undefined, refused, "Info")
    expect(direct).toHaveLength(1)
    expect(direct).toEqual(await requestLines(JsonLogLines.make(), refused, "Info"))
    expect(direct[0]).toMatchObject({ message: "request", level: "INFO", spans: {}, annotations: { method: "GET", path: "/relay/v1/accounts", status: 401 } })
    // A successful read, at Debug (see RequestLine): none at Info.
    const read = new Request("http://relay/relay/v1/openapi.json", { headers: { "x-request-id": "req-same" } })
    expect(await requestLines(undefined, read, "Info")).toEqual([])
    const directRead = await requestLines(undefined, read, "Debug")
    expect(directRead).toHaveLength(1)
    expect(directRead).toEqual(await requestLines(JsonLogLines.make(), read, "Debug"))
    expect(directRead[0]).toMatchObject({ message: "request", level: "DEBUG", spans: {}, annotations: { method: "GET", path: "/relay/v1/openapi.json", status: 200 } })
  })

  it("AUTH-SEC-1: the handler's default output (JsonLogLines on stdout) carries each request's id and holds no secret", async () => {
    const printed: Array<string> = []
    const spy = vi.spyOn(process.stdout, "write").mockImplementation((text: unknown) => {
      printed.push(String(text))
      return true
    })
    try {
      // No logger given: the handler's default output (the fixture would give a silent one); at Debug, so that the
      // successful read has its line too.
      const fixture = makeFixture({ logger: undefined as never, logLevel: "Debug" })
      const tenant = await makeTenant(fixture)
      await fixture.as(tenant.admin).get("/relay/v1/accounts", { "x-request-id": "req-lines" })
      await fixture.send("GET", "/relay/v1/accounts", { headers: { "x-api-key": tenant.admin.keyId, "x-api-secret": `${tenant.admin.secret}x` } })
      await fixture.dispose()
      const all = printed.join("\n")
      expect(all).toContain("req-lines")
      expect(all).not.toContain(tenant.admin.secret)
      expect(all.toLowerCase()).not.toContain("x-api-secret")
    } finally {
      spy.mockRestore()
    }
  })
})
