/** An idempotency record as an `idempotency_records` row and back. */
import type { Idempotency } from "@custody-relay/core"
import type { IdempotencyRecordsTable } from "../schema/Database.js"

export const encode = (record: Idempotency.IdempotencyRecord): IdempotencyRecordsTable => ({
  scope: record.scope,
  key: record.key,
  request_hash: record.requestHash,
  state: record.state,
  response_status: record.responseStatus,
  response_body: record.responseBody,
  created_at: record.createdAt,
  expires_at: record.expiresAt
})

export const decode = (row: IdempotencyRecordsTable): Idempotency.IdempotencyRecord => ({
  scope: row.scope,
  key: row.key,
  requestHash: row.request_hash,
  state: row.state,
  responseStatus: row.response_status,
  responseBody: row.response_body,
  createdAt: row.created_at,
  expiresAt: row.expires_at
})
