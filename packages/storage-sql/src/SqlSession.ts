/**
 * One open database transaction, as a unit of work sees it: it runs compiled statements, commits, and is released
 * (rolled back if still open, its connection given back) whatever happened. The storage builds every statement
 * with kysely and hands it here compiled, so how a statement reaches the database is the engine's choice: through
 * kysely's driver (`kyselySessions`, every engine), straight to better-sqlite3 (see sqlite/SqliteSession.ts),
 * where a unit's statements run synchronously with no promise in between, or to a pg client several statements
 * per round trip (see postgres/PostgresSession.ts).
 */
import type { Storage } from "@custody-relay/core"
import { Effect } from "effect"
import type { CompiledQuery, Kysely, QueryResult } from "kysely"
import type { Database } from "./schema/Database.js"
import type { SqlEngine } from "./SqlEngine.js"
import * as StorageFailure from "./StorageFailure.js"

/** Judges a write's answer by the rows it changed: a refusal fails the unit. */
export type WriteCheck = (affected: number) => Storage.StorageError | undefined

export interface SqlSession {
  readonly execute: <R>(query: CompiledQuery<R>) => Effect.Effect<QueryResult<R>, Storage.StorageError>
  /**
   * A write the unit does not wait for, on an engine that can send it with the unit's next statement (see
   * postgres/PostgresSession.ts); `check` judges its answer when it arrives. `sure`: the database itself
   * guarantees the answer the check expects, or fails the statement (see Statements.writeLater), so the write may
   * go with the COMMIT. Absent, the write runs at once.
   */
  readonly queue?: (query: CompiledQuery, check: WriteCheck, sure: boolean) => Effect.Effect<void, Storage.StorageError>
  readonly commit: Effect.Effect<void, Storage.StorageError>
  /** Rolls back what was not committed and gives the connection back. Never fails: the outcome is decided. */
  readonly release: Effect.Effect<void>
  /**
   * Where a unit can read what others wrote and have not committed (SQLite's commit groups): run when the unit
   * fails, before its failure is answered. It ends the unit as `release` does, then waits until what the unit read
   * is committed, or fails with a retryable StorageError when it never will be, so that the unit runs again. Absent,
   * a unit reads only what is committed and its failure is answered at once.
   */
  readonly failed?: Effect.Effect<void, Storage.StorageError>
  /**
   * A session made per unit whose statements run exactly as another's (only its commit and release differ) names
   * that one, so the storage reuses the stores it made for it (SqlStorage.make).
   */
  readonly runsAs?: SqlSession
  /**
   * This one object serves unit after unit (a SQLite connection's session, an always-open lookup), so the storage
   * makes its stores once and keeps them for it (SqlStorage.make). Absent, the session serves one unit, and its
   * stores are made for that unit and die with it.
   */
  readonly servesManyUnits?: true
}

/**
 * A kept credential the request runs on (core Storage.KeptCredentials), for a session to confirm in the round trip
 * of its first statement: `query` re-reads the API user's row, and `judge` compares what it read with the kept row,
 * confirming the credential or refusing the unit (a StorageError of reason CredentialChanged).
 */
export interface CredentialCheck {
  readonly query: CompiledQuery
  /** Whether it still needs confirming: another unit of the request may have confirmed it since. */
  readonly pending: () => boolean
  readonly judge: (rows: ReadonlyArray<unknown>) => Storage.StorageError | undefined
}

/** Opens a session (begins a transaction) in the given mode. */
export interface SessionOpener {
  /**
   * `again`: the unit runs again after a retryable failure. Where units can read what others wrote and have not
   * committed (SQLite's commit groups), such a unit begins a transaction of its own, on what is committed, so that
   * a unit whose group was undone on its account does not undo the next one the same way (see CommitGroup).
   */
  (mode: Storage.UnitMode, check?: CredentialCheck, again?: boolean): Effect.Effect<SqlSession, Storage.StorageError>
  /**
   * Whether the sessions send a pending `check` with their first statement (PostgreSQL's pipelined sessions). Other
   * sessions ignore it, and the storage then keeps no credentials.
   */
  readonly confirmsCredentials?: boolean
  /**
   * A lookup session that is always open: acquiring it can neither fail nor wait, and its commit and release do
   * nothing. Where there is one, the storage runs lookups on it directly, without a unit's acquire and release.
   */
  readonly openLookup?: SqlSession
  /**
   * The database's commit version, read now, which moves whenever anything commits to it: SQLite's `PRAGMA
   * data_version` on a read-only connection of its own, to which every commit is another connection's. Reading it
   * also ends `openLookup`'s shared read transaction when something committed since it began (see
   * sqlite/LookupSnapshot). Where there is one, the credential's lookup reads it first, and the storage keeps API
   * users while it stands (see ApiUsersAtVersion).
   */
  readonly commitVersion?: Effect.Effect<number, Storage.StorageError>
  /**
   * Reads one statement off the event loop, outside any unit, in a snapshot of its own: a SQLite file's read worker
   * (see sqlite/ReadWorker). Where there is one, a deep page's first walk steps there (see PageBoundaries).
   */
  readonly readOffLoop?: <R>(query: CompiledQuery<R>) => Effect.Effect<ReadonlyArray<R>, Storage.StorageError>
}

/**
 * A lookup opens no transaction: each statement goes to the pool (kysely's `executeQuery`) on its own, one round
 * trip each, and there is nothing to commit or roll back.
 */
const lookupSession = (db: Kysely<Database>, engine: SqlEngine): SqlSession => ({
  servesManyUnits: true,
  execute(query) {
    return Effect.tryPromise({
      try() {
        return db.executeQuery(query)
      },
      catch: engine.classify
    })
  },
  commit: Effect.void,
  release: Effect.void
})

/**
 * Runs one statement that commits on its own, outside any unit (the rate limiter's counts), and answers its result.
 * `sent` is called once the statement has a connection to go out on: a failure before then is known not to have run
 * it. How the statement reaches the database is the engine's (SqlEngine.autocommit).
 */
export type Autocommit = <R>(query: CompiledQuery<R>, sent: () => void) => Promise<QueryResult<R>>

/** An autocommit statement through kysely's driver, on a connection of its own. */
export const kyselyAutocommit = (db: Kysely<Database>): Autocommit => (query, sent) =>
  db.connection().execute((connection) => {
    sent()
    return connection.executeQuery(query)
  })

/** Sessions over kysely's own transactions: `engine.begin`, then `executeQuery` on the controlled transaction. */
export const kyselySessions = (db: Kysely<Database>, engine: SqlEngine): SessionOpener => {
  const openLookup = lookupSession(db, engine)
  const lookup = Effect.succeed(openLookup)
  return Object.assign((mode: Storage.UnitMode) => mode === "lookup" ? lookup : transactionSession(db, engine, mode), { openLookup })
}

const transactionSession = (db: Kysely<Database>, engine: SqlEngine, mode: "read" | "write") =>
  Effect.map(
    Effect.tryPromise({
      try() {
        return engine.begin(db, mode)
      },
      catch: engine.classify
    }),
    (trx): SqlSession => ({
      execute(query) {
        return Effect.tryPromise({
          try() {
            return trx.executeQuery(query)
          },
          catch: engine.classify
        })
      },
      commit: Effect.tryPromise({
        try() {
          return trx.commit().execute()
        },
        catch(cause) {
          const error = engine.classify(cause)
          return error.isUnavailable ? StorageFailure.commitOutcomeUnknown(cause) : error
        }
      }),
      release: Effect.suspend(() =>
        trx.isCommitted || trx.isRolledBack
          ? Effect.void
          // A rollback that fails changes nothing for the caller: kysely releases (pg: discards) the connection
          // either way, so the server ends the transaction with it.
          : Effect.promise(() => trx.rollback().execute().catch(() => undefined))
      )
    })
  )
