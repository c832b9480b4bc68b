/**
 * The server's webhook transport (WebhookTransport.ts): with private targets not allowed, a delivery never reaches an
 * address that is not public, whether the target names it literally or by a name that resolves to it (SSRF through
 * DNS, rebinding included: the address checked is the one connected to); a public answer is connected to, and with
 * private targets allowed a local receiver gets the delivery.
 */
import { Webhooks } from "@custody-relay/core"
import { Effect, Exit, Layer } from "effect"
import { createServer, type Server } from "node:http"
import type { LookupAddress } from "node:dns"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { layerNodeWebhookTransport } from "../src/index.js"

let server: Server
let port = 0
const received: Array<string> = []

beforeAll(async () => {
  server = createServer((request, response) => {
    let body = ""
    request.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
    request.on("end", () => {
      received.push(body)
      response.writeHead(204).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  port = typeof address === "object" && address !== null ? address.port : 0
})
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

/** A resolver that answers each name from `names`, and nothing for any other. */
const resolver = (names: Record<string, ReadonlyArray<string>>) =>
  (hostname: string, callback: (error: Error | null, addresses: ReadonlyArray<LookupAddress>) => void) => {
    const found = names[hostname]
    if (found === undefined) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" }), [])
    return callback(null, found.map((address) => ({ address, family: address.includes(":") ? 6 : 4 })))
  }

const names = {
  "hooks.example.test": ["127.0.0.1"],
  "metadata.example.test": ["169.254.169.254"],
  // A name with a public and a private answer: the one connected to could be either.
  "mixed.example.test": ["1.1.1.1", "10.0.0.1"],
  "mapped.example.test": ["::ffff:127.0.0.1"],
  "public.example.test": ["1.1.1.1"]
}

const post = (url: string, allowPrivateTargets: boolean, timeoutMillis = 2_000) =>
  Effect.runPromiseExit(
    Webhooks.WebhookTransport.use((transport) => transport.post(url, { "webhook-id": "msg_1" }, '{"n":1}', timeoutMillis)).pipe(
      Effect.provide(Layer.merge(
        layerNodeWebhookTransport(resolver(names)),
        Layer.succeed(Webhooks.WebhookSettings, { ...Webhooks.WebhookSettings.defaultValue(), allowPrivateTargets })
      ))
    )
  )

const detailOf = (exit: Exit.Exit<unknown, Webhooks.WebhookNotDelivered>) =>
  Exit.isFailure(exit) ? JSON.stringify(exit.cause) : "delivered"

describe("the server's webhook transport", () => {
  it("never connects to an address that is not public: named literally, or by a name that resolves to one", async () => {
    for (const [url, refused] of [
      [`http://hooks.example.test:${port}/x`, "hooks.example.test resolves to an address that is not public"],
      [`http://metadata.example.test:${port}/latest`, "metadata.example.test resolves to an address that is not public"],
      [`http://mixed.example.test:${port}/x`, "mixed.example.test resolves to an address that is not public"],
      [`http://mapped.example.test:${port}/x`, "mapped.example.test resolves to an address that is not public"],
      [`http://127.0.0.1:${port}/x`, "127.0.0.1 is not a public address"],
      [`http://[::ffff:7f00:1]:${port}/x`, "[::ffff:7f00:1] is not a public address"]
    ] as const) {
      const exit = await post(url, false)
      expect(detailOf(exit), url).toContain(refused)
      // The client reads this in its delivery log: it names no internal address.
      expect(detailOf(exit), url).not.toMatch(/10\.0\.0\.1|169\.254|::ffff:127/)
    }
    expect(received).toEqual([])
  })

  it("connects to a public answer: what comes back is that host's status or the network's failure, never a refusal", async () => {
    const exit = await post("http://public.example.test:9/x", false, 1_000)
    expect(detailOf(exit)).not.toMatch(/not (a )?public/)
    expect(detailOf(exit)).not.toContain("ENOTFOUND")
  })

  it("with private targets allowed, delivers to a local receiver and answers its status", async () => {
    const exit = await post(`http://127.0.0.1:${port}/hooks`, true)
    expect(Exit.isSuccess(exit) ? exit.value : exit).toEqual({ status: 204 })
    expect(received).toEqual(['{"n":1}'])
  })
})
