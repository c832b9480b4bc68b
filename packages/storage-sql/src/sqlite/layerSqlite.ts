/**
 * Storage and RateLimiter on an embedded SQLite file through better-sqlite3: nothing to run, one file to back
 * up. The connection is set up for a store several processes may share:
 * - WAL: readers never block the writer nor it them, and a crash loses no committed transaction.
 * - synchronous=NORMAL: in WAL mode a commit survives a process crash (SIGKILL included); only a power loss can
 *   drop the last commits, never corrupt the file.
 * - busy_timeout: a writer waits this long for another process's write lock before its unit is re-run.
 * - foreign_keys=ON: SQLite checks the references only when asked, per connection.
 * - WAL checkpoints run on a worker thread, off the request path (see Checkpointer); a file database only.
 * - A deep page's first walk, and an audit trail's first count, step on another worker thread, with its own
 *   read-only connection (see ReadWorker, PageBoundaries and TrailCounts); a file database only.
 * Write units begin IMMEDIATE (see WriteLockDriver); prepared statements are kept (see StatementCache); units of
 * work run straight on the connection, synchronously (see SqliteSession); write units in one turn of the event loop
 * share a commit, and lookups read through a second, read-only connection (see CommitGroup), a file only.
 * better-sqlite3 is loaded when the layer is built, so a PostgreSQL-only application need not install it.
 */
import type { RateLimiter, Storage } from "@custody-relay/core"
import type { Database as BetterSqliteDatabase } from "better-sqlite3"
import { Kysely } from "kysely"
import type { Layer } from "effect"
import type { Database } from "../schema/Database.js"
import * as SqlLayer from "../SqlLayer.js"
import type { SqlStorageOptions } from "../SqlStorage.js"
import * as Checkpointer from "./Checkpointer.js"
import { CommitGroup } from "./CommitGroup.js"
import { ConnectionGate } from "./ConnectionGate.js"
import { LookupSnapshot } from "./LookupSnapshot.js"
import { readWorker } from "./ReadWorker.js"
import { SqliteEngine } from "./SqliteEngine.js"
import * as SqliteSession from "./SqliteSession.js"
import { withStatementCache } from "./StatementCache.js"
import { WriteLockSqliteDialect } from "./WriteLockDriver.js"

export interface SqliteOptions extends SqlStorageOptions {
  /** A file path, or ":memory:" for a private database that lives as long as the layer. */
  readonly filename: string
  /** How long a write waits for another connection's write lock, in milliseconds; default 5000. */
  readonly busyTimeoutMillis?: number
  /**
   * How often the worker thread checkpoints the WAL, in milliseconds; default 100. 0 leaves checkpoints to SQLite
   * (inside the commit that passes 1000 pages of log), as a plain better-sqlite3 connection does.
   */
  readonly checkpointIntervalMillis?: number
  /**
   * Whether write units that run in the same turn of the event loop share one commit (see CommitGroup), with
   * lookups on a second, read-only connection; default true for a file, always false in memory.
   */
  readonly groupCommits?: boolean
  /**
   * Whether a deep page's first walk, and an audit trail's first count, step on a worker thread with its own
   * read-only connection (see ReadWorker, TrailCounts), leaving the event loop to other requests; default true for a
   * file, always false in memory. Off, they step on the event loop and pause every millisecond to let other
   * requests run.
   */
  readonly readWorker?: boolean
}

export const DEFAULT_BUSY_TIMEOUT_MILLIS = 5_000

/** Opens and configures the file; exported for tools and tests that need the kysely instance itself. */
export const openSqlite = async (options: SqliteOptions): Promise<Kysely<Database>> => {
  const { default: BetterSqlite3 } = await import("better-sqlite3")
  const busyTimeoutMillis = options.busyTimeoutMillis ?? DEFAULT_BUSY_TIMEOUT_MILLIS
  const database = new BetterSqlite3(options.filename, { timeout: busyTimeoutMillis })
  const intervalMillis = options.checkpointIntervalMillis ?? Checkpointer.DEFAULT_CHECKPOINT_INTERVAL_MILLIS
  const inFile = options.filename !== ":memory:" && options.filename !== ""
  const checkpointsOnWorker = inFile && intervalMillis > 0
  try {
    database.pragma("journal_mode = WAL")
    database.pragma("synchronous = NORMAL")
    database.pragma("foreign_keys = ON")
    if (checkpointsOnWorker) database.pragma(`wal_autocheckpoint = ${Checkpointer.FALLBACK_AUTOCHECKPOINT_PAGES}`)
  } catch (error) {
    database.close()
    throw error
  }
  let reader: InstanceType<typeof BetterSqlite3> | undefined
  let versions: InstanceType<typeof BetterSqlite3> | undefined
  try {
    // Opened after the file is in WAL mode, which a read-only connection cannot set.
    if (inFile && options.groupCommits !== false) {
      reader = new BetterSqlite3(options.filename, { readonly: true, fileMustExist: true, timeout: busyTimeoutMillis })
      versions = new BetterSqlite3(options.filename, { readonly: true, fileMustExist: true, timeout: busyTimeoutMillis })
    }
  } catch (error) {
    reader?.close()
    database.close()
    throw error
  }
  const checkpointer = checkpointsOnWorker ? Checkpointer.startCheckpointer({ filename: options.filename, intervalMillis, busyTimeoutMillis }) : undefined
  const reads = inFile && options.readWorker !== false ? readWorker({ filename: options.filename, busyTimeoutMillis }) : undefined
  const gate = new ConnectionGate()
  const inTransaction = () => database.inTransaction
  const cached = withStatementCache(database)
  const lookups = reader === undefined || versions === undefined ? undefined : lookupSnapshot(reader, versions)
  const grouped = lookups === undefined
    ? undefined
    : { commits: new CommitGroup(cached, inTransaction, gate, () => lookups.end()), lookups }
  const handle: SqliteSession.SqliteHandle = {
    database: cached,
    inTransaction,
    gate,
    ...(checkpointer === undefined ? {} : { checkpointer }),
    ...(reads === undefined ? {} : { readWorker: reads }),
    ...(grouped === undefined ? {} : { grouped })
  }
  const beforeDestroy = async () => {
    // The open group commits before the file closes.
    await gate.take()
    try {
      grouped?.commits.flush()
    } finally {
      gate.give()
    }
    lookups?.end()
    reader?.close()
    versions?.close()
    await reads?.stop()
    await checkpointer?.stop()
  }
  const db = new Kysely<Database>({
    dialect: new WriteLockSqliteDialect({ database: handle.database }, gate, beforeDestroy, grouped?.commits, lookups === undefined ? undefined : () => lookups.end())
  })
  SqliteSession.register(db, handle)
  return db
}

/** Lookups through `reader`, sharing read transactions while `versions` (see LookupSnapshot) says nothing committed. */
const lookupSnapshot = (reader: BetterSqliteDatabase, versions: BetterSqliteDatabase): LookupSnapshot => {
  const dataVersion = versions.prepare<[], number>(SqliteSession.DATA_VERSION.sql).pluck()
  return new LookupSnapshot(withStatementCache(reader), () => reader.inTransaction, () => Number(dataVersion.get()))
}

export const layerSqlite = (
  options: SqliteOptions
): Layer.Layer<Storage.Storage | RateLimiter.RateLimiter, Storage.StorageError> =>
  SqlLayer.make(SqlLayer.scoped(() => openSqlite(options), SqliteEngine), SqliteEngine, options)
