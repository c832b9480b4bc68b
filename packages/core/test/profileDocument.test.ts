import { readFileSync } from "node:fs"
import { assert, describe, it } from "vitest"
import { renderLifecycleDocument } from "../scripts/lifecycleDocument.js"
import { renderProfileDocument } from "../scripts/profileDocument.js"

describe("docs/profile.md", () => {
  it("is generated from the core's tables and up to date (run `pnpm docs:profile` after changing them)", () => {
    const committed = readFileSync(new URL("../../../docs/profile.md", import.meta.url), "utf8")
    assert.strictEqual(committed, renderProfileDocument())
  })

  it("docs/lifecycle.md (state machines, outbox, event catalogue) is generated from the core and up to date", () => {
    const committed = readFileSync(new URL("../../../docs/lifecycle.md", import.meta.url), "utf8")
    assert.strictEqual(committed, renderLifecycleDocument())
  })
})
