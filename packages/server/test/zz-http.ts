import { makeHandler } from "@custody-relay/http"
import { serve } from "@custody-relay/http/node"
import { createRequire } from "node:module"
import { Logger } from "effect"
const autocannon = createRequire(import.meta.url)("/work/main/packages/http/node_modules/autocannon") as any
const silent = Logger.make(() => undefined)
const handler = makeHandler({ controlToken: "t", logger: silent, rateLimit: { limit: 1e9, windowSeconds: 60 } })
const ctl = { "x-control-token": "t", "content-type": "application/json" }
const client = await (await handler(new Request("http://x/__control/clients", { method: "POST", headers: ctl }))).json() as any
const user = await (await handler(new Request("http://x/__control/api-users", { method: "POST", headers: ctl, body: JSON.stringify({ clientId: client.clientId, permissions: ["View custody account", "Initiate new custody account"] }) }))).json() as any
const h = { "x-api-key": user.keyId, "x-api-secret": user.secret }
const acc = await (await handler(new Request("http://x/relay/v1/accounts", { method: "POST", headers: { ...h, "content-type": "application/json" }, body: JSON.stringify({ name: "Bench", workspace: "custody", assetId: "BTC" }) }))).json() as any
const l = await serve(handler, { port: 0 })
for (const c of [1, 10]) {
  const r = await autocannon({ url: `${l.url}/relay/v1/accounts/${acc.id}`, connections: c, duration: 3, headers: h })
  console.log("memory over http, connections", c, r.requests.average, "req/s p50", r.latency.p50)
}
await l.close(); await handler.dispose()
