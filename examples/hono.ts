/**
 * The relay inside a Hono app, which speaks `Request` (as do Bun, Deno and workers); on Node it is served through
 * `@hono/node-server`. Prints the address and a credential to try.
 *
 *   pnpm --filter @custody-relay/examples run hono
 */
import { serve } from "@hono/node-server"
import type { RelayHandler } from "@custody-relay/http"
import { Hono } from "hono"
import { isMain, startExample } from "./exampleServer.js"

export const honoApp = (handler: RelayHandler) => {
  const app = new Hono()
  app.all("/relay/*", (c) => handler(c.req.raw))
  app.post("/app/echo", async (c) => c.json({ got: await c.req.json() }))
  return app
}

if (isMain(import.meta.url)) {
  await startExample("Hono", async (handler, port) => {
    const server = serve({ fetch: honoApp(handler).fetch, port, hostname: "127.0.0.1" })
    await new Promise((resolve) => server.once("listening", resolve))
    return { server, close: () => new Promise<void>((done) => server.close(() => done())) }
  })
}
