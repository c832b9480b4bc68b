import { type AddressInfo, createServer } from "node:net"
import { makeHandler } from "@custody-relay/http"
import { serve } from "@custody-relay/http/node"
import { Webhook } from "standardwebhooks"
import { afterAll, assert, describe, it } from "vitest"
import { type ReceivedEvent, webhookReceiver } from "../webhookReceiver.js"

const closers: Array<() => Promise<unknown>> = []
afterAll(() => Promise.all(closers.map((close) => close())))

describe("examples/webhookReceiver.ts", () => {
  it("receives a relay's events, verified, each once; a forged delivery is refused", async () => {
    const handler = makeHandler({ controlToken: "t", logLevel: "Warn", outbox: { idleMillis: 5 }, webhooks: { allowPrivateTargets: true } })
    closers.push(() => handler.dispose())
    const relay = await serve(handler, { port: 0 })
    closers.push(() => relay.close())
    const call = async (path: string, body: unknown, headers: Record<string, string>) => {
      const response = await fetch(`${relay.url}${path}`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify(body) })
      return (await response.json()) as Record<string, unknown>
    }
    const control = { "x-control-token": "t" }
    const { clientId } = await call("/__control/clients", {}, control)
    const user = await call("/__control/api-users", { clientId, permissions: ["Manage webhooks", "Initiate new custody account"] }, control)
    const auth = { "x-api-key": String(user["keyId"]), "x-api-secret": String(user["secret"]) }

    const events: Array<ReceivedEvent> = []
    // The receiver needs the subscription's secret, and the subscription the receiver's URL: find a free port first.
    const probe = createServer()
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve))
    const port = (probe.address() as AddressInfo).port
    await new Promise((resolve) => probe.close(resolve))
    const subscription = await call("/relay/v1/webhooks", { url: `http://127.0.0.1:${port}/relay-events` }, auth)
    const live = webhookReceiver(String(subscription["secret"]), (event) => events.push(event))
    await new Promise<void>((resolve) => live.listen(port, "127.0.0.1", resolve))
    closers.push(() => new Promise((resolve) => live.close(resolve)))

    await call("/relay/v1/accounts", { name: "Watched", workspace: "custody", assetId: "ETH" }, auth)
    for (let waited = 0; events.length === 0 && waited < 5000; waited += 20) await new Promise((resolve) => setTimeout(resolve, 20))
    assert.deepStrictEqual(events.map((e) => e.type), ["account.created"])

    // A delivery signed with another secret is refused (400) and not handed on.
    const forged = new Webhook("whsec_" + btoa("not-the-subscription-secret-xx")).sign("msg-1", new Date(), "{}")
    const answer = await fetch(`http://127.0.0.1:${port}/relay-events`, {
      method: "POST",
      headers: { "webhook-id": "msg-1", "webhook-timestamp": String(Math.floor(Date.now() / 1000)), "webhook-signature": forged },
      body: "{}"
    })
    assert.strictEqual(answer.status, 400)
    assert.strictEqual(events.length, 1)
  })
})
