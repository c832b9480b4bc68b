/**
 * @custody-relay/server: the runnable Custody Relay. `createRelay` builds the HTTP handler on SQLite (default) or
 * PostgreSQL; `src/main.ts` serves it with node:http (`pnpm start`).
 */
export { createRelay, type RelayOptions, type RunningRelay } from "./createRelay.js"
export { seedDemo, type DemoCredentials } from "./seedDemo.js"
export { engineOf, fromDatabase, type Engine } from "./StorageLayer.js"
export { configFromEnv, type ServerConfig } from "./ServerConfig.js"
