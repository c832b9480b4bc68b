/**
 * The webhook transport the server delivers with: node's http(s) client, checking the address it connects to. A
 * subscription's target is checked when it is made (Webhooks.isNonPublicHost), but a name is not resolved there: a
 * name that resolves to a loopback, private or metadata-service address would make the relay post into its own
 * network (SSRF). Here every address a name resolves to is checked as it is connected to, in the lookup the socket
 * connects with, so a name whose answer changes between the check and the connection (DNS rebinding) is checked on
 * the answer used. A literal address is checked again too, so turning `allowPrivateTargets` off stops deliveries to
 * the subscriptions made while it was on. With `allowPrivateTargets` on, nothing is checked. Redirects are not
 * followed, as with `WebhookTransport.layerFetch`.
 */
import { Webhooks } from "@custody-relay/core"
import { Effect, Layer } from "effect"
import { lookup as systemLookup, type LookupAddress, type LookupOptions } from "node:dns"
import http from "node:http"
import https from "node:https"

/** `dns.lookup`'s shape with every address asked for: what the transport resolves names with. */
export type ResolveAll = (hostname: string, callback: (error: Error | null, addresses: ReadonlyArray<LookupAddress>) => void) => void

const resolveWithSystem: ResolveAll = (hostname, callback) =>
  systemLookup(hostname, { all: true }, (error, addresses) => callback(error, addresses ?? []))

/** A lookup for node's sockets that answers only public addresses, failing the connection otherwise. */
const publicOnly = (resolve: ResolveAll) =>
  (
    hostname: string,
    options: LookupOptions,
    callback: (error: Error | null, address: string | Array<LookupAddress>, family?: number) => void
  ) =>
    resolve(hostname, (error, found) => {
      if (error !== null) return callback(error, [])
      const addresses = found.filter((address) => options.family === undefined || options.family === 0 || address.family === options.family)
      const refused = addresses.find((address) => Webhooks.isNonPublicHost(address.address))
      // Without the address: the delivery log is the client's to read, and would tell it what internal names resolve to.
      if (refused !== undefined) return callback(new Error(`${hostname} resolves to an address that is not public`), [])
      const first = addresses[0]
      if (first === undefined) return callback(new Error(`${hostname} resolves to no address`), [])
      return options.all === true ? callback(null, [...addresses]) : callback(null, first.address, first.family)
    })

/** Node's http(s) client with the target's address checked (see above); `resolve` replaces the system's resolver in tests. */
export const layerNodeWebhookTransport = (resolve: ResolveAll = resolveWithSystem): Layer.Layer<Webhooks.WebhookTransport> =>
  Layer.succeed(
    Webhooks.WebhookTransport,
    Webhooks.WebhookTransport.of({
      post: (url, headers, body, timeoutMillis) =>
        Effect.flatMap(Webhooks.WebhookSettings, ({ allowPrivateTargets }) =>
          Effect.tryPromise({
            try: (signal) =>
              new Promise<{ readonly status: number }>((done, fail) => {
                const target = new URL(url)
                if (!allowPrivateTargets && Webhooks.isNonPublicHost(target.hostname)) {
                  return fail(new Error(`${target.hostname} is not a public address`))
                }
                const client = target.protocol === "https:" ? https : http
                const request = client.request(target, {
                  method: "POST",
                  headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...headers },
                  signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMillis)]),
                  ...(allowPrivateTargets ? {} : { lookup: publicOnly(resolve) })
                }, (response) => {
                  // The answer's body is not read: only its status says whether the delivery landed.
                  response.resume()
                  done({ status: response.statusCode ?? 0 })
                })
                request.on("error", fail)
                request.end(body)
              }),
            catch: (cause) => new Webhooks.WebhookNotDelivered({ detail: cause instanceof Error ? cause.message : String(cause) })
          }))
    })
  )
