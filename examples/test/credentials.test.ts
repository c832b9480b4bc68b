/** docs/http.md's snippet for API credentials of an embedded handler, run as written. */
import { Administration, Permission } from "@custody-relay/core"
import { makeHandler } from "@custody-relay/http"
import { Redacted } from "effect"
import { afterAll, assert, describe, it } from "vitest"

const handler = makeHandler()
afterAll(() => handler.dispose())

describe("docs/http.md: API credentials for an embedded handler", () => {
  it("creates a client and an API user through the handler's runtime, and the credential works", async () => {
    await handler.ready
    const client = await handler.runtime.runPromise(Administration.createClient("Acme"))
    const issued = await handler.runtime.runPromise(
      Administration.createApiUser({ clientId: client.id, permissions: Permission.permissionNames, name: "back office" })
    )
    const headers = { "x-api-key": issued.keyId, "x-api-secret": Redacted.value(issued.secret) }
    const answer = await handler(new Request("http://relay.local/relay/v1/accounts", { headers }))
    assert.strictEqual(answer.status, 200)
  })
})
