/**
 * Idempotency-Key on POST (beyond the interface): the header, the request's fingerprint and the replay marker,
 * and nothing else. Exactly-once itself is the core's (core `Idempotency`): a command run under the key records
 * its result in the unit of work of its effects, and a retry replays it, on any node, after any restart.
 * - a retry with the same key and the same request (method, path, body) replays the first answer, marked
 *   `Idempotent-Replayed: true`; a retry while the first still runs waits for it and then replays it;
 * - the same key with another request is 409 IDEMPOTENCY_KEY_REUSED;
 * - a refusal keeps nothing, so the caller may fix the request and retry with the same key;
 * - keys are scoped to the API key id and expire (`RelayConfig.idempotencyKeyTtlSeconds`, 24 h by default);
 * - calculate-fee changes nothing, so a key on it is checked and then has nothing to guard.
 */
import { Idempotency } from "@custody-relay/core"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js"
import { Effect } from "effect"
import type { Reply } from "./Reply.js"

export const HEADER = "idempotency-key"
export const REPLAYED_HEADER = "idempotent-replayed"
/** A key's rule is the core's (Idempotency.KEY_RULE), for the header and the Promise facade alike. */
export const isValidKey: (key: string) => boolean = Idempotency.isValidKey
export const KEY_RULE = Idempotency.KEY_RULE

/**
 * Digest of what makes two requests "the same": method, path and the exact body (SHA-256, lowercase hex). Computed
 * in the request's own step with @noble/hashes: WebCrypto's `digest` is asynchronous, a round through node's thread
 * pool and a promise for a body of a few hundred bytes, and cost a keyed initiation far more than the hash itself
 * (docs/benchmarks.md, "initiations under an idempotency key").
 */
export const fingerprint = (method: string, pathname: string, body: string): string =>
  bytesToHex(sha256(utf8ToBytes(`${method} ${pathname}\n${body}`)))

/** Runs `work` (a command's reply) under the caller's key, marking a replayed answer. */
export const run = <E, R>(scope: string, key: string, requestHash: string, work: Effect.Effect<Reply, E, R>) =>
  Effect.suspend(() => {
    const command = new Idempotency.CommandKey(scope, key, requestHash)
    return Effect.map(
      Idempotency.withKey(work, command),
      (reply): Reply => (command.replayed ? { ...reply, headers: { ...reply.headers, [REPLAYED_HEADER]: "true" } } : reply)
    )
  })
