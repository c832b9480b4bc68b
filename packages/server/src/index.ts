/**
 * @custody-relay/server: the runnable Custody Relay. `createRelay` builds the HTTP handler on SQLite (default) or
 * PostgreSQL; `src/main.ts` serves it with node:http (`pnpm start`).
 */
export { createRelay, type RelayOptions, type RunningRelay } from "./createRelay.js"
export { demoText, seedDemo, type DemoCredentials } from "./seedDemo.js"
export { defaultRateLimitStore, engineOf, fromDatabase, type Engine, type RateLimitStore } from "./StorageLayer.js"
export { configFromEnv, type ServerConfig } from "./ServerConfig.js"
export { DEFAULT_COMMAND_TIMEOUT_MILLIS as DEFAULT_REDIS_COMMAND_TIMEOUT_MILLIS, layerRedis, type RedisRateLimiterOptions, RETRY_EVERY_MILLIS } from "./RedisRateLimiter.js"
export { nodeSecretDigest } from "./NodeSecretDigest.js"
export { layerNodeWebhookTransport, type ResolveAll } from "./WebhookTransport.js"
