/** The adapter's own refusals are built without a stack trace, as the core's are (core Refusal.ts). */
import { describe, expect, it } from "vitest"
import { MethodNotAllowed, RouteNotFound } from "../src/HttpError.js"

describe("HttpError", () => {
  it("refusals carry no stack frames", () => {
    for (const error of [new RouteNotFound(), new MethodNotAllowed({ method: "PUT", allow: ["GET"] })]) {
      expect(error.stack ?? "").not.toMatch(/\n\s+at /)
      expect(error).toBeInstanceOf(Error)
    }
  })
})
