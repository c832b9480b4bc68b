/**
 * PostgreSQL sessions that spend as few round trips as the unit's own reads allow (issue 17: a round trip is what a
 * unit waits for when the database is on another host).
 *
 * - BEGIN is not sent on its own: it goes with the unit's first statement, in one pipeline (see Pipeline).
 * - A write whose answer the unit does not wait for (`queue`) is held and goes with the unit's next statement, in
 *   order: the database runs every statement in the order the unit issued it, so a later read sees the write. Its
 *   row count is checked when its answer arrives; a wrong count or an error fails the unit there, and it is rolled
 *   back. A write goes with the COMMIT itself only when the database guarantees its count (an insert writes all its
 *   rows or fails; an update by id of a row the unit read holds that row locked); every other write is answered, and
 *   checked, before the COMMIT is sent. After an error the server skips the rest of the pipeline, COMMIT included.
 * - A unit that ends before sending anything (it failed a check of its own first) gives its connection back
 *   without a ROLLBACK: the server never saw a transaction.
 * - A read unit does not wait for its COMMIT's answer (see `commit`).
 *
 * A lookup opens no transaction and sends each statement on its own, through kysely, as on every engine.
 */
import { Storage } from "@custody-relay/core"
import { Effect } from "effect"
import type { CompiledQuery, Kysely, QueryResult } from "kysely"
import type { Database } from "../schema/Database.js"
import type { SqlEngine } from "../SqlEngine.js"
import { kyselySessions, type SessionOpener, type SqlSession, type WriteCheck } from "../SqlSession.js"
import * as StorageFailure from "../StorageFailure.js"
import { type PgParts, Pipeline, type PipelineStatement } from "./Pipeline.js"

/** The part of a pooled pg client a session uses. */
export interface PooledClient {
  query(submittable: Pipeline): unknown
  /** Gives the client back; with an error, the pool closes it instead. */
  release(error?: Error | boolean): void
}

export interface ClientPool {
  connect(): Promise<PooledClient>
}

/** The pool under a kysely instance made by openPostgres, and pg's parts: what pipelined sessions need. */
export interface PipelineSupport {
  readonly pool: ClientPool
  readonly parts: PgParts
}

const supportOf = new WeakMap<Kysely<Database>, PipelineSupport>()

/** Records the pool under `db` (openPostgres does), so the engine's sessions pipeline on it. */
export const pipelineOn = (db: Kysely<Database>, support: PipelineSupport): void => {
  supportOf.set(db, support)
}

/** How each unit begins (see PostgresEngine on why), for these sessions and for kysely's. */
export const isolation = {
  read: { level: "repeatable read", accessMode: "read only" },
  write: { level: "read committed", accessMode: undefined }
} as const

const BEGIN: Record<"read" | "write", PipelineStatement> = {
  read: { sql: `begin isolation level ${isolation.read.level} ${isolation.read.accessMode}`, parameters: [] },
  write: { sql: `begin isolation level ${isolation.write.level}`, parameters: [] }
}
const COMMIT: PipelineStatement = { sql: "commit", parameters: [] }
const ROLLBACK: PipelineStatement = { sql: "rollback", parameters: [] }

const send = (client: PooledClient, parts: PgParts, statements: ReadonlyArray<PipelineStatement>) =>
  new Promise<ReadonlyArray<QueryResult<unknown>>>((resolve, reject) => {
    client.query(new Pipeline(parts, statements, (error, results) => error === undefined ? resolve(results ?? []) : reject(error)))
  })

/** A write held until the unit's next round trip, and what its answer must satisfy. */
interface HeldWrite {
  readonly statement: PipelineStatement
  readonly check: WriteCheck
  readonly sure: boolean
}

const statementOf = (held: HeldWrite | PipelineStatement): PipelineStatement => "check" in held ? held.statement : held

class PipelinedSession implements SqlSession {
  /** Sent with the next statement: BEGIN until the first one, then the writes queued since. */
  private held: Array<HeldWrite | PipelineStatement>
  /** Whether anything reached the server, so there is a transaction to roll back. */
  private sent = false
  private ended = false
  /** A read unit's COMMIT in flight: what it failed with, if it did. */
  private committing: Promise<Error | true | undefined> | undefined

  constructor(
    private readonly client: PooledClient,
    private readonly parts: PgParts,
    private readonly engine: SqlEngine,
    private readonly mode: "read" | "write"
  ) {
    this.held = [BEGIN[mode]]
  }

  /**
   * Sends what is held, then `last` if any, in one round trip; checks the held writes' answers and gives `last`'s.
   * A check that fails rejects with its StorageError.
   */
  private flush(last: PipelineStatement | undefined): Promise<QueryResult<unknown> | undefined> {
    const held = this.held
    this.held = []
    this.sent = true
    const statements = held.map(statementOf)
    if (last !== undefined) statements.push(last)
    return send(this.client, this.parts, statements).then((results) => {
      if (results.length !== statements.length) {
        throw new Error(`a pipeline of ${statements.length} statements answered ${results.length}`)
      }
      held.forEach((h, index) => {
        if (!("check" in h)) return
        const refused = h.check(Number(results[index]?.numAffectedRows ?? 0n))
        if (refused !== undefined) throw refused
      })
      return last === undefined ? undefined : results[results.length - 1]
    })
  }

  private readonly classify = (cause: unknown): Storage.StorageError =>
    cause instanceof Storage.StorageError ? cause : this.engine.classify(cause)

  execute<R>(query: CompiledQuery<R>): Effect.Effect<QueryResult<R>, Storage.StorageError> {
    return Effect.tryPromise({
      try: () => this.flush(query) as Promise<QueryResult<R>>,
      catch: this.classify
    })
  }

  queue(query: CompiledQuery, check: WriteCheck, sure: boolean): Effect.Effect<void, Storage.StorageError> {
    return Effect.sync(() => {
      this.held.push({ statement: query, check, sure })
    })
  }

  /**
   * COMMIT, with the held writes when the database itself guarantees each one's answer (SqlSession.queue); else
   * they are sent and checked first, so no unit commits a write whose check then fails.
   */
  readonly commit: Effect.Effect<void, Storage.StorageError> = Effect.suspend(() => {
    // A unit that sent nothing and holds nothing but BEGIN has nothing to commit.
    if (!this.sent && this.held.length === 1) {
      this.ended = true
      return Effect.void
    }
    if (this.mode === "read") {
      // A read-only unit's COMMIT changes nothing and fails only with its connection, so the unit does not wait for
      // its answer. The connection goes back to the pool when the answer comes (see `release`); one lost meanwhile
      // is closed instead.
      this.ended = true
      this.committing = this.flush(COMMIT).then(() => undefined, (cause: unknown) => cause instanceof Error ? cause : true)
      return Effect.void
    }
    const commit = Effect.tryPromise({
      try: () => this.flush(COMMIT).then(() => {
        this.ended = true
      }),
      catch: (cause) => {
        const error = this.classify(cause)
        return error.isUnavailable ? StorageFailure.commitOutcomeUnknown(cause) : error
      }
    })
    const unsure = this.held.some((h) => "check" in h && !h.sure)
    return unsure ? Effect.andThen(Effect.tryPromise({ try: () => this.flush(undefined), catch: this.classify }), commit) : commit
  })

  readonly release: Effect.Effect<void> = Effect.promise(async () => {
    if (this.committing !== undefined) {
      // Not awaited: the unit is done; the pool gets the connection back once its COMMIT is answered.
      void this.committing.then((failure) => this.client.release(failure))
      return
    }
    if (this.ended || !this.sent) {
      this.client.release()
      return
    }
    try {
      await send(this.client, this.parts, [ROLLBACK])
      this.client.release()
    } catch (cause) {
      // The server ends the transaction with the connection, which the pool closes rather than reuses.
      this.client.release(cause instanceof Error ? cause : true)
    }
  })
}

/**
 * Pipelined sessions on the pool openPostgres recorded under `db`; sessions through kysely's own transactions on a
 * kysely instance made elsewhere.
 */
export const postgresSessions = (db: Kysely<Database>, engine: SqlEngine): SessionOpener => {
  const kysely = kyselySessions(db, engine)
  const support = supportOf.get(db)
  if (support === undefined) return kysely
  return (mode) =>
    mode === "lookup"
      ? kysely(mode)
      : Effect.map(
        Effect.tryPromise({ try: () => support.pool.connect(), catch: engine.classify }),
        (client): SqlSession => new PipelinedSession(client, support.parts, engine, mode)
      )
}
