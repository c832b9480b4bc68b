/**
 * A webhook receiver for Custody Relay: verifies each delivery's Standard Webhooks signature with the reference
 * library, answers 2xx only once the event is kept, and de-duplicates by `webhook-id` (delivery is at least once).
 *
 *   RELAY_WEBHOOK_SECRET=whsec_... PORT=3000 npx tsx examples/webhookReceiver.ts
 *
 * then subscribe `http://your-host:3000/relay-events` (docs/webhooks.md). Each verified event is printed as one
 * JSON line; a forged or stale delivery is answered 400 and printed nowhere.
 */
import { createServer, type IncomingMessage, type Server } from "node:http"
import { Webhook } from "standardwebhooks"

export interface ReceivedEvent {
  readonly id: string
  readonly type: string
  readonly entityId: string
  readonly [field: string]: unknown
}

const readBody = (request: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    let body = ""
    request.setEncoding("utf8")
    request.on("data", (chunk: string) => (body += chunk))
    request.on("end", () => resolve(body))
    request.on("error", reject)
  })

/** A receiver that verifies with `secret` and hands each event, once, to `onEvent`. */
export const webhookReceiver = (secret: string, onEvent: (event: ReceivedEvent) => void): Server => {
  const verifier = new Webhook(secret)
  const seen = new Set<string>()
  return createServer(async (request, response) => {
    const body = await readBody(request)
    const headers: Record<string, string> = {}
    for (const [name, value] of Object.entries(request.headers)) if (typeof value === "string") headers[name] = value
    let event: ReceivedEvent
    try {
      // Verifies the signature over id.timestamp.body and that the timestamp is recent (replay protection).
      event = verifier.verify(body, headers) as ReceivedEvent
    } catch {
      response.writeHead(400).end()
      return
    }
    const id = headers["webhook-id"] ?? event.id
    if (!seen.has(id)) {
      seen.add(id)
      onEvent(event)
    }
    response.writeHead(204).end()
  })
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const secret = process.env["RELAY_WEBHOOK_SECRET"]
  if (secret === undefined || !secret.startsWith("whsec_")) {
    process.stderr.write("set RELAY_WEBHOOK_SECRET to the secret the subscription answered (whsec_...)\n")
    process.exit(2)
  }
  const port = Number(process.env["PORT"] ?? 3000)
  webhookReceiver(secret, (event) => process.stdout.write(`${JSON.stringify(event)}\n`)).listen(port, () => {
    process.stdout.write(`receiving on http://127.0.0.1:${port}/relay-events\n`)
  })
}
