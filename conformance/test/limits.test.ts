/**
 * The rate-limit checks must not depend on where a fixed window's boundary falls (LIM-RATE-1, LIM-RATE-2): a server
 * whose window rolls over in the middle of a burst still limits correctly, so the kit must still pass it.
 */
import { createRelay } from "@custody-relay/server"
import { describe, expect, it } from "vitest"
import { runConformance } from "../src/Runner.js"

const token = "secret-token"
type Handler = (request: Request) => Promise<Response>

/**
 * A correct fixed-window limiter in front of our server, with the worst phase: every key's window rolls over just
 * after its second request, so a burst of limit + 2 requests meets no 429 although the limit holds. The server's
 * own limiter is set out of the way, and the wrapper applies the policy the control asked for.
 */
const unluckyWindows = (handler: Handler): Handler => {
  type Policy = { limit: number; windowSeconds: number }
  // As the control protocol says, a limit applies to the API users created after it was set.
  let forNewUsers: Policy = { limit: 100000, windowSeconds: 60 }
  const policies = new Map<string, Policy>()
  const keys = new Map<string, { seen: number; windowStart: number; count: number }>()
  return async (request) => {
    const path = new URL(request.url).pathname
    if (path === "/__control/rate-limit" && request.method === "PUT") {
      forNewUsers = (await request.clone().json()) as Policy
      return handler(new Request(request.url, { method: "PUT", headers: request.headers, body: JSON.stringify({ limit: 1_000_000, windowSeconds: 60 }) }))
    }
    if (path === "/__control/api-users" && request.method === "POST") {
      const response = await handler(request)
      if (response.status === 201) policies.set(((await response.clone().json()) as { keyId: string }).keyId, forNewUsers)
      return response
    }
    const key = request.headers.get("x-api-key")
    const policy = key === null ? undefined : policies.get(key)
    if (!path.startsWith("/relay/v1/") || key === null || policy === undefined) return handler(request)
    const windowMillis = policy.windowSeconds * 1000
    const now = Date.now()
    const state = keys.get(key) ?? { seen: 0, windowStart: now, count: 0 }
    keys.set(key, state)
    state.seen += 1
    if (state.seen === 3) Object.assign(state, { windowStart: now, count: 0 })
    if (now - state.windowStart >= windowMillis) Object.assign(state, { windowStart: now - ((now - state.windowStart) % windowMillis), count: 0 })
    state.count += 1
    const resetMillis = state.windowStart + windowMillis
    const headers = {
      "x-ratelimit-limit": String(policy.limit),
      "x-ratelimit-remaining": String(Math.max(policy.limit - state.count, 0)),
      "x-ratelimit-reset": String(Math.ceil(resetMillis / 1000))
    }
    if (state.count > policy.limit) {
      const body = JSON.stringify({ error: "RATE_LIMITED", message: "Too many requests" })
      return new Response(body, { status: 429, headers: { ...headers, "content-type": "application/json", "retry-after": String(Math.ceil((resetMillis - now) / 1000)) } })
    }
    const response = await handler(request)
    const answered = new Response(response.body, response)
    for (const [name, value] of Object.entries(headers)) answered.headers.set(name, value)
    return answered
  }
}

describe("rate-limit checks and a window boundary inside the burst", () => {
  it("LIM-RATE-1: limit.rate.window passes a fixed-window limiter whose window rolls over mid-burst", async () => {
    const relay = await createRelay({ database: ":memory:", controlToken: token })
    try {
      const report = await runConformance({ target: { handler: unluckyWindows(relay.handler) }, control: { token }, checks: ["limit.rate.window"], seed: 7 })
      const findings = JSON.stringify(report.checks.map((check) => [check.id, check.outcome, check.violations.map((violation) => violation.message)]))
      expect(report.checks.map((check) => check.outcome), findings).toEqual(["pass"])
    } finally {
      await relay.close()
    }
  }, 30_000)
})
