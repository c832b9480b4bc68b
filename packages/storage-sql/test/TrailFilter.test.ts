/**
 * An embedder's audit-trail filter on real SQLite: the core gives storage each event type once, so a list that
 * repeats one type (an untyped caller's array, through the Promise facade) is answered, where as written it bound
 * a parameter per value and SQLite refused the statement as a storage fault, a 500 (GEN-5XX-1).
 */
import { Relay } from "@custody-relay/core"
import { createRelay } from "@custody-relay/core/promise"
import { assert, describe, it } from "vitest"
import { layerSqlite } from "../src/index.js"

describe("audit trail filter on SQLite", () => {
  it("GEN-5XX-1: one event type repeated 40,000 times is answered as the type once", async () => {
    const relay = createRelay(Relay.layer(layerSqlite({ filename: ":memory:" })))
    try {
      const client = await relay.administration.createClient()
      const key = await relay.administration.createApiUser({ clientId: client.id, permissions: ["Initiate new custody account", "View audit trail"] })
      const me = await relay.authenticate(key.keyId, key.secret)
      await relay.accounts.create(me, { name: "Treasury", workspace: "custody", assetId: "BTC" })
      const repeated = await relay.auditTrail(me, { types: Array.from({ length: 40_000 }, () => "account.created" as const) })
      const once = await relay.auditTrail(me, { types: ["account.created"] })
      assert.strictEqual(once.total, 1)
      assert.deepStrictEqual(repeated, once)
    } finally {
      await relay.dispose()
    }
  })
})
