/**
 * The Storage port over kysely, written once for both engines. A unit of work is one database transaction,
 * begun as the engine says (`SqlEngine.begin`), committed when the unit succeeds and rolled back when it fails or
 * is interrupted. A unit that fails with a retryable `StorageError` (lost a race: busy, deadlock, a duplicate its
 * own check did not see) is run again from the start, a bounded number of times with a short jittered backoff.
 *
 * A unit joins one small store per record kind (stores/), each made from the unit's statements over its session
 * (SqlUnit). Every query means what the memory store means: the same filters (`Storage.accountMatches` and
 * friends), the same order (`Storage.compareNewestFirst`), the same page arithmetic (`Page.offset`). A read unit
 * refuses writes before they reach the database, as the memory store does.
 */
import { Storage } from "@custody-relay/core"
import { Effect, Schedule, Semaphore } from "effect"
import type { Kysely } from "kysely"
import {
  BOUNDARIES_PER_READ,
  farWalkOf,
  isNewerSnapshotWanted,
  isWalkPause,
  MAX_FAR_WALKS,
  MAX_NEWER_SNAPSHOTS,
  MAX_WALK_PAUSES,
  MayAskNewerSnapshot,
  PageBoundaries,
  STEP_ROWS,
  STEP_ROWS_ON_EVENT_LOOP,
  UNIT_MILLIS,
  WalkMayLeaveLoop,
  WalkMayPause
} from "./PageBoundaries.js"
import type { Database } from "./schema/Database.js"
import type { SqlEngine } from "./SqlEngine.js"
import { ApiUsersAtVersion } from "./ApiUsersAtVersion.js"
import { DEFAULT_KEPT_API_USERS, KeptApiUsers } from "./KeptApiUsers.js"
import type { CredentialCheck, SessionOpener, SqlSession } from "./SqlSession.js"
import { RowsRead, statementsOf, type StoreArguments } from "./SqlUnit.js"
import { CountTurnHeld, isCountTurnWanted, isReadUnitWanted, TrailCounts } from "./TrailCounts.js"
import { type StoreStatements, storeStatementsOf } from "./StoreStatements.js"
import * as Accounts from "./stores/Accounts.js"
import * as Clients from "./stores/Clients.js"
import * as EventLog from "./stores/EventLog.js"
import * as IdempotencyKeys from "./stores/IdempotencyKeys.js"
import * as Ledger from "./stores/Ledger.js"
import * as OutboxEntries from "./stores/OutboxEntries.js"
import * as Settings from "./stores/Settings.js"
import * as Transactions from "./stores/Transactions.js"
import * as Webhooks from "./stores/Webhooks.js"
import * as WhitelistedAddresses from "./stores/WhitelistedAddresses.js"

export interface SqlStorageOptions {
  /** How many times a unit that lost a race is run again before its error is let through; default 8. */
  readonly maxRetries?: number
  /** How long the layer waits for an unreachable database at start-up (retrying, logging each try); default 60000. */
  readonly startupTimeoutMillis?: number
  /** At most this many write units at once in this process (the rest queue before taking a connection); no limit by default. */
  readonly maxConcurrentWriteUnits?: number
  /**
   * Where statements run in the database (PostgreSQL): at most this many read units at once in this process count a
   * long stretch of the audit trail's log (a trail's first count, TrailCounts.CountTurnHeld); the rest queue before
   * taking a connection. Default 1 (`DEFAULT_MAX_CONCURRENT_TRAIL_COUNTS`): two such counts keep two of the
   * database's cores busy, every core of a small machine shared with the node. On SQLite such counts run on its one
   * read worker.
   */
  readonly maxConcurrentTrailCounts?: number
  /**
   * Count rate-limit windows in memory and reconcile them with the database every this many milliseconds (see
   * SqlRateLimiter.makeSynced: no statement per request, exact per node between syncs). By default every request
   * counts in the database, exact across nodes.
   */
  readonly rateLimitSyncMillis?: number
  /**
   * How long a request waits for the database to count it against its rate limit (or a synced limiter's round
   * waits for its upsert) before that count fails as the database being unavailable: the request is answered 503 and
   * the node's next counts go out. Default 5000, the pool's default lock wait.
   */
  readonly rateLimitTimeoutMillis?: number
  /**
   * Keep API users between requests. On PostgreSQL a kept one is confirmed in the request's own round trip (see
   * KeptApiUsers): a GET by id then waits for one round trip instead of two. On a SQLite file a kept one answers while
   * nothing has been committed to the file since it was read, which one statement that reads no row tells (see
   * ApiUsersAtVersion). On by default; `false` reads the credential before every request's first statement.
   */
  readonly keepCredentials?: boolean
}

export const DEFAULT_MAX_RETRIES = 8

/** `maxConcurrentTrailCounts` by default. */
export const DEFAULT_MAX_CONCURRENT_TRAIL_COUNTS = 1

/**
 * Backoff between re-runs: 2 ms doubling, capped at 100 ms, jittered so units that collided once do not collide
 * again in step.
 */
export const backoff = Schedule.min([Schedule.exponential("2 millis"), Schedule.spaced("100 millis")]).pipe(Schedule.jittered)

export const isRetryable = (error: unknown): boolean => error instanceof Storage.StorageError && error.isRetryable

/** Resumes after the event loop's next turn, once the I/O that is ready has been served. */
const nextTurn = Effect.callback<void>((resume) => {
  const turn = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(turn))
})

/**
 * A read unit whose deep page's walk paused (see PageBoundaries) runs again after the event loop's next turn, from
 * the boundaries it left; one that stopped with a far walk runs again once the walk's steps have run off the event
 * loop. After `MAX_FAR_WALKS` far walks, or one whose steps failed, it walks on the event loop, pausing; its last
 * run may neither pause nor leave the loop.
 */
const resumingWalks = <A, E, R>(unit: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  const runFrom = (pauses: number, farWalks: number): Effect.Effect<A, E, R> =>
    pauses === MAX_WALK_PAUSES
      ? Effect.provideService(unit, WalkMayPause, false)
      : Effect.catchIf(unit, (error) => isWalkPause(error) || farWalkOf(error) !== undefined, (error) => {
        const steps = farWalkOf(error)
        if (steps === undefined) return Effect.andThen(nextTurn, runFrom(pauses + 1, farWalks))
        const onLoop = Effect.provideService(runFrom(pauses + 1, farWalks + 1), WalkMayLeaveLoop, false)
        return Effect.matchEffect(steps, {
          onSuccess: () => farWalks + 1 < MAX_FAR_WALKS ? runFrom(pauses + 1, farWalks + 1) : onLoop,
          onFailure: () => onLoop
        })
      })
  return runFrom(0, 0)
}

/** What every unit of one storage shares: made once, in `make`. */
interface UnitParts {
  readonly db: Kysely<Database>
  readonly engine: SqlEngine
  readonly compiled: StoreStatements
  readonly pageBoundaries: PageBoundaries
  readonly trailCounts: TrailCounts
  readonly settledPositions: StoreArguments["settledPositions"]
  readonly keptApiUsers: KeptApiUsers | undefined
  readonly apiUsersAtVersion: ApiUsersAtVersion | undefined
  readonly readOffLoop: SessionOpener["readOffLoop"]
}

/**
 * A read unit whose snapshot cannot use its client's kept page boundaries (PostgreSQL: another unit took a newer
 * snapshot meanwhile; see PageBoundaries) runs again at once, on a newer snapshot, up to `MAX_NEWER_SNAPSHOTS`
 * times; its last run reads its page from the nearer end.
 */
const onNewerSnapshots = <A, E, R>(unit: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  const runFrom = (asked: number): Effect.Effect<A, E, R> =>
    asked === MAX_NEWER_SNAPSHOTS
      ? unit
      : Effect.catchIf(Effect.provideService(unit, MayAskNewerSnapshot, true), isNewerSnapshotWanted, () => runFrom(asked + 1))
  return runFrom(0)
}

/**
 * The unit's stores over one open transaction (or any kysely handle) in one mode. A unit is made for every unit
 * of work on PostgreSQL, so each store is written as method shorthand and its helpers come from module-level
 * factories: under tsx (how `pnpm start` runs the server) esbuild's keepNames wraps every arrow function assigned
 * to a name or a property in a `__name` call (an `Object.defineProperty`), about 40 of them per unit, 6% of a
 * GET's CPU profile; methods and returned arrows are left alone. `read`: where a write unit keeps the rows it read
 * (see RowsRead); the caller empties it when a unit of work begins.
 */
const makeUnit = (session: SqlSession, mode: Storage.UnitMode, shared: UnitParts, read: RowsRead): Storage.StorageUnit => {
  const parts: StoreArguments = {
    db: shared.db,
    statements: statementsOf(session, mode),
    engine: shared.engine,
    mode,
    compiled: shared.compiled,
    read,
    // Reads by id in a write unit lock the row they return when the engine locks rows (see SqlEngine).
    locking: mode === "write" && shared.engine.locksRowsForWrite ? 1 : 0,
    pageBoundaries: shared.pageBoundaries,
    trailCounts: shared.trailCounts,
    settledPositions: shared.settledPositions,
    keptApiUsers: shared.keptApiUsers,
    apiUsersAtVersion: shared.apiUsersAtVersion,
    readOffLoop: shared.readOffLoop
  }
  return {
    ...Clients.store(parts),
    ...Accounts.store(parts),
    ...WhitelistedAddresses.store(parts),
    ...Transactions.store(parts),
    ...Ledger.store(parts),
    ...IdempotencyKeys.store(parts),
    ...EventLog.store(parts),
    ...OutboxEntries.store(parts),
    ...Settings.store(parts),
    ...Webhooks.store(parts)
  }
}

/** The Storage service over a kysely instance whose schema is up to date (see `migrateToLatest`). */
export const make = (
  db: Kysely<Database>,
  engine: SqlEngine,
  options: SqlStorageOptions = {}
): Storage.Storage["Service"] => {
  const times = options.maxRetries ?? DEFAULT_MAX_RETRIES
  const open = engine.sessions(db)
  const statements = storeStatementsOf(db, engine)
  const pageBoundaries = engine.runsOnEventLoop
    ? new PageBoundaries(STEP_ROWS_ON_EVENT_LOOP, UNIT_MILLIS)
    : new PageBoundaries(STEP_ROWS, Number.POSITIVE_INFINITY, undefined, BOUNDARIES_PER_READ)
  const keepsCredentials = options.keepCredentials !== false
  const keptApiUsers = open.confirmsCredentials === true && keepsCredentials
    ? new KeptApiUsers((keyId) => statements.lookups.apiUserByKeyId(keyId).compile())
    : undefined
  // Where lookups share read transactions (SQLite's LookupSnapshot), the credential's read must check the commit
  // version first even when nothing is kept: that check is what ends a transaction that is out of date.
  const apiUsersAtVersion = open.commitVersion === undefined
    ? undefined
    : new ApiUsersAtVersion(open.commitVersion, keepsCredentials ? DEFAULT_KEPT_API_USERS : 0)
  const trailCounts = new TrailCounts()
  const settledPositions = engine.logSettling?.record()
  const shared: UnitParts = {
    db,
    engine,
    compiled: statements,
    pageBoundaries,
    trailCounts,
    settledPositions,
    keptApiUsers,
    apiUsersAtVersion,
    readOffLoop: open.readOffLoop
  }
  // A session that serves unit after unit (a SQLite connection's; a grouped write unit's own session runs as it,
  // `runsAs`) has its three units (lookup, read, write) made once, not per unit of work; what a unit read is
  // forgotten when the next unit of work on it begins. A session of one unit (PostgreSQL's, kysely's transactions)
  // gets its unit made afresh and kept nowhere: in the WeakMap, its stores would outlive it until a full collection
  // (V8's young-generation collections keep a WeakMap's values), and every young collection would copy every recent
  // unit's stores, 10 to 30 ms instead of 1 to 4, one every 0.1 s under load (docs/benchmarks.md, "a unit of work's
  // stores kept past its session"). `beforeCommit` writes a write unit's pending events together, last
  // (EventLog.flushEvents).
  type Made = { readonly unit: Storage.StorageUnit; readonly read: RowsRead; readonly beforeCommit: Effect.Effect<void, Storage.StorageError> }
  const madeAnew = (session: SqlSession, mode: Storage.UnitMode): Made => {
    const read = new RowsRead()
    return {
      unit: makeUnit(session, mode, shared, read),
      read,
      beforeCommit: mode === "write" ? EventLog.flushEvents(statementsOf(session, mode).writeLater, statements.writes, read) : Effect.void
    }
  }
  const units = new WeakMap<SqlSession, { lookup?: Made; read?: Made; write?: Made }>()
  const madeFor = (opened: SqlSession, mode: Storage.UnitMode): Made => {
    const session = opened.runsAs ?? opened
    if (session.servesManyUnits !== true) return madeAnew(session, mode)
    let made = units.get(session)
    if (made === undefined) units.set(session, made = {})
    let unit = made[mode]
    if (unit === undefined) {
      unit = made[mode] = madeAnew(session, mode)
    } else if (mode === "write") {
      // Only a write unit keeps what it read.
      unit.read.clear()
    }
    return unit
  }
  const attempt = <A, E, R>(
    mode: Storage.UnitMode,
    work: (unit: Storage.StorageUnit) => Effect.Effect<A, E, R>,
    check: CredentialCheck | undefined,
    again: boolean
  ) =>
    Effect.acquireUseRelease(
      open(mode, check, again),
      (session) =>
        Effect.suspend(() => {
          const made = madeFor(session, mode)
          const committed = Effect.flatMap(work(made.unit), (value) => Effect.as(Effect.andThen(made.beforeCommit, session.commit), value))
          // A failure is answered once what the unit read is committed (see SqlSession.failed).
          const failed = session.failed
          return failed === undefined ? committed : Effect.catch(committed, (failure) => Effect.andThen(failed, Effect.fail(failure)))
        }),
      (session) => session.release
    )
  // A lookup on an always-open session (SQLite's read-only connection, kysely's pool) has nothing to acquire, commit
  // or release, so it runs its work directly, in a third of the Effect steps (docs/benchmarks.md, "lookups on the
  // open connection").
  const openLookup = open.openLookup
  let openLookupUnit: Storage.StorageUnit | undefined
  const lookupOnOpenSession = openLookup === undefined
    ? undefined
    : <A, E, R>(work: (unit: Storage.StorageUnit) => Effect.Effect<A, E, R>) =>
      Effect.suspend(() => work(openLookupUnit ??= madeFor(openLookup, "lookup").unit))
  // How a read unit that stopped for its deep page runs again: on the event loop, after a turn or a far walk; else
  // on a newer snapshot.
  const runningReadsAgain = engine.runsOnEventLoop ? resumingWalks : onNewerSnapshots
  const writeSlots = options.maxConcurrentWriteUnits === undefined ? undefined : Semaphore.makeUnsafe(options.maxConcurrentWriteUnits)
  const countTurns = engine.runsOnEventLoop
    ? undefined
    : Semaphore.makeUnsafe(options.maxConcurrentTrailCounts ?? DEFAULT_MAX_CONCURRENT_TRAIL_COUNTS)
  // A read unit that would count a long stretch of the log runs again once it holds a turn (see CountTurnHeld).
  const takingCountTurns = <A, E, R>(unit: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    countTurns === undefined
      ? unit
      : Effect.catchIf(Effect.provideService(unit, CountTurnHeld, false), isCountTurnWanted, () => countTurns.withPermits(1)(unit))
  const transaction = <A, E, R>(
    mode: Storage.UnitMode,
    work: (unit: Storage.StorageUnit) => Effect.Effect<A, E, R>,
    check?: CredentialCheck
  ): Effect.Effect<A, E | Storage.StorageError, R> => {
    const run = (again: boolean) =>
      mode === "lookup" && check === undefined && lookupOnOpenSession !== undefined
        ? lookupOnOpenSession(work)
        : writeSlots !== undefined && mode === "write"
        ? writeSlots.withPermits(1)(attempt(mode, work, check, again))
        : mode === "read"
        ? takingCountTurns(runningReadsAgain(attempt(mode, work, check, again)))
        : attempt(mode, work, check, again)
    const once = run(false)
    // Most units succeed at once; the retry loop (a schedule's state, about as costly as a short unit) is set up
    // only after a first run lost a race. The first re-run follows at once, the later ones after the backoff. A
    // lookup that asks for a read unit (an audit trail's first page with counting to do, see TrailCounts), at its
    // first run or a re-run, runs again as one; the ask is a conflict, so it is caught with the lost races, at no
    // cost to the lookups that succeed.
    if (mode !== "lookup") {
      return times <= 0 ? once : Effect.catchIf(once, isRetryable, () => Effect.retry(run(true), { schedule: backoff, times: times - 1, while: isRetryable }))
    }
    if (times <= 0) return Effect.catchIf(once, isReadUnitWanted, () => transaction("read", work, check))
    return Effect.catchIf(once, isRetryable, (error) => {
      const asRead = () => transaction("read", work, check)
      return isReadUnitWanted(error) ? asRead() : Effect.catchIf(
        Effect.retry(run(true), { schedule: backoff, times: times - 1, while: (error) => isRetryable(error) && !isReadUnitWanted(error) }),
        isReadUnitWanted,
        asRead
      )
    })
  }
  if (keptApiUsers === undefined) return Storage.Storage.of({ transaction })
  return Storage.Storage.of({
    // A unit of a request running on a kept credential not yet confirmed confirms it (see KeptApiUsers).
    transaction: (mode, work) =>
      Effect.withFiber((fiber) => {
        const pending = fiber.getRef(Storage.CurrentCredential)
        return transaction(mode, work, pending === undefined || pending.confirmed ? undefined : keptApiUsers.checkOf(pending))
      }),
    keptCredentials: keptApiUsers
  })
}
