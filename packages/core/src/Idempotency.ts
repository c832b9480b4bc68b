/**
 * Idempotency records: the first outcome of a request made with an `Idempotency-Key`, kept with the data so a
 * retry on any node, after any restart, gets the same answer. The replay rules themselves live in the adapter
 * that speaks the protocol; the domain only stores and expires the records.
 */
import { Schema } from "effect"
import { Timestamp } from "./Timestamp.js"

export const IdempotencyRecord = Schema.Struct({
  /** Whose key it is (the API key id): keys of different callers never meet. */
  scope: Schema.String,
  key: Schema.String,
  /** A digest of method, path and body: the same key with another request is a conflict. */
  requestHash: Schema.String,
  state: Schema.Literals(["in_progress", "completed"]),
  responseStatus: Schema.NullOr(Schema.Int),
  responseBody: Schema.NullOr(Schema.String),
  createdAt: Timestamp,
  expiresAt: Timestamp
})
export type IdempotencyRecord = typeof IdempotencyRecord.Type
