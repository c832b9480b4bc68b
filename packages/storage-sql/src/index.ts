/**
 * @custody-relay/storage-sql: the core's Storage and RateLimiter ports on SQL, through kysely. Embedded SQLite
 * (better-sqlite3, one file) by default; PostgreSQL (pg) for several nodes on one database. Each layer opens the
 * database, migrates it to the latest schema and closes it when released.
 *
 * ```ts
 * import { Relay } from "@custody-relay/core"
 * import { layerSqlite } from "@custody-relay/storage-sql"
 *
 * const RelayLive = Relay.layer(layerSqlite({ filename: "relay.db" }))
 * ```
 */
export { layerSqlite, type SqliteOptions } from "./sqlite/layerSqlite.js"
export { layerPostgres, type PostgresOptions } from "./postgres/layerPostgres.js"
export { poolDefaults as POSTGRES_POOL_DEFAULTS, type PostgresPoolOptions } from "./postgres/PoolSettings.js"
export { migrateToLatest, SchemaNewerThanRelease } from "./migrations/migrateToLatest.js"
export {
  DEFAULT_COUNT_TIMEOUT_MILLIS as DEFAULT_RATE_LIMIT_TIMEOUT_MILLIS,
  DEFAULT_SYNC_MILLIS as DEFAULT_RATE_LIMIT_SYNC_MILLIS
} from "./SqlRateLimiter.js"
export { DEFAULT_MAX_CONCURRENT_TRAIL_COUNTS, type SqlStorageOptions } from "./SqlStorage.js"
export type {
  AccountsTable,
  ApiUsersTable,
  ClientsTable,
  Database,
  DomainEventsTable,
  IdempotencyKeysTable,
  OutboxEntriesTable,
  LedgerEntriesTable,
  RateLimitWindowsTable,
  TransactionCountsTable,
  TransactionsTable,
  WhitelistedAddressesTable
} from "./schema/Database.js"
