/**
 * A request to a relay handler as one of the demo's API users (seedDemo), in-process through its Web face: what the
 * tests that count a request's round trips or watch its work share.
 */
import type { RelayHandler } from "@custody-relay/http"
import type { DemoCredentials } from "../src/seedDemo.js"

export const asDemoUser = (
  relay: RelayHandler<unknown>,
  demo: DemoCredentials,
  role: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {}
): Promise<Response> => {
  const user = demo.users.find((u) => u.role === role)
  if (user === undefined) throw new Error(`no demo user ${role}`)
  return relay(new Request(`http://relay${path}`, {
    method,
    headers: { "x-api-key": user.keyId, "x-api-secret": user.secret, ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  }))
}
