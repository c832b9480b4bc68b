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
 * - A unit of a request that runs on a kept credential not yet confirmed (see KeptApiUsers) sends the API user's
 *   re-read with its first statement and judges it when the answer comes, before anything else of the unit runs or
 *   commits: a held write is then never sent with the COMMIT before the re-read was judged.
 * - Statements a unit issues together (reads run with `Effect.all`'s concurrency) go in one round trip.
 *
 * A lookup opens no transaction; its statements go in pipelines too, on a connection of the pool taken for each.
 */
import { Storage } from "@custody-relay/core"
import { Effect } from "effect"
import type { CompiledQuery, Kysely, QueryResult } from "kysely"
import type { Database } from "../schema/Database.js"
import type { SqlEngine } from "../SqlEngine.js"
import { type Autocommit, type CredentialCheck, kyselyAutocommit, kyselySessions, type SessionOpener, type SqlSession, type WriteCheck } from "../SqlSession.js"
import { LIST_TOTAL, TRAIL_IN_STRIDE } from "../SqlUnit.js"
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

/**
 * What a unit sets, local to its transaction, for statements that run on generic plans (a read unit's, and a lookup's
 * round trip that reads a first page): `plan_cache_mode` (see `isolation` and `plannedOnce` on why), and no JIT
 * compilation. A generic plan's costs are estimates for values it does not know, and PostgreSQL compiles a statement's
 * expressions at every run once its plan costs more than `jit_above_cost` (100,000 by default): a step of a transaction
 * list's walk (StoreStatements' `everyKey`) was priced at 315,908 at a million rows, and each run spent 19.5 ms
 * compiling for 2.1 ms of work, nine tenths of a first walk's time (docs/benchmarks.md, "a trail's first count planned
 * for its values, and no JIT for generic plans"). No statement of the relay reads enough to repay a compilation.
 * `set_config(..., true)` is `SET LOCAL` in one statement, which the extended protocol needs (one command a Parse),
 * without the warning `SET LOCAL` writes outside a transaction block.
 */
const ON_GENERIC_PLANS = "select set_config('plan_cache_mode', 'force_generic_plan', true), set_config('jit', 'off', true)"

/**
 * How each unit begins (see PostgresEngine on why), for these sessions and for kysely's; `then`: what a unit sets for
 * its own statements after BEGIN.
 *
 * A read unit's statements run on generic plans (ON_GENERIC_PLANS). They are later pages of lists, the keys of a walk,
 * a list's changes and its total, and reads by id: each has one plan whatever its values (the index that holds its
 * equality columns and its order). The list reads bind their LIMIT and OFFSET, and under the default
 * `plan_cache_mode` PostgreSQL prices a generic plan's unknown LIMIT at a tenth of the rows, finds it dearer than a plan
 * for the values at hand, and so plans the statement again at every run: 0.1 to 0.5 ms a statement, half of what a
 * deep page cost the database (docs/benchmarks.md, "a read unit's statements planned once"). Write units and lookups
 * keep the default: a write's statements are by id and settle on a generic plan after five runs anyway. A lookup that
 * reads a list's first page is the exception (see `plannedOnce`).
 */
export const isolation = {
  read: { level: "repeatable read", accessMode: "read only", then: ON_GENERIC_PLANS },
  write: { level: "read committed", accessMode: undefined, then: undefined }
} as const

/**
 * Sent before the statements of a lookup's round trip that reads a list's first page (the page with its total, in
 * the column `list_total`, StoreStatements' `firstPage`; the audit trail's with its counts, `trail_in_stride`): that
 * statement binds its LIMIT too, and under the default it was planned at every run, which doubled what it cost the
 * database (docs/benchmarks.md, "a list's first page planned once"). A lookup opens no transaction, but the server
 * runs a pipeline up to its Sync as one implicit transaction, so a setting local to the transaction holds for the
 * statements after it and ends with the round trip, whether it succeeds or fails: nothing is left on the pooled
 * connection. Lookups by id and a list's other reads in a lookup (the outbox's due entries, whose plan may depend on
 * the due time) keep the default.
 */
const plannedOnce: PipelineStatement = { sql: ON_GENERIC_PLANS, parameters: [] }
const FIRST_PAGE_MARKS = [`as "${LIST_TOTAL}"`, `as "${TRAIL_IN_STRIDE}"`]
const readsFirstPage = (statement: PipelineStatement): boolean => FIRST_PAGE_MARKS.some((mark) => statement.sql.includes(mark))

/** A unit's BEGIN, and what it sets after it (`isolation`), sent with its first statement. */
const beginning = (mode: "read" | "write"): ReadonlyArray<PipelineStatement> => {
  const { accessMode, level, then } = isolation[mode]
  return [
    { sql: `begin isolation level ${level}${accessMode === undefined ? "" : ` ${accessMode}`}`, parameters: [] },
    ...(then === undefined ? [] : [{ sql: then, parameters: [] }])
  ]
}
const BEGIN = { read: beginning("read"), write: beginning("write") }
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

/** A credential's re-read held until the unit's first round trip (see SqlSession.CredentialCheck). */
interface HeldCredential {
  readonly statement: PipelineStatement
  readonly credential: CredentialCheck
}

type Held = HeldWrite | HeldCredential | PipelineStatement

const statementOf = (held: Held): PipelineStatement => "statement" in held ? held.statement : held

/** A credential's re-read to send with a unit's first statement: none once it is confirmed (or when there is none). */
const heldCredential = (credential: CredentialCheck | undefined): Array<Held> =>
  credential !== undefined && credential.pending() ? [{ statement: credential.query, credential }] : []

/** Judges the answers to what was held: a write's row count, a credential's re-read. The first refusal is thrown. */
const judgeHeld = (held: ReadonlyArray<Held>, results: ReadonlyArray<QueryResult<unknown>>): void => {
  held.forEach((h, index) => {
    const refused = "check" in h
      ? h.check(Number(results[index]?.numAffectedRows ?? 0n))
      : "credential" in h
      ? h.credential.judge(results[index]?.rows ?? [])
      : undefined
    if (refused !== undefined) throw refused
  })
}

/** A statement gathered for the next pipeline, and how to answer its caller (see `batching`). */
interface Waiting {
  readonly statement: PipelineStatement
  readonly resolve: (result: QueryResult<unknown>) => void
  readonly reject: (cause: unknown) => void
}

/**
 * Statements a unit issues together (two reads run with `Effect.all`'s concurrency start in the same tick) go in one
 * pipeline, in the order they were issued: each call waits for its own statement's answer. `sendAll` sends what was
 * gathered and answers each statement; if it fails, every statement of the batch fails with it.
 */
const batching = (sendAll: (statements: ReadonlyArray<PipelineStatement>) => Promise<ReadonlyArray<QueryResult<unknown>>>) => {
  let gathering: Array<Waiting> | undefined
  return (statement: PipelineStatement): Promise<QueryResult<unknown>> =>
    new Promise((resolve, reject) => {
      if (gathering === undefined) {
        const batch: Array<Waiting> = []
        gathering = batch
        queueMicrotask(() => {
          gathering = undefined
          sendAll(batch.map((waiting) => waiting.statement)).then(
            (results) => batch.forEach((waiting, index) => waiting.resolve(results[index] ?? { rows: [] })),
            (cause: unknown) => batch.forEach((waiting) => waiting.reject(cause))
          )
        })
      }
      gathering.push({ statement, resolve, reject })
    })
}

/** A check's refusal as it is; anything else as the engine classifies it. */
const asStorageError = (engine: SqlEngine, cause: unknown): Storage.StorageError =>
  cause instanceof Storage.StorageError ? cause : engine.classify(cause)

/**
 * Sends what is held, then `lasts`, on `client` in one round trip; judges what was held (see `judgeHeld`) and gives
 * the answers of `lasts`. A refusal rejects with its StorageError.
 */
const sendHeld = (
  client: PooledClient,
  parts: PgParts,
  held: ReadonlyArray<Held>,
  lasts: ReadonlyArray<PipelineStatement>
): Promise<ReadonlyArray<QueryResult<unknown>>> => {
  const statements = [...held.map(statementOf), ...lasts]
  return send(client, parts, statements).then((results) => {
    if (results.length !== statements.length) throw new Error(`a pipeline of ${statements.length} statements answered ${results.length}`)
    judgeHeld(held, results)
    return results.slice(held.length)
  })
}

class PipelinedSession implements SqlSession {
  /** Sent with the next statement: BEGIN (with what the unit sets, and a credential's re-read) until the first one, then the writes queued since. */
  private held: Array<Held>
  /** Whether anything reached the server, so there is a transaction to roll back. */
  private sent = false
  private ended = false
  /**
   * Set when the unit lets its connection go. A batch gathered by a unit interrupted before the batch went out (it
   * goes out a microtask later) must not reach the connection after it is back in the pool.
   */
  private released = false
  /** A read unit's COMMIT in flight: what it failed with, if it did. */
  private committing: Promise<Error | true | undefined> | undefined

  constructor(
    private readonly client: PooledClient,
    private readonly parts: PgParts,
    private readonly engine: SqlEngine,
    private readonly mode: "read" | "write",
    credential: CredentialCheck | undefined
  ) {
    this.held = [...BEGIN[mode], ...heldCredential(credential)]
  }

  /** Sends what the unit holds, then `lasts`, in one round trip (see `sendHeld`). */
  private flush(lasts: ReadonlyArray<PipelineStatement>): Promise<ReadonlyArray<QueryResult<unknown>>> {
    if (this.released) return Promise.reject(new Error("a unit's statements came after it let its connection go"))
    const held = this.held
    this.held = []
    this.sent = true
    return sendHeld(this.client, this.parts, held, lasts)
  }

  /** The unit's statements, those issued together sent together (see `batching`). */
  private readonly run = batching((statements) => this.flush(statements))

  private readonly classify = (cause: unknown): Storage.StorageError => asStorageError(this.engine, cause)

  execute<R>(query: CompiledQuery<R>): Effect.Effect<QueryResult<R>, Storage.StorageError> {
    return Effect.tryPromise({
      try: () => this.run(query) as Promise<QueryResult<R>>,
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
    // A unit that sent nothing and holds no write has nothing to commit (a credential's re-read stays unconfirmed).
    if (!this.sent && !this.held.some((h) => "check" in h)) {
      this.ended = true
      return Effect.void
    }
    if (this.mode === "read") {
      // A read-only unit's COMMIT changes nothing and fails only with its connection, so the unit does not wait for
      // its answer. The connection goes back to the pool when the answer comes (see `release`); one lost meanwhile
      // is closed instead.
      this.ended = true
      this.committing = this.flush([COMMIT]).then(() => undefined, (cause: unknown) => cause instanceof Error ? cause : true)
      return Effect.void
    }
    const commit = Effect.tryPromise({
      try: () => this.flush([COMMIT]).then(() => {
        this.ended = true
      }),
      catch: (cause) => {
        const error = this.classify(cause)
        return error.isUnavailable ? StorageFailure.commitOutcomeUnknown(cause) : error
      }
    })
    const unsure = this.held.some((h) => "check" in h ? !h.sure : "credential" in h)
    return unsure ? Effect.andThen(Effect.tryPromise({ try: () => this.flush([]), catch: this.classify }), commit) : commit
  })

  readonly release: Effect.Effect<void> = Effect.promise(async () => {
    this.released = true
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
  const support = supportOf.get(db)
  if (support === undefined) return kyselySessions(db, engine)
  const open: SessionOpener = (mode, credential) =>
    mode === "lookup"
      ? Effect.sync(() => pipelinedLookup(support, engine, credential))
      : Effect.map(
        Effect.tryPromise({ try: () => support.pool.connect(), catch: engine.classify }),
        (client): SqlSession => new PipelinedSession(client, support.parts, engine, mode, credential)
      )
  return Object.assign(open, { confirmsCredentials: true })
}

/**
 * `work`'s round trip on a connection of the pool taken for it alone, given back clean after an answer or a refusal of
 * the relay's own (a StorageError: a credential's re-read judged), and closed after any other failure.
 */
const onPooledClient = async <A>(pool: ClientPool, work: (client: PooledClient) => Promise<A>): Promise<A> => {
  const client = await pool.connect()
  try {
    const answer = await work(client)
    client.release()
    return answer
  } catch (cause) {
    client.release(cause instanceof Storage.StorageError ? undefined : cause instanceof Error ? cause : true)
    throw cause
  }
}

/**
 * A lookup: no transaction; its statements issued together go in one pipeline on a connection of the pool, taken
 * for that round trip only (see `batching`), the first with a credential's re-read while it is pending.
 */
const pipelinedLookup = ({ pool, parts }: PipelineSupport, engine: SqlEngine, credential: CredentialCheck | undefined): SqlSession => {
  const run = batching(async (statements) => {
    const held = heldCredential(credential)
    const planning = statements.some(readsFirstPage) ? [plannedOnce] : []
    return onPooledClient(pool, (client) => sendHeld(client, parts, [...held, ...planning], statements))
  })
  return {
    execute<R>(query: CompiledQuery<R>) {
      return Effect.tryPromise({ try: () => run(query) as Promise<QueryResult<R>>, catch: (cause) => asStorageError(engine, cause) })
    },
    commit: Effect.void,
    release: Effect.void
  }
}

/**
 * A statement that commits on its own (the rate limiter's count of a turn), sent as a pipeline of one on a connection
 * of the pool taken for it: under the name the connection keeps for its text, so it is parsed once per connection
 * rather than at every count (PreparedStatements), and bounded as a unit's round trips are (Pipeline). Through
 * kysely's driver where `db` was not made by openPostgres.
 */
export const postgresAutocommit = (db: Kysely<Database>): Autocommit => {
  const support = supportOf.get(db)
  if (support === undefined) return kyselyAutocommit(db)
  const { parts, pool } = support
  return <R>(query: CompiledQuery<R>, sent: () => void) =>
    onPooledClient(pool, async (client) => {
      sent()
      const [result] = await send(client, parts, [query])
      return (result ?? { rows: [] }) as QueryResult<R>
    })
}
