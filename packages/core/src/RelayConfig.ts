/**
 * Deployment choices the interface leaves open (our profile), with defaults an embedder can override by
 * providing the reference: how many approvals a new account's transactions need, and whether an approved account
 * is activated (given its deposit address) at once or by a later provider step (ACC-ACTIVE-1), how long an
 * idempotency key keeps its result, and how long settled outbox entries and webhook deliveries are kept (Retention).
 */
import { Context } from "effect"
import { type Given, overDefaults, wholeNumber } from "./EmbedderOptions.js"

export interface RelayConfigShape {
  /** Distinct approvers a transaction from a new account needs; 0 sends it to the provider at once. */
  readonly defaultRequiredApprovals: number
  /** Activate an account in the same unit of work that approves it. */
  readonly activateOnApproval: boolean
  /** How long a command's idempotency key keeps its result for replay (24 h by default). */
  readonly idempotencyKeyTtlSeconds: number
  /** How long a request waits for the provider's one synchronous answer (the fee estimate) before a 500. */
  readonly providerCallTimeoutMillis: number
  /** How often the outbox worker asks a polled provider where a submitted transfer or an address stands. */
  readonly providerPollMillis: number
  /**
   * How long an outbox entry is kept once done or given up (7 days by default); 0 keeps them for good. The custody
   * record (transactions, their events) says what happened; an entry only adds its attempts and last error. A
   * transfer's submission and an address's registration are kept for good whatever this says (`Outbox.deletedOnceSettled`).
   */
  readonly outboxEntryRetentionSeconds: number
  /**
   * How long a webhook delivery is kept in its subscription's delivery log once delivered, failed or skipped (30
   * days by default); 0 keeps them for good. A redelivery reads the events, not these.
   */
  readonly webhookDeliveryRetentionSeconds: number
}

export const RelayConfig = Context.Reference<RelayConfigShape>("@custody-relay/core/RelayConfig", {
  defaultValue: () => ({ defaultRequiredApprovals: 1, activateOnApproval: false, idempotencyKeyTtlSeconds: 24 * 60 * 60,
    providerCallTimeoutMillis: 10_000,
    providerPollMillis: 1000,
    outboxEntryRetentionSeconds: 7 * 24 * 60 * 60,
    webhookDeliveryRetentionSeconds: 30 * 24 * 60 * 60
  })
})

/**
 * The longest a retention setting or an idempotency key's time to live may be, in seconds: ten years (a retention of 0
 * keeps the rows for good). Past it, a cut-off instant would be no date at all.
 */
export const MAX_RETENTION_SECONDS = 10 * 366 * 24 * 60 * 60

/** The most approvals a transaction can be made to need (the server's RELAY_DEFAULT_QUORUM takes 0 to 10 too). */
export const MAX_REQUIRED_APPROVALS = 10

/**
 * The configuration an embedder gives, over the defaults (an entry given as `undefined` keeps its default), each
 * number checked: a RangeError naming the setting otherwise (see EmbedderOptions).
 */
export const make = (given?: Given<RelayConfigShape>): RelayConfigShape => {
  const config = overDefaults(RelayConfig.defaultValue(), given)
  wholeNumber("config.defaultRequiredApprovals", config.defaultRequiredApprovals, 0, MAX_REQUIRED_APPROVALS)
  wholeNumber("config.idempotencyKeyTtlSeconds", config.idempotencyKeyTtlSeconds, 1, MAX_RETENTION_SECONDS)
  wholeNumber("config.providerCallTimeoutMillis", config.providerCallTimeoutMillis, 1)
  wholeNumber("config.providerPollMillis", config.providerPollMillis, 1)
  wholeNumber("config.outboxEntryRetentionSeconds", config.outboxEntryRetentionSeconds, 0, MAX_RETENTION_SECONDS)
  wholeNumber("config.webhookDeliveryRetentionSeconds", config.webhookDeliveryRetentionSeconds, 0, MAX_RETENTION_SECONDS)
  if (typeof config.activateOnApproval !== "boolean") throw new RangeError(`config.activateOnApproval must be true or false, got ${String(config.activateOnApproval)}`)
  return config
}
