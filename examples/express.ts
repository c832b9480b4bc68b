/**
 * The relay inside an Express 5 app, beside the app's own JSON routes: mounted before any body parser, since the
 * handler reads the body itself. Prints the address and a credential to try.
 *
 *   pnpm --filter @custody-relay/examples run express
 */
import type { RelayHandler } from "@custody-relay/http"
import { toNodeListener } from "@custody-relay/http/node"
import express, { type Express } from "express"
import { isMain, startExample } from "./exampleServer.js"

export const expressApp = (handler: RelayHandler): Express => {
  const app = express()
  const relay = toNodeListener(handler)
  app.use("/relay", (req, res) => relay(Object.assign(req, { url: req.originalUrl }), res))
  app.post("/app/echo", express.json(), (req, res) => void res.json({ got: req.body }))
  return app
}

if (isMain(import.meta.url)) {
  await startExample("Express", async (handler, port) => {
    const server = expressApp(handler).listen(port, "127.0.0.1")
    await new Promise((resolve) => server.once("listening", resolve))
    return { server, close: () => new Promise<void>((done) => server.close(() => done())) }
  })
}
