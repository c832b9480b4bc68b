/**
 * The pool's settings as `layerPostgres` uses them: a caller's `pool` option over the defaults, checked once. Both
 * the pool and the bound on write units read them from here, so the two cannot disagree about a setting the caller
 * left out (an absent field and one given as `undefined` both take the default).
 */

export interface PostgresPoolOptions {
  /** Connections per node; default 10. Each open unit of work holds one. */
  readonly max?: number
  /**
   * Connections write units may never take, kept for reads; default 2, and at most `max - 1`. A write unit can wait
   * on a row lock, and waiting units hold their connections: without a reserve, a burst of writes queued on one
   * account's lock would hold every connection and starve every other client's reads.
   */
  readonly readReserve?: number
  /** How long an idle connection stays open, in milliseconds; default 10000. */
  readonly idleTimeoutMillis?: number
  /** How long a unit waits for a free connection before it fails as StorageUnavailable (503); default 10000. */
  readonly connectionTimeoutMillis?: number
  /**
   * How long a statement waits for a row lock before it fails (55P03, and the unit is re-run); default 5000. It
   * bounds how long a waiter holds its connection while another unit (or a stuck session) holds the lock.
   */
  readonly lockTimeoutMillis?: number
  /** How long one statement may run before the server cancels it; default 30000. */
  readonly statementTimeoutMillis?: number
  /**
   * How long the client waits for the answer to each round trip of a unit (the statements it sends together), or to a
   * statement kysely runs itself (a migration's, the rate limiter's), before it gives the connection up; default 35000,
   * `statementTimeoutMillis` and 5 s for the answer to travel. The server's own timeouts do not reach a client the
   * network has cut off, nor end a frozen server's wait: past this bound the unit fails as unavailable (503 with
   * Retry-After), is not re-run, and the connection is closed (see Pipeline). Keep it above `statementTimeoutMillis`
   * (with that at 0, above the longest statement run, a long migration's included), or a statement the server would
   * still run is cut short by the client. 0 waits as long as TCP does (many minutes).
   */
  readonly replyTimeoutMillis?: number
  /**
   * How long a session may sit idle inside a transaction before the server ends it, rolling it back; default 10000.
   * A unit never waits between its round trips on anything but this process's own work, so a session idle that long
   * belongs to a node that was cut off from the database (a network that drops its packets), whose transaction holds
   * its row locks, and every other node's writes on those rows, until the server ends it.
   */
  readonly idleInTransactionTimeoutMillis?: number
  /**
   * How many statements each connection keeps prepared, parsed once (see PreparedStatements); default 256. 0 sends
   * every statement unnamed, for a pooler in transaction mode that does not carry prepared statements (PgBouncer
   * before 1.21, or without `max_prepared_statements`).
   */
  readonly preparedStatements?: number
}

export const poolDefaults = {
  max: 10,
  readReserve: 2,
  idleTimeoutMillis: 10_000,
  connectionTimeoutMillis: 10_000,
  lockTimeoutMillis: 5_000,
  statementTimeoutMillis: 30_000,
  replyTimeoutMillis: 35_000,
  idleInTransactionTimeoutMillis: 10_000,
  preparedStatements: 256
} as const satisfies Required<PostgresPoolOptions>

/** The settings a pool runs with, and how many write units may hold a connection at once. */
export interface PoolSettings extends Required<PostgresPoolOptions> {
  readonly writeUnits: number
}

/** `value`, or a RangeError naming the setting `label` when it is not a whole number of at least `least`. */
export const wholeNumber = (label: string, value: number, least: number): number => {
  if (!Number.isSafeInteger(value) || value < least) {
    throw new RangeError(`${label} must be a whole number of at least ${least}, got ${String(value)}`)
  }
  return value
}

const count = (name: keyof PostgresPoolOptions, value: number, least: number): number => wholeNumber(`pool.${name}`, value, least)

/**
 * `pool` over the defaults. A reserve of `max` or more leaves write units one connection (a pool of one connection
 * has no reserve). Throws a RangeError naming the setting that is not a whole number in range, so a mistyped
 * setting stops the layer before it opens anything, where pg would take it for its own default or no limit at all.
 */
export const poolSettings = (pool: PostgresPoolOptions | undefined): PoolSettings => {
  const max = count("max", pool?.max ?? poolDefaults.max, 1)
  const readReserve = Math.min(count("readReserve", pool?.readReserve ?? poolDefaults.readReserve, 0), max - 1)
  return {
    max,
    readReserve,
    writeUnits: max - readReserve,
    idleTimeoutMillis: count("idleTimeoutMillis", pool?.idleTimeoutMillis ?? poolDefaults.idleTimeoutMillis, 0),
    connectionTimeoutMillis: count("connectionTimeoutMillis", pool?.connectionTimeoutMillis ?? poolDefaults.connectionTimeoutMillis, 0),
    lockTimeoutMillis: count("lockTimeoutMillis", pool?.lockTimeoutMillis ?? poolDefaults.lockTimeoutMillis, 0),
    statementTimeoutMillis: count("statementTimeoutMillis", pool?.statementTimeoutMillis ?? poolDefaults.statementTimeoutMillis, 0),
    replyTimeoutMillis: count("replyTimeoutMillis", pool?.replyTimeoutMillis ?? poolDefaults.replyTimeoutMillis, 0),
    idleInTransactionTimeoutMillis: count(
      "idleInTransactionTimeoutMillis",
      pool?.idleInTransactionTimeoutMillis ?? poolDefaults.idleInTransactionTimeoutMillis,
      0
    ),
    preparedStatements: count("preparedStatements", pool?.preparedStatements ?? poolDefaults.preparedStatements, 0)
  }
}
