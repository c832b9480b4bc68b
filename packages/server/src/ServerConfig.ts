/**
 * The server's configuration from the environment, checked at start-up so a typo stops the process with a clear
 * message instead of running with a default nobody chose.
 */
import { OutboxWorker, RateLimiter, RelayConfig } from "@custody-relay/core"
import { DEFAULT_RATE_LIMIT, DEFAULT_SLOW_READ_MILLIS } from "@custody-relay/http"
import { DEFAULT_REQUEST_TIMEOUT_MILLIS } from "@custody-relay/http/node"
import {
  DEFAULT_MAX_CONCURRENT_TRAIL_COUNTS,
  DEFAULT_RATE_LIMIT_SYNC_MILLIS,
  DEFAULT_RATE_LIMIT_TIMEOUT_MILLIS,
  POSTGRES_POOL_DEFAULTS
} from "@custody-relay/storage-sql"
import { DEFAULT_COMMAND_TIMEOUT_MILLIS as DEFAULT_REDIS_COMMAND_TIMEOUT_MILLIS } from "./RedisRateLimiter.js"

export interface ServerConfig {
  readonly port: number
  readonly host: string
  readonly database: string
  readonly rateLimit: { readonly limit: number; readonly windowSeconds: number }
  /** Undefined: by engine (database for PostgreSQL, memory for SQLite). */
  readonly rateLimitStore: "database" | "memory" | "redis" | "synced" | undefined
  /** How often the "synced" store reconciles its counts with the database. */
  readonly rateLimitSyncMillis: number
  /** How long a request waits for the database to count it (the "database" and "synced" stores) before a 503. */
  readonly rateLimitTimeoutMillis: number
  /** The Redis that counts rate-limit windows when rateLimitStore is "redis". */
  readonly redisUrl: string | undefined
  /** How long a request waits for Redis to count it before the fault policy decides. */
  readonly redisTimeoutMillis: number
  /** While Redis does not count: let requests through (true) or answer 503 (false). */
  readonly redisFailOpen: boolean
  readonly defaultRequiredApprovals: number
  readonly controlToken: string | undefined
  /** Seed the demo client: "auto" seeds a SQLite file that did not exist yet, or ":memory:". */
  readonly demo: "auto" | "always" | "never"
  readonly logLevel: "Trace" | "Debug" | "Info" | "Warn" | "Error" | "Fatal" | "None"
  /** From how long a successful read's line is logged at Info rather than Debug. */
  readonly logSlowReadMillis: number
  /** How long a client has to send a whole request before it is answered 408 (the node adapter's serve). */
  readonly requestTimeoutMillis: number
  /** The simulated provider: "live" moves records itself, "manual" leaves that to the control protocol. */
  readonly simulatedProvider: "live" | "manual"
  /** How long each stage of the simulated provider takes (policy, broadcast, confirmations, address review). */
  readonly simulatedStepMillis: number
  /** The share of simulated transfers that fail after broadcast, in percent. */
  readonly simulatedFailurePercent: number
  readonly providerPollMillis: number
  /** How long a command's Idempotency-Key keeps its result for replay, in seconds. */
  readonly idempotencyKeyTtlSeconds: number
  /** How long settled outbox entries and webhook deliveries are kept, in seconds; 0 keeps them (see Retention). */
  readonly outboxEntryRetentionSeconds: number
  readonly webhookDeliveryRetentionSeconds: number
  /** Lanes of outbox entries the worker carries out at once (OutboxWorker.WorkerOptions.concurrency). */
  readonly outboxConcurrency: number
  /** Whether webhook subscriptions may target loopback and private addresses (off: see Webhooks.WebhookSettings). */
  readonly webhooksAllowPrivateTargets: boolean
  /** How long to wait for an unreachable database at start-up, retrying. */
  readonly databaseStartupTimeoutSeconds: number
  /** A path in front of /relay/v1 ("" for none). */
  readonly basePath: string
  /** Origins allowed to call from a browser (CORS); undefined: CORS off. */
  readonly corsOrigins: ReadonlyArray<string> | "*" | undefined
  /**
   * PostgreSQL only: connections, connections kept for reads, the waits that bound a request, statements kept prepared,
   * and how many read units at once count a long stretch of the audit trail.
   */
  readonly postgres: {
    readonly poolMax: number
    readonly readReserve: number
    readonly connectionTimeoutMillis: number
    readonly lockTimeoutMillis: number
    readonly statementTimeoutMillis: number
    readonly replyTimeoutMillis: number
    readonly idleInTransactionTimeoutMillis: number
    readonly preparedStatements: number
    readonly trailCountsAtOnce: number
  }
}

export const DEFAULT_DATABASE = "./data/relay.db"

const integer = (env: NodeJS.ProcessEnv, name: string, fallback: number, minimum: number, maximum: number): number => {
  const raw = env[name]
  if (raw === undefined || raw === "") return fallback
  const value = /^[0-9]+$/.test(raw) ? Number(raw) : Number.NaN
  if (!Number.isSafeInteger(value) || value < minimum || value > maximum) {
    throw new Error(`${name} must be an integer from ${minimum} to ${maximum}, got ${JSON.stringify(raw)}`)
  }
  return value
}

const oneOf = <const V extends string>(env: NodeJS.ProcessEnv, name: string, values: ReadonlyArray<V>, fallback: V): V => {
  const raw = env[name]
  if (raw === undefined || raw === "") return fallback
  const found = values.find((v) => v.toLowerCase() === raw.toLowerCase())
  if (found === undefined) throw new Error(`${name} must be one of ${values.join(", ")}, got ${JSON.stringify(raw)}`)
  return found
}

/** RELAY_REDIS_URL, required when RELAY_RATE_LIMIT_STORE is redis. */
const redisUrl = (env: NodeJS.ProcessEnv): string | undefined => {
  const raw = env["RELAY_REDIS_URL"]
  if (raw === undefined || raw === "") {
    if (env["RELAY_RATE_LIMIT_STORE"]?.toLowerCase() === "redis") throw new Error("RELAY_RATE_LIMIT_STORE=redis needs RELAY_REDIS_URL (redis://host:6379)")
    return undefined
  }
  if (!/^rediss?:\/\//.test(raw)) throw new Error(`RELAY_REDIS_URL must be a redis:// or rediss:// URL, got ${JSON.stringify(raw)}`)
  return raw
}

/** RELAY_CORS_ORIGINS: "*" or a comma-separated list of origins (scheme, host and port, no path). */
const corsOrigins = (raw: string | undefined): ReadonlyArray<string> | "*" | undefined => {
  if (raw === undefined || raw.trim() === "") return undefined
  if (raw.trim() === "*") return "*"
  const origins = raw.split(",").map((origin) => origin.trim()).filter((origin) => origin.length > 0)
  for (const origin of origins) {
    if (!/^https?:\/\/[^/\s]+$/.test(origin)) throw new Error(`RELAY_CORS_ORIGINS must be "*" or origins like https://ops.example.com, got ${JSON.stringify(origin)}`)
  }
  return origins
}

export const configFromEnv = (env: NodeJS.ProcessEnv = process.env): ServerConfig => {
  const token = env["RELAY_TEST_CONTROL_TOKEN"]
  const relayDefaults = RelayConfig.RelayConfig.defaultValue()
  const pool = POSTGRES_POOL_DEFAULTS
  return {
    port: integer(env, "PORT", 8080, 0, 65535),
    host: env["HOST"] || "127.0.0.1",
    database: env["RELAY_DATABASE"] || DEFAULT_DATABASE,
    rateLimit: {
      limit: integer(env, "RELAY_RATE_LIMIT", DEFAULT_RATE_LIMIT.limit, 1, RateLimiter.MAX_LIMIT),
      windowSeconds: integer(env, "RELAY_RATE_WINDOW_SECONDS", DEFAULT_RATE_LIMIT.windowSeconds, 1, RateLimiter.MAX_WINDOW_SECONDS)
    },
    rateLimitStore: env["RELAY_RATE_LIMIT_STORE"] ? oneOf(env, "RELAY_RATE_LIMIT_STORE", ["database", "memory", "redis", "synced"], "memory") : undefined,
    rateLimitSyncMillis: integer(env, "RELAY_RATE_LIMIT_SYNC_MILLIS", DEFAULT_RATE_LIMIT_SYNC_MILLIS, 10, 3_600_000),
    rateLimitTimeoutMillis: integer(env, "RELAY_RATE_LIMIT_TIMEOUT_MILLIS", DEFAULT_RATE_LIMIT_TIMEOUT_MILLIS, 10, 600_000),
    redisUrl: redisUrl(env),
    redisTimeoutMillis: integer(env, "RELAY_REDIS_TIMEOUT_MILLIS", DEFAULT_REDIS_COMMAND_TIMEOUT_MILLIS, 10, 600_000),
    redisFailOpen: oneOf(env, "RELAY_REDIS_FAIL_OPEN", ["true", "false"], "true") === "true",
    defaultRequiredApprovals: integer(env, "RELAY_DEFAULT_QUORUM", relayDefaults.defaultRequiredApprovals, 0, 10),
    controlToken: token === undefined || token === "" ? undefined : token,
    demo: oneOf(env, "RELAY_DEMO", ["auto", "always", "never"], "auto"),
    logLevel: oneOf(env, "RELAY_LOG_LEVEL", ["Trace", "Debug", "Info", "Warn", "Error", "Fatal", "None"], "Info"),
    logSlowReadMillis: integer(env, "RELAY_LOG_SLOW_READ_MILLIS", DEFAULT_SLOW_READ_MILLIS, 0, 3_600_000),
    requestTimeoutMillis: integer(env, "RELAY_REQUEST_TIMEOUT_MILLIS", DEFAULT_REQUEST_TIMEOUT_MILLIS, 100, 3_600_000),
    // With the test control protocol, the kit moves records itself: a provider that also moved them would race it.
    simulatedProvider: oneOf(env, "RELAY_SIMULATED_PROVIDER", ["live", "manual"], token === undefined || token === "" ? "live" : "manual"),
    simulatedStepMillis: integer(env, "RELAY_SIMULATED_STEP_MILLIS", 1000, 0, 3_600_000),
    simulatedFailurePercent: integer(env, "RELAY_SIMULATED_FAILURE_PERCENT", 0, 0, 100),
    providerPollMillis: integer(env, "RELAY_PROVIDER_POLL_MILLIS", relayDefaults.providerPollMillis, 10, 3_600_000),
    idempotencyKeyTtlSeconds: integer(env, "RELAY_IDEMPOTENCY_KEY_TTL_SECONDS", relayDefaults.idempotencyKeyTtlSeconds, 1, RelayConfig.MAX_RETENTION_SECONDS),
    outboxEntryRetentionSeconds: integer(env, "RELAY_OUTBOX_RETENTION_SECONDS", relayDefaults.outboxEntryRetentionSeconds, 0, RelayConfig.MAX_RETENTION_SECONDS),
    webhookDeliveryRetentionSeconds: integer(env, "RELAY_WEBHOOK_DELIVERY_RETENTION_SECONDS", relayDefaults.webhookDeliveryRetentionSeconds, 0, RelayConfig.MAX_RETENTION_SECONDS),
    outboxConcurrency: integer(env, "RELAY_OUTBOX_CONCURRENCY", OutboxWorker.defaults.concurrency, 1, OutboxWorker.defaults.batch),
    webhooksAllowPrivateTargets: oneOf(env, "RELAY_WEBHOOKS_ALLOW_PRIVATE_TARGETS", ["true", "false"], "false") === "true",
    databaseStartupTimeoutSeconds: integer(env, "RELAY_DATABASE_STARTUP_TIMEOUT_SECONDS", 60, 0, 86_400),
    basePath: env["RELAY_BASE_PATH"] ?? "",
    corsOrigins: corsOrigins(env["RELAY_CORS_ORIGINS"]),
    postgres: {
      poolMax: integer(env, "RELAY_PG_POOL_MAX", pool.max, 2, 1000),
      readReserve: integer(env, "RELAY_PG_READ_RESERVE", pool.readReserve, 0, 999),
      connectionTimeoutMillis: integer(env, "RELAY_PG_CONNECTION_TIMEOUT_MILLIS", pool.connectionTimeoutMillis, 0, 600_000),
      lockTimeoutMillis: integer(env, "RELAY_PG_LOCK_TIMEOUT_MILLIS", pool.lockTimeoutMillis, 0, 600_000),
      statementTimeoutMillis: integer(env, "RELAY_PG_STATEMENT_TIMEOUT_MILLIS", pool.statementTimeoutMillis, 0, 3_600_000),
      replyTimeoutMillis: integer(env, "RELAY_PG_REPLY_TIMEOUT_MILLIS", pool.replyTimeoutMillis, 0, 3_600_000),
      idleInTransactionTimeoutMillis: integer(env, "RELAY_PG_IDLE_IN_TRANSACTION_TIMEOUT_MILLIS", pool.idleInTransactionTimeoutMillis, 0, 3_600_000),
      preparedStatements: integer(env, "RELAY_PG_PREPARED_STATEMENTS", pool.preparedStatements, 0, 10_000),
      trailCountsAtOnce: integer(env, "RELAY_PG_TRAIL_COUNTS_AT_ONCE", DEFAULT_MAX_CONCURRENT_TRAIL_COUNTS, 1, 1000)
    }
  }
}
