/**
 * Probes for what supervises a node (Kubernetes, a load balancer, systemd): no credential, no rate limit, outside the
 * interface's `/relay/v1`, under the handler's base path. `GET /health/live` answers 200 while the process answers
 * requests at all: restart it when this fails. `GET /health/ready` answers 200 when the storage answers a read, and
 * 503 with `Retry-After` while it does not (the database unreachable, or a statement held past its bounds): send the
 * node no traffic until it is 200 again. A probe is a successful read: its log line is at Debug, not at the default Info.
 */
import { Storage } from "@custody-relay/core"
import { Effect } from "effect"
import * as Reply from "./Reply.js"

export const LIVE_PATH = "/health/live"
export const READY_PATH = "/health/ready"

/** A setting no relay writes: reading it is one statement that touches no record and locks nothing. */
const PROBED_SETTING = "health-probe"

const live: Reply.Reply = Reply.json(200, { status: "live" })
const ready: Reply.Reply = Reply.json(200, { status: "ready" })

/**
 * The probe a GET or HEAD of `pathname` asks for, or undefined. Readiness reads through the storage in a lookup unit:
 * a storage that cannot answer fails it as unavailable, which the handler answers 503 with Retry-After, as it answers
 * any request then.
 */
export const probe = (method: string, pathname: string): Effect.Effect<Reply.Reply, never, Storage.Storage> | undefined => {
  if (method !== "GET" && method !== "HEAD") return undefined
  if (pathname === LIVE_PATH) return Effect.succeed(live)
  if (pathname === READY_PATH) return Effect.as(Storage.run("lookup", (unit) => unit.getSetting(PROBED_SETTING)), ready)
  return undefined
}
