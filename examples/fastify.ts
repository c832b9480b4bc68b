/**
 * The relay inside a Fastify 5 app: in a plugin of its own that leaves the body to the handler (Fastify scopes
 * content-type parsers to the plugin, so the app's other routes keep their JSON parser). Prints the address and a
 * credential to try.
 *
 *   pnpm --filter @custody-relay/examples run fastify
 */
import type { RelayHandler } from "@custody-relay/http"
import { toNodeListener } from "@custody-relay/http/node"
import Fastify from "fastify"
import { isMain, startExample } from "./exampleServer.js"

export const fastifyApp = (handler: RelayHandler) => {
  const fastify = Fastify()
  const listener = toNodeListener(handler)
  fastify.register(async (relay) => {
    relay.removeAllContentTypeParsers()
    relay.addContentTypeParser("*", (_request, _payload, done) => done(null))
    relay.all("/relay/*", (request, reply) => {
      reply.hijack()
      listener(request.raw, reply.raw)
    })
  })
  fastify.post("/app/echo", async (request) => ({ got: request.body }))
  return fastify
}

if (isMain(import.meta.url)) {
  await startExample("Fastify", async (handler, port) => {
    const fastify = fastifyApp(handler)
    await fastify.listen({ port, host: "127.0.0.1" })
    return { server: fastify.server, close: () => fastify.close() }
  })
}
