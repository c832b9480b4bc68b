/**
 * Structured logs: one JSON line per request from Effect's logger, carrying the request id (echoed in
 * x-request-id), method, path, status and key id. Secrets never appear (AUTH-SEC-1): the test captures every log
 * line while credentials are created, used, mistyped and revoked, and while a defect is answered.
 */
import { RateLimiter, Rates, Relay, Storage } from "@custody-relay/core"
import { Effect, Layer, Logger } from "effect"
import { describe, expect, it } from "vitest"
import { makeHandler } from "../src/index.js"
import { field, makeFixture, makeTenant, record } from "./RelayFixture.js"

/** Each request line's level by its request id, from lines as the JSON logger prints them. */
const requestLevels = (lines: ReadonlyArray<string>): Record<string, string> => {
  const levels: Record<string, string> = {}
  for (const line of lines) {
    const entry = record(JSON.parse(line))
    const requestId = record(entry["annotations"])["requestId"]
    if (entry["message"] === "request" && typeof requestId === "string") levels[requestId] = field(entry, "level")
  }
  return levels
}

const capture = () => {
  const lines: Array<string> = []
  const logger = Logger.make((options) => {
    lines.push(Logger.formatJson.log(options))
  })
  return { lines, logger }
}

describe("logs", () => {
  it("AUTH-SEC-1: no log line holds a secret or the x-api-secret header; each request's line has its request id", async () => {
    const { lines, logger } = capture()
    // At Debug every request has its line in the output, a successful read's too (see RequestLine).
    const fixture = makeFixture({ logger, logLevel: "Debug" })
    try {
      const tenant = await makeTenant(fixture)
      const as = fixture.as(tenant.admin)
      const answer = await as.get("/relay/v1/accounts", { "x-request-id": "req-42" })
      await fixture.send("GET", "/relay/v1/accounts", { headers: { "x-api-key": tenant.admin.keyId, "x-api-secret": `${tenant.admin.secret}x` } })
      await as.post("/relay/v1/accounts", "{broken", { "x-api-secret": tenant.admin.secret })
      await fixture.control("POST", `/api-users/${tenant.approver.apiUserId}/revoke`)
      await fixture.as(tenant.approver).get("/relay/v1/accounts")
      expect(answer.headers.get("x-request-id")).toBe("req-42")

      expect(lines.length).toBeGreaterThan(10)
      const secrets = [tenant.admin.secret, tenant.approver.secret, `${tenant.admin.secret}x`]
      for (const line of lines) {
        for (const secret of secrets) expect(line).not.toContain(secret)
        expect(line.toLowerCase()).not.toContain("x-api-secret")
        expect(line).not.toContain("crs_")
      }
      const entry = lines.map((line) => record(JSON.parse(line))).find((l) => record(l["annotations"])["requestId"] === "req-42")
      expect(entry).toBeDefined()
      expect(record(entry?.["annotations"])).toMatchObject({
        method: "GET",
        path: "/relay/v1/accounts",
        status: 200,
        keyId: tenant.admin.keyId
      })
      expect(field(entry, "level")).toBe("DEBUG")
    } finally {
      await fixture.dispose()
    }
  })

  it("a read at or past slowReadMillis is logged at Info all the same", async () => {
    const { lines, logger } = capture()
    // 0 ms: every read is slow enough, so the successful one is at Info too.
    const fixture = makeFixture({ logger, slowReadMillis: 0 })
    try {
      const tenant = await makeTenant(fixture)
      expect((await fixture.as(tenant.admin).get("/relay/v1/accounts", { "x-request-id": "read-slow" })).status).toBe(200)
      expect(requestLevels(lines)["read-slow"]).toBe("INFO")
    } finally {
      await fixture.dispose()
    }
  })

  it("a successful read's line is at Debug, every other request's at Info; the control's logs keep them all", async () => {
    const { lines, logger } = capture()
    const fixture = makeFixture({ logger })
    try {
      const tenant = await makeTenant(fixture)
      const as = fixture.as(tenant.admin)
      await fixture.control("GET", "/logs")
      expect((await as.get("/relay/v1/accounts", { "x-request-id": "read-ok" })).status).toBe(200)
      expect((await fixture.send("HEAD", "/relay/v1/openapi.json", { headers: { "x-request-id": "head-ok" } })).status).toBe(200)
      expect((await as.get("/relay/v1/accounts/not-an-id", { "x-request-id": "read-400" })).status).toBe(400)
      expect((await as.get("/relay/v1/accounts/0190b6e4-0000-7000-8000-000000000000", { "x-request-id": "read-404" })).status).toBe(404)
      expect((await fixture.send("GET", "/relay/v1/accounts", { headers: { "x-request-id": "read-401", "x-api-key": tenant.admin.keyId, "x-api-secret": "wrong" } })).status).toBe(401)
      expect((await as.post("/relay/v1/accounts", { name: "Ops", workspace: "custody", assetId: "BTC" }, { "x-request-id": "command-ok" })).status).toBe(201)
      expect((await as.post("/relay/v1/accounts", { name: "" }, { "x-request-id": "command-400" })).status).toBe(400)

      // The output at the default level, Info: every command and every refusal, no successful read.
      expect(requestLevels(lines)).toMatchObject({ "read-400": "INFO", "read-404": "INFO", "read-401": "INFO", "command-ok": "INFO", "command-400": "INFO" })
      expect(requestLevels(lines)).not.toHaveProperty("read-ok")
      expect(requestLevels(lines)).not.toHaveProperty("head-ok")
      // AUTH-SEC-1: the kit scans the control's logs, which hold every request's line, the reads' at Debug too.
      const kept = record((await fixture.control("GET", "/logs")).body)["lines"] as ReadonlyArray<string>
      expect(requestLevels(kept)).toMatchObject({ "read-ok": "DEBUG", "head-ok": "DEBUG", "read-400": "INFO", "read-404": "INFO", "read-401": "INFO", "command-ok": "INFO", "command-400": "INFO" })
    } finally {
      await fixture.dispose()
    }
  })

  it("a request answered 503 because the storage is unavailable is one line, at Warn, carrying the error's message in one line", async () => {
    const { lines, logger } = capture()
    const storage = Layer.succeed(Storage.Storage, Storage.Storage.of({
      transaction: () => Effect.fail(new Storage.StorageError({ reason: new Storage.StorageUnavailable({ message: "connect ECONNREFUSED 127.0.0.1:5432", cause: new Error("ECONNREFUSED") }) }))
    }))
    const handler = makeHandler({ logger, outbox: false, layer: Relay.layer(Layer.merge(storage, RateLimiter.RateLimiter.layerMemory)) })
    try {
      const answer = await handler(new Request("http://relay.test/health/ready", { headers: { "x-request-id": "down-1" } }))
      expect(answer.status).toBe(503)
      const said = lines.map((line) => record(JSON.parse(line))).filter((entry) => record(entry["annotations"])["requestId"] === "down-1")
      expect(said.map((entry) => [entry["level"], entry["message"]])).toEqual([["WARN", "request"]])
      const error = record(said[0]?.["annotations"])["error"]
      expect(error).toMatch(/connect ECONNREFUSED 127\.0\.0\.1:5432/)
      expect(error).not.toContain("\n")
      expect(record(said[0]?.["annotations"])).toMatchObject({ status: 503, method: "GET", path: "/health/ready" })
    } finally {
      await handler.dispose()
    }
  })

  it("ERR-BODY-1 GEN-5XX-1: a defect answers a bare 500 with the request id; its cause goes to the log only", async () => {
    const { lines, logger } = capture()
    const failingRates = Layer.succeed(Rates.Rates, Rates.Rates.of({
      priceInCad: () => Effect.die(new Error("connection refused: SELECT secret_hash FROM api_users"))
    }))
    const fixture = makeFixture({ logger, layer: Relay.layerMemory({ rates: failingRates }) })
    try {
      const tenant = await makeTenant(fixture)
      const answer = await fixture.as(tenant.admin).get("/relay/v1/accounts", { "x-request-id": "boom-1" })
      expect(answer.status).toBe(500)
      expect(record(answer.body)).toEqual({
        message: "An unexpected error occurred; quote the requestId when reporting it",
        code: "INTERNAL_ERROR",
        requestId: "boom-1"
      })
      expect(answer.text).not.toContain("SELECT")
      expect(answer.text).not.toContain("at ")
      const logged = lines.find((line) => line.includes("boom-1") && line.includes("ERROR"))
      expect(logged).toContain("connection refused")
      expect(logged).not.toContain(tenant.admin.secret)
    } finally {
      await fixture.dispose()
    }
  })

  it("what the layers log while they are built, and the fibers they fork for the runtime's life, go to the handler's logger at its level", async () => {
    const { lines, logger } = capture()
    // As a SQL layer says a database is unreachable at start-up, and a synced rate limiter's rounds log a failure.
    const saying = Layer.effectDiscard(Effect.gen(function*() {
      yield* Effect.logWarning("said while the layer is built")
      yield* Effect.logInfo("below the level: not said")
      yield* Effect.forkScoped(Effect.logWarning("said by a fiber the layer forked"))
    }))
    const handler = makeHandler({ logger, logLevel: "Warn", layer: Layer.merge(Relay.layerMemory(), saying) })
    try {
      await handler.ready
      for (let turn = 0; turn < 10 && lines.length < 2; turn++) await new Promise((resolve) => setTimeout(resolve, 10))
      expect(lines.map((line) => [JSON.parse(line).level, JSON.parse(line).message])).toEqual([
        ["WARN", "said while the layer is built"],
        ["WARN", "said by a fiber the layer forked"]
      ])
    } finally {
      await handler.dispose()
    }
  })
})
