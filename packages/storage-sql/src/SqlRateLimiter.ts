/**
 * The RateLimiter port in the database, so every node that shares it counts against one budget per key
 * (LIM-RATE-1). The counts a node takes in one turn of its event loop (and while its last upsert is out) are one
 * atomic upsert of their (key, window) rows that returns each new count (`RateLimiter.countedTogether`): concurrent
 * requests, on any node, each get a distinct count. Rows of windows that ended are purged at most once a minute per
 * node. The window arithmetic and the decision are the port's own (`windowOf`, `decide`).
 */
import { OutageLog, RateLimiter, Storage } from "@custody-relay/core"
import { Clock, Effect, Fiber, Schedule, Semaphore } from "effect"
import type { Kysely } from "kysely"
import type { Database, RateLimitWindowsTable } from "./schema/Database.js"
import type { SqlEngine } from "./SqlEngine.js"
import { isRetryable } from "./SqlStorage.js"
import { byRows } from "./StatementTemplate.js"
import * as StorageFailure from "./StorageFailure.js"

const PURGE_INTERVAL_MILLIS = 60_000

/** A busy SQLite file is the one race an upsert can lose; a few quick re-runs absorb it. */
const retry = { schedule: Schedule.exponential("2 millis").pipe(Schedule.jittered), times: 5, while: isRetryable }

/**
 * How long a count waits for the database by default: as long as PostgreSQL's own lock wait (the pool's
 * `lockTimeoutMillis`), the longest a healthy database keeps an upsert of a window waiting for another node's.
 */
export const DEFAULT_COUNT_TIMEOUT_MILLIS = 5_000

/**
 * A statement of the limiter bounded in time: one the database never answers (a network that drops its packets, a
 * server that stopped) fails as the database being unavailable once `millis` have passed, and stops being waited
 * for. Without the bound a count would wait as long as TCP does, and every count of the node with it: counts go out
 * one call at a time (`make`), and a synced limiter's rounds one at a time. Its outcome is unknown: the database may
 * have run it, or may yet.
 */
const bounded = (millis: number) => <A>(statement: Effect.Effect<A, Storage.StorageError>): Effect.Effect<A, Storage.StorageError> =>
  Effect.timeoutOrElse(statement, {
    duration: millis,
    orElse: () => Effect.fail(StorageFailure.unanswered(`the database did not answer a rate-limit count within ${millis} ms`))
  })

/**
 * Adds each window's counts to its row, creating it, and returns the new totals in the order given: one atomic
 * upsert. Its rows are written in one order (key, then window), so two nodes' upserts of the same keys wait for each
 * other instead of deadlocking.
 *
 * The upsert commits on its own, so a connection lost once it was sent, with no answer from the database, leaves its
 * outcome unknown: the database may have added the counts. That failure is not re-run, which could add them twice.
 * One before the statement had a connection to go out on (refused, no such host), or that the database answered
 * (a backend terminated before it ran: the statement rolled back), is re-run, as a lost race is
 * (StorageFailure.mayHaveRun).
 */
const addToWindows = (db: Kysely<Database>, engine: SqlEngine, timeoutMillis: number) => {
  const autocommit = engine.autocommit(db)
  // Compiled once per number of windows: building it with kysely at every count was 4% of a GET's CPU.
  const upsertOf = byRows((rows: ReadonlyArray<RateLimitWindowsTable>) =>
    db.insertInto("rate_limit_windows")
      .values(rows)
      .onConflict((oc) =>
        oc.columns(["key", "window_start"]).doUpdateSet((eb) => ({ count: eb("rate_limit_windows.count", "+", eb.ref("excluded.count")) }))
      )
      .returning(["key", "window_start", "count"])
  )
  return (windows: ReadonlyArray<RateLimiter.WindowCounts>) =>
    Effect.suspend(() => {
      let sent = false
      const upsert = upsertOf(
        [...windows]
          .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.windowStart - b.windowStart))
          .map((window) => ({ key: window.key, window_start: window.windowStart, window_end: window.windowEnd, count: window.added }))
      ).compile()
      return Effect.tryPromise({
        try: async () => {
          const { rows } = await autocommit(upsert, () => {
            sent = true
          })
          const totals = new Map(rows.map((row) => [`${Number(row.window_start)} ${row.key}`, Number(row.count)]))
          return windows.map((window) => {
            const total = totals.get(`${window.windowStart} ${window.key}`)
            if (total === undefined) throw new Error(`the upsert of rate-limit windows returned no count for ${window.key}`)
            return total
          })
        },
        catch: (cause) => {
          const error = engine.classify(cause)
          return sent && StorageFailure.mayHaveRun(error, cause) ? StorageFailure.commitOutcomeUnknown(cause) : error
        }
      })
    }).pipe(Effect.retry(retry), bounded(timeoutMillis))
}

/** Removes the windows that ended by `nowMillis`, at most once per PURGE_INTERVAL_MILLIS of calls. */
const purgeEvery = (db: Kysely<Database>, engine: SqlEngine, timeoutMillis: number) => {
  let nextPurgeAt = 0
  return (nowMillis: number) => {
    if (nowMillis < nextPurgeAt) return Effect.void
    nextPurgeAt = nowMillis + PURGE_INTERVAL_MILLIS
    return Effect.tryPromise({
      try: () => db.deleteFrom("rate_limit_windows").where("window_end", "<=", nowMillis).execute(),
      catch: engine.classify
    }).pipe(Effect.retry(retry), bounded(timeoutMillis), Effect.asVoid)
  }
}

/**
 * `countTimeoutMillis`: how long a request waits for the database to count it before it is refused as the database
 * being unavailable (DEFAULT_COUNT_TIMEOUT_MILLIS by default).
 */
export const make = (
  db: Kysely<Database>,
  engine: SqlEngine,
  countTimeoutMillis: number = DEFAULT_COUNT_TIMEOUT_MILLIS
): RateLimiter.RateLimiter["Service"] => {
  // One upsert out at a time per node: each commits, so the counts that gather while one is out share the next.
  const count = RateLimiter.countedTogether(addToWindows(db, engine, countTimeoutMillis), { atTurnEnd: setImmediate, oneCallAtATime: true })
  const purge = purgeEvery(db, engine, countTimeoutMillis)
  return RateLimiter.RateLimiter.of({
    // The port promises a decision, not an error: a database that cannot count is an infrastructure fault.
    consume: Effect.fnUntraced(function*(key: string, policy: RateLimiter.RateLimitPolicy) {
      const nowMillis = yield* Clock.currentTimeMillis
      const { resetAt, windowStart } = RateLimiter.windowOf(nowMillis, policy.windowSeconds)
      const counted = yield* count(key, windowStart, resetAt * 1000)
      yield* purge(nowMillis)
      return RateLimiter.decide(counted, policy, resetAt, nowMillis)
    }, Effect.orDie)
  })
}

/** How often a synced limiter reconciles with the database by default (Kong's `sync_rate`, in milliseconds). */
export const DEFAULT_SYNC_MILLIS = 1_000

interface LocalWindow {
  readonly windowStart: number
  readonly windowEnd: number
  /** The window's count in the database when this node last looked (its own flushed requests included). */
  shared: number
  /** This node's requests not yet added to the database's count. */
  unsynced: number
}

/**
 * The RateLimiter port counted in memory and reconciled with the database every `syncMillis`: for nodes sharing a
 * database but no Redis, at the cost of a request's budget being exact only per node between two syncs (Kong's
 * "cluster" policy with a `sync_rate`). A request costs no statement: each decision counts from the window's
 * count in the database as this node last saw it plus its own requests since. The first request of a key's
 * window on this node reads that count; every `syncMillis` the windows with new requests add them to their rows
 * (one upsert that returns the new totals, as `make` does for a turn's requests) and take the totals back.
 *
 * Accuracy: one node alone is exact. Several nodes can admit, together, up to what the others admitted since their
 * last sync beyond the limit: at most (nodes - 1) x (one node's requests per sync interval) more, and never more
 * than nodes x limit in a window. A window's unsynced requests are written when the layer closes; a node that
 * dies loses at most one interval of them.
 */
export const makeSynced = (
  db: Kysely<Database>,
  engine: SqlEngine,
  syncMillis: number = DEFAULT_SYNC_MILLIS,
  countTimeoutMillis: number = DEFAULT_COUNT_TIMEOUT_MILLIS
) =>
  Effect.gen(function*() {
    const windows = new Map<string, LocalWindow>()
    const add = addToWindows(db, engine, countTimeoutMillis)
    const purge = purgeEvery(db, engine, countTimeoutMillis)

    const read = (key: string, windowStart: number) =>
      Effect.tryPromise({
        try: () =>
          db.selectFrom("rate_limit_windows").select("count")
            .where("key", "=", key).where("window_start", "=", windowStart)
            .executeTakeFirst(),
        catch: engine.classify
      }).pipe(Effect.retry(retry), bounded(countTimeoutMillis))

    /**
     * Adds every window's new requests to the database in one upsert and takes each total back; forgets ended windows.
     * Answers whether there was anything to add: a round that had nothing met no database.
     */
    const sync = Effect.gen(function*() {
      const nowMillis = yield* Clock.currentTimeMillis
      const due: Array<{ readonly key: string; readonly window: LocalWindow; readonly added: number }> = []
      for (const [key, window] of windows) {
        if (window.windowEnd <= nowMillis) {
          // An ended window's count decides nothing any more, here or on another node.
          windows.delete(key)
          continue
        }
        if (window.unsynced > 0) due.push({ key, window, added: window.unsynced })
      }
      if (due.length > 0) {
        // Written and taken off together: an interrupted round must not leave a count both in the row and unsynced.
        yield* Effect.uninterruptible(
          add(due.map(({ added, key, window }) => ({ key, windowStart: window.windowStart, windowEnd: window.windowEnd, added }))).pipe(
            Effect.map((totals) =>
              due.forEach(({ added, window }, i) => {
                // Requests counted while the upsert ran stay unsynced, for the next round.
                window.unsynced -= added
                window.shared = totals[i] ?? window.shared
              })
            ),
            // An upsert that got no answer may have been written: its counts are taken as written rather than sent
            // again, which could count them twice (and each unanswered round again). If it was not, they are lost, as
            // a killed node's are. A round that failed otherwise keeps them for the next one.
            Effect.tapError((error) =>
              Effect.sync(() => {
                if (!error.isOutcomeUnknown) return
                due.forEach(({ added, window }) => {
                  window.unsynced -= added
                  window.shared += added
                })
              })
            )
          )
        )
      }
      yield* purge(nowMillis)
      return due.length > 0
    })

    // One round at a time. A failed round (the database unreachable) keeps its counts for the next one; decisions
    // go on locally. An outage is said when it begins, once a minute while it lasts, and when it ends (OutageLog),
    // not at every round.
    const rounds = yield* Semaphore.make(1)
    const reconciling = OutageLog.make({
      began: "rate limit: reconciling with the database failed; counting on locally",
      continues: "rate limit: reconciling with the database still fails; counting on locally",
      ended: "rate limit: reconciling with the database again"
    })
    const round = rounds.withPermits(1)(sync).pipe(
      Effect.tap((added) => (added ? reconciling.succeeded : Effect.void)),
      Effect.catchCause((cause) => reconciling.failed(OutageLog.failureOf(cause)))
    )
    // The first round comes an interval after start, not at once: a round at start found nothing to write, or, when
    // the forked fiber first ran after a request had counted, wrote that request before its interval was up.
    const background = yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(syncMillis), round)))
    // On close: the background rounds stop (a round under way finishes its upsert), then a last round writes the rest.
    yield* Effect.addFinalizer(() => Effect.andThen(Fiber.interrupt(background), round))

    return RateLimiter.RateLimiter.of({
      consume: (key, policy) =>
        Effect.flatMap(Clock.currentTimeMillis, (nowMillis) => {
          const { resetAt, windowStart } = RateLimiter.windowOf(nowMillis, policy.windowSeconds)
          const known = windows.get(key)
          if (known !== undefined && known.windowStart === windowStart) {
            known.unsynced++
            return Effect.succeed(RateLimiter.decide(known.shared + known.unsynced, policy, resetAt, nowMillis))
          }
          const window: LocalWindow = { windowStart, windowEnd: resetAt * 1000, shared: 0, unsynced: 1 }
          windows.set(key, window)
          // The first request of the window on this node learns what the other nodes counted so far.
          return read(key, windowStart).pipe(
            Effect.map((row) => {
              window.shared = Math.max(window.shared, Number(row?.count ?? 0))
              return RateLimiter.decide(window.shared + window.unsynced, policy, resetAt, nowMillis)
            }),
            Effect.orDie
          )
        })
    })
  })
