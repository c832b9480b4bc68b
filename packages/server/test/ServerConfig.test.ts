/**
 * The server's environment settings: defaults for a newcomer, every variable honoured, nonsense refused at start.
 */
import { describe, expect, it } from "vitest"
import { configFromEnv, engineOf } from "../src/index.js"

describe("configFromEnv", () => {
  it("LIM-RATE-2: defaults to SQLite ./data/relay.db on 127.0.0.1:8080, 600 requests per 60 s, quorum 1, no control", () => {
    expect(configFromEnv({})).toEqual({
      port: 8080,
      host: "127.0.0.1",
      database: "./data/relay.db",
      rateLimit: { limit: 600, windowSeconds: 60 },
      rateLimitStore: undefined,
      rateLimitSyncMillis: 1000,
      rateLimitTimeoutMillis: 5000,
      redisUrl: undefined,
      redisTimeoutMillis: 1000,
      redisFailOpen: true,
      defaultRequiredApprovals: 1,
      controlToken: undefined,
      demo: "auto",
      logLevel: "Info",
      logSlowReadMillis: 1000,
      requestTimeoutMillis: 30_000,
      simulatedProvider: "live",
      simulatedStepMillis: 1000,
      simulatedFailurePercent: 0,
      providerPollMillis: 1000,
      idempotencyKeyTtlSeconds: 86_400,
      outboxEntryRetentionSeconds: 604_800,
      webhookDeliveryRetentionSeconds: 2_592_000,
      outboxConcurrency: 4,
      webhooksAllowPrivateTargets: false,
      databaseStartupTimeoutSeconds: 60,
      basePath: "",
      corsOrigins: undefined,
      postgres: { poolMax: 10, readReserve: 2, connectionTimeoutMillis: 10_000, lockTimeoutMillis: 5000, statementTimeoutMillis: 30_000, replyTimeoutMillis: 35_000, idleInTransactionTimeoutMillis: 10_000, preparedStatements: 256, trailCountsAtOnce: 1 }
    })
  })

  it("LIM-RATE-1: the redis rate-limit store needs a redis:// URL", () => {
    expect(() => configFromEnv({ RELAY_RATE_LIMIT_STORE: "redis" })).toThrow(/needs RELAY_REDIS_URL/)
    expect(() => configFromEnv({ RELAY_RATE_LIMIT_STORE: "redis", RELAY_REDIS_URL: "http://cache" })).toThrow(/redis:\/\/ or rediss:\/\//)
  })

  it("reads the base path and the CORS origins (a list or *), and refuses an origin with a path", () => {
    const config = configFromEnv({ RELAY_BASE_PATH: "/custody", RELAY_CORS_ORIGINS: "https://ops.example.com, http://localhost:5173" })
    expect([config.basePath, config.corsOrigins]).toEqual(["/custody", ["https://ops.example.com", "http://localhost:5173"]])
    expect(configFromEnv({ RELAY_CORS_ORIGINS: "*" }).corsOrigins).toBe("*")
    expect(() => configFromEnv({ RELAY_CORS_ORIGINS: "https://ops.example.com/app" })).toThrow(/RELAY_CORS_ORIGINS must be/)
  })

  it("reads every variable", () => {
    expect(configFromEnv({
      PORT: "9000",
      HOST: "0.0.0.0",
      RELAY_DATABASE: "postgres://relay@db/relay",
      RELAY_RATE_LIMIT: "50",
      RELAY_RATE_WINDOW_SECONDS: "10",
      RELAY_RATE_LIMIT_STORE: "redis",
      RELAY_REDIS_URL: "redis://cache:6379",
      RELAY_REDIS_TIMEOUT_MILLIS: "250",
      RELAY_REDIS_FAIL_OPEN: "false",
      RELAY_RATE_LIMIT_SYNC_MILLIS: "250",
      RELAY_RATE_LIMIT_TIMEOUT_MILLIS: "2000",
      RELAY_DEFAULT_QUORUM: "2",
      RELAY_TEST_CONTROL_TOKEN: "secret-token",
      RELAY_DEMO: "never",
      RELAY_LOG_LEVEL: "warn",
      RELAY_LOG_SLOW_READ_MILLIS: "250",
      RELAY_REQUEST_TIMEOUT_MILLIS: "5000",
      RELAY_SIMULATED_PROVIDER: "live",
      RELAY_SIMULATED_STEP_MILLIS: "250",
      RELAY_SIMULATED_FAILURE_PERCENT: "10",
      RELAY_PROVIDER_POLL_MILLIS: "100",
      RELAY_IDEMPOTENCY_KEY_TTL_SECONDS: "604800",
      RELAY_OUTBOX_RETENTION_SECONDS: "0",
      RELAY_WEBHOOK_DELIVERY_RETENTION_SECONDS: "86400",
      RELAY_OUTBOX_CONCURRENCY: "8",
      RELAY_DATABASE_STARTUP_TIMEOUT_SECONDS: "5",
      RELAY_WEBHOOKS_ALLOW_PRIVATE_TARGETS: "true",
      RELAY_PG_POOL_MAX: "20",
      RELAY_PG_READ_RESERVE: "4",
      RELAY_PG_CONNECTION_TIMEOUT_MILLIS: "2000",
      RELAY_PG_LOCK_TIMEOUT_MILLIS: "1000",
      RELAY_PG_STATEMENT_TIMEOUT_MILLIS: "9000",
      RELAY_PG_REPLY_TIMEOUT_MILLIS: "12000",
      RELAY_PG_IDLE_IN_TRANSACTION_TIMEOUT_MILLIS: "3000",
      RELAY_PG_PREPARED_STATEMENTS: "0",
      RELAY_PG_TRAIL_COUNTS_AT_ONCE: "4",
      RELAY_BASE_PATH: "/custody",
      RELAY_CORS_ORIGINS: "*"
    })).toEqual({
      port: 9000,
      host: "0.0.0.0",
      database: "postgres://relay@db/relay",
      rateLimit: { limit: 50, windowSeconds: 10 },
      rateLimitStore: "redis",
      rateLimitSyncMillis: 250,
      rateLimitTimeoutMillis: 2000,
      redisUrl: "redis://cache:6379",
      redisTimeoutMillis: 250,
      redisFailOpen: false,
      defaultRequiredApprovals: 2,
      controlToken: "secret-token",
      demo: "never",
      logLevel: "Warn",
      logSlowReadMillis: 250,
      requestTimeoutMillis: 5000,
      simulatedProvider: "live",
      simulatedStepMillis: 250,
      simulatedFailurePercent: 10,
      providerPollMillis: 100,
      idempotencyKeyTtlSeconds: 604_800,
      outboxEntryRetentionSeconds: 0,
      webhookDeliveryRetentionSeconds: 86_400,
      outboxConcurrency: 8,
      webhooksAllowPrivateTargets: true,
      databaseStartupTimeoutSeconds: 5,
      basePath: "/custody",
      corsOrigins: "*",
      postgres: { poolMax: 20, readReserve: 4, connectionTimeoutMillis: 2000, lockTimeoutMillis: 1000, statementTimeoutMillis: 9000, replyTimeoutMillis: 12_000, idleInTransactionTimeoutMillis: 3000, preparedStatements: 0, trailCountsAtOnce: 4 }
    })
  })

  it.each([["PORT", "80a"], ["PORT", "70000"], ["RELAY_RATE_LIMIT", "0"], ["RELAY_DEFAULT_QUORUM", "11"], ["RELAY_DEMO", "sometimes"], ["RELAY_RATE_LIMIT_STORE", "redis"], ["RELAY_RATE_LIMIT_STORE", "local"], ["RELAY_RATE_LIMIT_SYNC_MILLIS", "5"], ["RELAY_RATE_LIMIT_TIMEOUT_MILLIS", "5"], ["RELAY_RATE_LIMIT_TIMEOUT_MILLIS", "5s"], ["RELAY_REDIS_TIMEOUT_MILLIS", "1s"], ["RELAY_REDIS_TIMEOUT_MILLIS", "5"], ["RELAY_REDIS_FAIL_OPEN", "no"], ["RELAY_REQUEST_TIMEOUT_MILLIS", "30s"], ["RELAY_REQUEST_TIMEOUT_MILLIS", "50"], ["RELAY_PG_REPLY_TIMEOUT_MILLIS", "-1"], ["RELAY_PG_REPLY_TIMEOUT_MILLIS", "35s"], ["RELAY_PG_IDLE_IN_TRANSACTION_TIMEOUT_MILLIS", "10s"], ["RELAY_SIMULATED_PROVIDER", "sometimes"], ["RELAY_SIMULATED_FAILURE_PERCENT", "101"], ["RELAY_LOG_SLOW_READ_MILLIS", "-1"], ["RELAY_LOG_SLOW_READ_MILLIS", "1s"], ["RELAY_OUTBOX_CONCURRENCY", "0"], ["RELAY_OUTBOX_CONCURRENCY", "17"], ["RELAY_IDEMPOTENCY_KEY_TTL_SECONDS", "0"], ["RELAY_OUTBOX_RETENTION_SECONDS", "-1"], ["RELAY_OUTBOX_RETENTION_SECONDS", "7d"], ["RELAY_WEBHOOK_DELIVERY_RETENTION_SECONDS", "400000000"]])(
    "refuses %s=%s",
    (name, value) => {
      expect(() => configFromEnv({ [name]: value })).toThrow(name)
    }
  )

  it("the simulated provider is manual by default when the test control protocol is mounted (the kit moves records)", () => {
    expect(configFromEnv({ RELAY_TEST_CONTROL_TOKEN: "t" }).simulatedProvider).toBe("manual")
  })

  it("names the engine from the database setting", () => {
    expect(engineOf("postgres://x")).toBe("postgres")
    expect(engineOf("postgresql://x")).toBe("postgres")
    expect(engineOf(":memory:")).toBe("sqlite")
    expect(engineOf("./data/relay.db")).toBe("sqlite")
  })
})
