/**
 * kysely's SQLite driver with one change: a transaction that may write begins with BEGIN IMMEDIATE, taking the
 * database's write lock before its first read. A deferred BEGIN would let two connections (two processes on one
 * file) both read a balance and then fail, or worse wait, when the second tries to write; IMMEDIATE makes the
 * second wait (busy_timeout) before it reads anything. A transaction started read-only stays deferred, so readers
 * never queue behind the writer (WAL).
 */
import {
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  type QueryCompiler,
  SqliteDialect,
  type TransactionSettings
} from "kysely"

type AbortableOptions = Parameters<Driver["init"]>[0]

export class WriteLockDriver implements Driver {
  readonly #inner: Driver
  constructor(inner: Driver) {
    this.#inner = inner
  }
  init(options?: AbortableOptions): Promise<void> {
    return this.#inner.init(options)
  }
  acquireConnection(options?: AbortableOptions): Promise<DatabaseConnection> {
    return this.#inner.acquireConnection(options)
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
  releaseConnection(connection: DatabaseConnection, options?: AbortableOptions): Promise<void> {
    return this.#inner.releaseConnection(connection, options)
  }
  destroy(options?: AbortableOptions): Promise<void> {
    return this.#inner.destroy(options)
  }
}

/** `SqliteDialect` whose driver is wrapped in {@link WriteLockDriver}. */
export class WriteLockSqliteDialect extends SqliteDialect {
  override createDriver(): Driver {
    return new WriteLockDriver(super.createDriver())
  }
}
