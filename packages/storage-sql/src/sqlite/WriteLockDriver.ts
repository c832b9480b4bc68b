/**
 * kysely's SQLite driver with one change: a transaction that may write begins with BEGIN IMMEDIATE, taking the
 * database's write lock before its first read. A deferred BEGIN would let two connections (two processes on one
 * file) both read a balance and then fail, or worse wait, when the second tries to write; IMMEDIATE makes the
 * second wait (busy_timeout) before it reads anything. A transaction started read-only stays deferred, so readers
 * never queue behind the writer (WAL).
 *
 * It also takes the connection's {@link ConnectionGate} for as long as kysely holds the connection, so kysely's
 * work and the storage's direct sessions (SqliteSession) never interleave on the one connection, and commits the
 * open group of write units first (see CommitGroup), so kysely's statements are never part of it. `released` is
 * told each time kysely gives the connection back, after whatever it committed (see LookupSnapshot).
 */
import {
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  type QueryCompiler,
  SqliteDialect,
  type SqliteDialectConfig,
  type TransactionSettings
} from "kysely"
import type { CommitGroup } from "./CommitGroup.js"
import type { ConnectionGate } from "./ConnectionGate.js"

type AbortableOptions = Parameters<Driver["init"]>[0]

export class WriteLockDriver implements Driver {
  readonly #inner: Driver
  readonly #gate: ConnectionGate
  readonly #beforeDestroy: () => Promise<void>
  readonly #commits: CommitGroup | undefined
  readonly #released: () => void
  constructor(
    inner: Driver,
    gate: ConnectionGate,
    beforeDestroy: () => Promise<void> = () => Promise.resolve(),
    commits?: CommitGroup,
    released: () => void = () => {}
  ) {
    this.#inner = inner
    this.#gate = gate
    this.#beforeDestroy = beforeDestroy
    this.#commits = commits
    this.#released = released
  }
  init(options?: AbortableOptions): Promise<void> {
    return this.#inner.init(options)
  }
  async acquireConnection(options?: AbortableOptions): Promise<DatabaseConnection> {
    await this.#gate.take()
    try {
      this.#commits?.flush()
      return await this.#inner.acquireConnection(options)
    } catch (error) {
      this.#gate.give()
      throw error
    }
  }
  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(settings.accessMode === "read only" ? "begin deferred" : "begin immediate"))
  }
  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.#inner.commitTransaction(connection)
  }
  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    return this.#inner.rollbackTransaction(connection)
  }
  async savepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler["compileQuery"]): Promise<void> {
    await this.#inner.savepoint?.(connection, name, compile)
  }
  async rollbackToSavepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler["compileQuery"]): Promise<void> {
    await this.#inner.rollbackToSavepoint?.(connection, name, compile)
  }
  async releaseSavepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler["compileQuery"]): Promise<void> {
    await this.#inner.releaseSavepoint?.(connection, name, compile)
  }
  async releaseConnection(connection: DatabaseConnection, options?: AbortableOptions): Promise<void> {
    try {
      await this.#inner.releaseConnection(connection, options)
    } finally {
      this.#released()
      this.#gate.give()
    }
  }
  async destroy(options?: AbortableOptions): Promise<void> {
    await this.#beforeDestroy()
    await this.#inner.destroy(options)
  }
}

/**
 * `SqliteDialect` whose driver is wrapped in {@link WriteLockDriver}; `beforeDestroy` runs before the connection
 * closes (openSqlite commits the open group of write units and stops the checkpoint worker there).
 */
export class WriteLockSqliteDialect extends SqliteDialect {
  readonly #gate: ConnectionGate
  readonly #beforeDestroy: (() => Promise<void>) | undefined
  readonly #commits: CommitGroup | undefined
  readonly #released: (() => void) | undefined
  constructor(
    config: SqliteDialectConfig,
    gate: ConnectionGate,
    beforeDestroy?: () => Promise<void>,
    commits?: CommitGroup,
    released?: () => void
  ) {
    super(config)
    this.#gate = gate
    this.#beforeDestroy = beforeDestroy
    this.#commits = commits
    this.#released = released
  }
  override createDriver(): Driver {
    return new WriteLockDriver(super.createDriver(), this.#gate, this.#beforeDestroy, this.#commits, this.#released)
  }
}
