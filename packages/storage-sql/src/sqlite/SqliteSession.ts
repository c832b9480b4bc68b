/**
 * Units of work on SQLite straight through better-sqlite3. better-sqlite3 is synchronous, so a unit whose
 * connection is free begins, runs every statement and commits without a single promise or fiber suspension; the
 * same unit through kysely's driver pays an async round of kysely's executor per statement (about ten times the
 * statement itself; see docs/benchmarks.md). Statements are still built and compiled by kysely: only the way they
 * reach the connection differs. The connection is shared with kysely (migrations, the rate limiter) through the
 * {@link ConnectionGate}.
 */
import type { Storage } from "@custody-relay/core"
import { Effect } from "effect"
import { CompiledQuery, type Kysely, type QueryResult, type SqliteDatabase } from "kysely"
import type { Database } from "../schema/Database.js"
import type { CredentialCheck, SessionOpener, SqlSession } from "../SqlSession.js"
import { classifySqliteError } from "./classifySqliteError.js"
import type { Checkpointer } from "./Checkpointer.js"
import type { CommitGroup, Part } from "./CommitGroup.js"
import type { ConnectionGate } from "./ConnectionGate.js"
import type { LookupSnapshot } from "./LookupSnapshot.js"
import type { ReadWorker } from "./ReadWorker.js"

/** What a direct session needs of an open file: its (statement-caching) handle and its gate. */
export interface SqliteHandle {
  readonly database: SqliteDatabase
  /** Whether a transaction is open on the connection (better-sqlite3's `inTransaction`). */
  readonly inTransaction: () => boolean
  readonly gate: ConnectionGate
  /** The WAL checkpoint worker of a file database (see Checkpointer); none in memory or when turned off. */
  readonly checkpointer?: Checkpointer
  /** The worker that reads off the event loop (see ReadWorker); a file database only, unless turned off. */
  readonly readWorker?: ReadWorker
  /**
   * Write units sharing commits (see CommitGroup), with the lookups that read meanwhile through a read-only
   * connection to the same file (see LookupSnapshot); a file database only, unless turned off.
   */
  readonly grouped?: { readonly commits: CommitGroup; readonly lookups: LookupSnapshot }
}

// Which kysely instances have a handle; filled by openSqlite. A kysely made any other way uses kysely's sessions.
const handles = new WeakMap<Kysely<Database>, SqliteHandle>()

export const register = (db: Kysely<Database>, handle: SqliteHandle): void => {
  handles.set(db, handle)
}

export const handleOf = (db: Kysely<Database>): SqliteHandle | undefined => handles.get(db)

/**
 * Runs one statement. `wrote` is told when it changed rows: a statement that returns rows only when better-sqlite3
 * says it is not read-only (`RETURNING`), any other when it changed at least one row.
 */
const run = <R>(database: SqliteDatabase, query: CompiledQuery<R>, wrote?: () => void): QueryResult<R> => {
  const statement = database.prepare(query.sql)
  if (statement.reader) {
    const rows = statement.all(query.parameters) as Array<R>
    if (wrote !== undefined && (statement as { readonly readonly?: boolean }).readonly === false) wrote()
    return { rows }
  }
  const { changes } = statement.run(query.parameters)
  if (wrote !== undefined && changes > 0) wrote()
  return { rows: [], numAffectedRows: BigInt(changes) }
}

/**
 * Moves whenever another connection commits to the file: on a read-only connection, every commit (this process's
 * writer, another process: the operator CLI, a second server). Inside a read transaction it stays at the
 * transaction's snapshot.
 */
export const DATA_VERSION = CompiledQuery.raw("pragma data_version") as CompiledQuery<Readonly<Record<string, unknown>>>

/** The version in what {@link DATA_VERSION} answered. */
export const dataVersionOf = (rows: ReadonlyArray<unknown>): number =>
  Number((rows[0] as { readonly data_version?: unknown } | undefined)?.data_version)

// A unit that may write takes the write lock before its first read; see WriteLockDriver.
const BEGIN_READ = CompiledQuery.raw("begin deferred")
const BEGIN_WRITE = CompiledQuery.raw("begin immediate")
const COMMIT = CompiledQuery.raw("commit")
const ROLLBACK = CompiledQuery.raw("rollback")

export const sessions = ({ database, inTransaction, gate, grouped, readWorker }: SqliteHandle): SessionOpener => {
  const execute = (on: SqliteDatabase, wrote?: () => void, before?: () => void) => <R>(query: CompiledQuery<R>) =>
    Effect.try({
      try() {
        before?.()
        return run(on, query, wrote)
      },
      catch: classifySqliteError
    })
  // What a write unit's statements change, the commit group must know to undo it (CommitGroup.abandon).
  const commits = grouped?.commits
  const session: SqlSession = {
    servesManyUnits: true,
    execute: execute(database, commits === undefined ? undefined : () => commits.wrote()),
    commit: Effect.try({
      try() {
        run(database, COMMIT)
      },
      catch: classifySqliteError
    }),
    release: Effect.sync(() => {
      try {
        if (inTransaction()) run(database, ROLLBACK)
      } catch {
        // SQLite has already ended a transaction whose rollback fails; nothing is left open.
      }
      gate.give()
    })
  }
  const begin = (mode: "read" | "write") =>
    Effect.try({
      try() {
        // A read unit's snapshot must not see a group's writes before they are committed (see CommitGroup).
        grouped?.commits.flush()
        run(database, mode === "read" ? BEGIN_READ : BEGIN_WRITE)
        return session
      },
      catch(cause) {
        gate.give()
        return classifySqliteError(cause)
      }
    })
  const beginRead = begin("read")
  const offLoop = readWorker === undefined ? {} : {
    readOffLoop: <R>(query: CompiledQuery<R>) => Effect.tryPromise({ try: () => readWorker.read(query), catch: classifySqliteError })
  }
  if (grouped === undefined) {
    // A lookup holds the connection like any unit but begins no transaction: each statement is its own.
    const lookupSession: SqlSession = { servesManyUnits: true, execute: session.execute, commit: Effect.void, release: Effect.sync(() => gate.give()) }
    const lookup = Effect.as(gate.takeEffect, lookupSession)
    const beginWrite = begin("write")
    return Object.assign(
      (mode: Storage.UnitMode) => mode === "lookup" ? lookup : Effect.andThen(gate.takeEffect, mode === "read" ? beginRead : beginWrite),
      offLoop
    )
  }
  // Lookups read what is committed through the read-only connection, with no gate, in the turn's read transaction
  // (see LookupSnapshot): none waits for a write unit or sees a group's writes before they are committed.
  const { lookups } = grouped
  const { reader } = lookups
  const openLookup: SqlSession = {
    servesManyUnits: true,
    execute: execute(reader, undefined, () => lookups.enter()),
    commit: Effect.void,
    release: Effect.void
  }
  const lookup = Effect.succeed(openLookup)
  const commitVersion = Effect.try({ try: () => lookups.currentVersion(), catch: classifySqliteError })
  const beginWriteIn = (again: boolean) =>
    Effect.andThen(gate.takeEffect, Effect.try({
      try() {
        // Run again, a unit begins its own group, reading only what is committed (see SessionOpener).
        if (again) grouped.commits.flush()
        return groupedWriteSession(session, grouped.commits, grouped.commits.enter(), gate)
      },
      catch(cause) {
        gate.give()
        return classifySqliteError(cause)
      }
    }))
  const beginWrite = beginWriteIn(false)
  const beginWriteAgain = beginWriteIn(true)
  return Object.assign(
    (mode: Storage.UnitMode, _check?: CredentialCheck, again?: boolean) =>
      mode === "lookup" ? lookup : mode === "read" ? Effect.andThen(gate.takeEffect, beginRead) : again === true ? beginWriteAgain : beginWrite,
    { openLookup, commitVersion, ...offLoop }
  )
}

/**
 * A write unit's session in a commit group: its commit gives the connection back and waits for the group's COMMIT
 * (uninterruptibly: once kept, its writes commit with the group's, and the caller learns the outcome), and so does
 * its failure when it joined the group (see CommitGroup.failed). Made per unit, since a unit waiting for its group's
 * commit and the next unit on the connection are both alive.
 */
const groupedWriteSession = (
  runsAs: SqlSession,
  commits: CommitGroup,
  part: Part,
  gate: ConnectionGate
): SqlSession => {
  let holding = true
  return {
    execute: runsAs.execute,
    runsAs,
    commit: Effect.uninterruptible(Effect.callback<void, Storage.StorageError>((resume) => {
      try {
        commits.keep((failure) => resume(failure === undefined ? Effect.void : Effect.fail(failure)))
      } catch (cause) {
        resume(Effect.fail(classifySqliteError(cause)))
        return
      }
      holding = false
      gate.give()
    })),
    release: Effect.sync(() => {
      if (!holding) return
      holding = false
      commits.abandon(part)
      gate.give()
    }),
    failed: Effect.suspend(() => {
      if (!holding) return Effect.void
      holding = false
      return Effect.callback<void, Storage.StorageError>((resume) => {
        const answered = (failure: Storage.StorageError | undefined) => resume(failure === undefined ? Effect.void : Effect.fail(failure))
        const now = commits.failed(part, answered)
        // Resumed only after the connection is given back, as a kept unit is (CommitGroup): it may run again at once.
        gate.give()
        if (now !== undefined) answered(now.replacedBy)
      })
    })
  }
}
