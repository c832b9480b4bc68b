/**
 * A relay ready to serve: the HTTP handler over SQL storage, with its configuration. This is what the server's
 * entry point runs and what the conformance kit starts in-process:
 *
 * ```ts
 * const relay = await createRelay({ database: ":memory:", controlToken: "x", rateLimit: { limit: 100000, windowSeconds: 60 } })
 * const response = await relay.handler(new Request("http://relay/relay/v1/accounts", { headers }))
 * await relay.close()
 * ```
 */
import { CustodyProvider, type OutboxWorker, Relay, type RelayConfig, type Storage, type Webhooks } from "@custody-relay/core"
import { type CorsOptions, makeHandler, type RateLimitOptions, type RelayHandler } from "@custody-relay/http"
import type { Logger, LogLevel } from "effect"
import * as ApiReferenceScript from "./ApiReferenceScript.js"
import { nodeSecretDigest } from "./NodeSecretDigest.js"
import { layerNodeWebhookTransport } from "./WebhookTransport.js"
import * as StorageLayer from "./StorageLayer.js"

export interface RelayOptions {
  /** A SQLite file path, ":memory:" (the default) or a postgres:// URL. */
  readonly database?: string
  /** Mounts the test control protocol at /__control with this token. Never set it in production. */
  readonly controlToken?: string
  /** Requests per window per API key (LIM-RATE-2); 600 per 60 s by default. */
  readonly rateLimit?: RateLimitOptions
  /** Where rate-limit windows are counted: "database" (shared by nodes) or "memory"; by engine by default. */
  readonly rateLimitStore?: StorageLayer.RateLimitStore
  /** Approvals a transaction from a new account needs; 1 by default. */
  readonly defaultRequiredApprovals?: number
  /**
   * Activate an account (assign its deposit address) as soon as it is approved; true by default, since the
   * embedded simulated custody provider has no later callback to do it.
   */
  readonly activateOnApproval?: boolean
  /**
   * The embedded simulated custody provider: a life cycle (transfers pass its policy, are broadcast and complete;
   * whitelisted addresses are approved after its review; timings in milliseconds), or "manual" (it reports no
   * progress; the test control protocol moves records). A life cycle by default, "manual" with a control token.
   */
  readonly provider?: "manual" | Partial<CustodyProvider.SimulatedLifecycle>
  /** How often the outbox worker polls the provider for progress, in milliseconds (1000 by default). */
  readonly providerPollMillis?: number
  /** How long a command's Idempotency-Key keeps its result for replay, in seconds (24 hours by default). */
  readonly idempotencyKeyTtlSeconds?: number
  /** How long an outbox entry is kept once done or given up, in seconds; 0 keeps them (7 days by default, see Retention). */
  readonly outboxEntryRetentionSeconds?: number
  /** How long a settled webhook delivery stays in its delivery log, in seconds; 0 keeps them (30 days by default). */
  readonly webhookDeliveryRetentionSeconds?: number
  /** The outbox worker's settings, or false to run none in this process. */
  readonly outbox?: false | Partial<OutboxWorker.WorkerOptions>
  /** Webhook settings (timeout, rotation grace, private targets). */
  readonly webhooks?: Partial<Webhooks.WebhookSettingsShape>
  /** PostgreSQL's pool and lock waits, and how long to wait for an unreachable database at start-up. */
  readonly databaseSettings?: StorageLayer.DatabaseSettings
  readonly maxBodyBytes?: number
  /** A path in front of /relay/v1, e.g. "/custody"; none by default. */
  readonly basePath?: string
  /** Browser callers from other origins; off by default. */
  readonly cors?: CorsOptions
  /** The API reference at /docs (Scalar, bundled) and a page at /; on by default. */
  readonly apiReference?: boolean
  /** Where log lines go; JSON lines on stdout by default. */
  readonly logger?: Logger.Logger<unknown, unknown>
  /**
   * "Warn" by default: an embedded relay stays quiet. The server's entry point runs at "Info": a line per command,
   * per refused or failed request and per slow read; "Debug" adds every read's.
   */
  readonly logLevel?: LogLevel.LogLevel
  /** From how long a successful read's line is logged at Info rather than Debug; 1000 ms by default. */
  readonly slowReadMillis?: number
}

export interface RunningRelay {
  readonly handler: RelayHandler<Storage.StorageError>
  /** Waits for requests in flight, then closes the database. */
  readonly close: () => Promise<void>
}

export const createRelay = async (options: RelayOptions = {}): Promise<RunningRelay> => {
  const config: Partial<RelayConfig.RelayConfigShape> = {
    activateOnApproval: options.activateOnApproval ?? true,
    ...(options.providerPollMillis === undefined ? {} : { providerPollMillis: options.providerPollMillis }),
    ...(options.idempotencyKeyTtlSeconds === undefined ? {} : { idempotencyKeyTtlSeconds: options.idempotencyKeyTtlSeconds }),
    ...(options.outboxEntryRetentionSeconds === undefined ? {} : { outboxEntryRetentionSeconds: options.outboxEntryRetentionSeconds }),
    ...(options.webhookDeliveryRetentionSeconds === undefined ? {} : { webhookDeliveryRetentionSeconds: options.webhookDeliveryRetentionSeconds }),
    ...(options.defaultRequiredApprovals === undefined ? {} : { defaultRequiredApprovals: options.defaultRequiredApprovals })
  }
  const handler = makeHandler({
    layer: Relay.layer(StorageLayer.fromDatabase(options.database ?? ":memory:", options.rateLimitStore, options.databaseSettings), {
      provider: CustodyProvider.layerSimulated({
        lifecycle: options.provider ?? (options.controlToken === undefined ? {} : "manual")
      }),
      secretDigest: nodeSecretDigest,
      // Checks the address a webhook's name resolves to, which the core cannot (WebhookTransport.ts).
      webhookTransport: layerNodeWebhookTransport()
    }),
    ...(options.outbox === undefined ? {} : { outbox: options.outbox }),
    ...(options.webhooks === undefined ? {} : { webhooks: options.webhooks }),
    config,
    logLevel: options.logLevel ?? "Warn",
    ...(options.slowReadMillis === undefined ? {} : { slowReadMillis: options.slowReadMillis }),
    ...(options.controlToken === undefined ? {} : { controlToken: options.controlToken }),
    ...(options.rateLimit === undefined ? {} : { rateLimit: options.rateLimit }),
    ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes }),
    ...(options.basePath === undefined ? {} : { basePath: options.basePath }),
    ...(options.cors === undefined ? {} : { cors: options.cors }),
    ...(options.apiReference === false ? {} : { reference: { script: ApiReferenceScript.read() } }),
    ...(options.logger === undefined ? {} : { logger: options.logger })
  })
  try {
    await handler.ready
  } catch (error) {
    await handler.dispose()
    throw error
  }
  return { handler, close: () => handler.dispose() }
}
