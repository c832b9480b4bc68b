/**
 * The audit trail's totals and deep pages without counting or walking the whole log at every read. Counting a trail
 * (a client's events, or those a filter picks) steps over every event in it: on SQLite 64 ms for a million on the
 * event loop, where every other request waits, and on PostgreSQL 226 ms of the database's time, on the cores the
 * node shares with it (docs/benchmarks.md); a deep page read by offset walks as far.
 *
 * The log only grows (the events are the custody record; retention keeps them), and once every event at or below a
 * position p is committed and no event at or below p can still be added, the number of a trail's events at or below
 * p holds in every later snapshot, in every process on the database: p is settled. This keeps, per trail, that
 * number at the end of each stride of the log (positions (k·STRIDE, (k+1)·STRIDE]) up to the last stride a unit's
 * snapshot held settled:
 * - a total is the last stride's count plus the events after it;
 * - a page's events lie after the last stride end with at most the page's oldest before it, and at or before the first
 *   with at least its newest: a read from the one bounded by the other.
 * Which positions a snapshot holds settled is the engine's (`TrailReads.top`): on SQLite all it holds, as its one
 * writer at a time numbers each event one past the largest position ever used (AUTOINCREMENT); on PostgreSQL those
 * that marks taken in earlier snapshots vouch for (postgres/SettledPositions). A unit uses only the counts of strides
 * its own snapshot holds settled: units run side by side, on snapshots of their own.
 *
 * A first page is read in a lookup unit (Storage.unitForPage) in one statement, with the events after the last stride
 * counted, when they are at most two strides' positions; else the lookup asks to run again as a read unit. There,
 * strides not counted yet are counted:
 * - where statements run in the database, off the event loop (PostgreSQL, `countPerStride`): all in one statement, a
 *   long count (a first) once the unit holds a turn (`CountTurnHeld`);
 * - on SQLite, one statement each, for `unitMillis`; then, where the file has a read worker, the rest are counted
 *   there in one statement while the event loop serves other requests (the unit stops with a far walk and runs again,
 *   see SqlStorage), else the unit pauses for a turn of the event loop and goes on counting (a walk pause).
 * A read unit learns the log's end and the trail's events after the strides kept in one statement, and where reads
 * issued together share a round trip (PostgreSQL) guesses the page beside it (see `page`).
 * A trail's first read counts its whole log once; later reads count what was added since, unless the trail was
 * forgotten meanwhile (`MAX_TRAILS`). Each distinct filter is a trail of its own, a time range's too; a time range's
 * strides are counted from its base trail's stride times, so a new range reads only the strides its edges cut
 * (StrideTimes). A write unit
 * (a redelivery's) reads the trail as before: its own events are not committed, and would be counted if it rolled
 * back.
 */
import { Page, Storage } from "@custody-relay/core"
import { Context, Effect } from "effect"
import {
  farWalk,
  GUESS_MARGIN_ROWS,
  isMarked,
  markedConflict,
  pageFromOldest,
  pageRanks,
  UNIT_MILLIS,
  walkPause,
  WalkMayLeaveLoop,
  WalkMayPause
} from "./PageBoundaries.js"
import { setRecent } from "./RecentlyUsed.js"
import { StrideTimes } from "./StrideTimes.js"
import type { Op } from "./SqlUnit.js"

/**
 * Log positions per stride. A read on the event loop passes at most `SPAN_ON_LOOP` strides' positions; a trail whose
 * filter the index does not hold (an entity type, types, a time range) reads the row of every event it passes, about
 * 0.3 µs each on SQLite. A trail keeps one number per stride: 488 for a log of a million events, about 4.4 KB (measured
 * on Node 24).
 */
export const STRIDE_POSITIONS = 2_048

/**
 * How many strides' positions a page's read may pass on the event loop (a first page's in a lookup includes the
 * events after the last stride counted, up to two strides). A page of a sparse trail can lie across more (its events
 * far apart in the log): where the file has a read worker, the positions of its events are read there, and the rows
 * by position on the loop.
 */
export const SPAN_ON_LOOP = 3

/**
 * How many strides' positions after the counted strides a read counts in passing: a first page's lookup, and the read
 * that learns a read unit's log end. Beyond, the log grew more than that since the trail was last counted, and the
 * read unit counts strides.
 */
export const TAIL_STRIDES = 2

/**
 * How many trails' counts are kept (the least recently read are forgotten, and counted again if read again): about
 * 1.1 MB at a million events, 110 MB at a hundred million, were all of them read.
 */
export const MAX_TRAILS = 256

/**
 * How many time ranges' trails' counts are kept, apart from the other trails' (`MAX_TRAILS`): ranges that move with the
 * clock are many, and each is counted again from its base trail's stride times (StrideTimes) at the cost of the
 * strides its edges cut, so they do not push out trails whose counting reads their whole log.
 */
export const MAX_RANGE_TRAILS = 64

/**
 * How many strides' positions a read unit counts without a turn of its own, where counts take turns (the storage's
 * `maxConcurrentTrailCounts`, PostgreSQL): more, a trail's first count or one after many writes, waits for a turn
 * (`CountTurnHeld`). A count of a trail read before covers what was written since, a stride or two under steady
 * writes, and runs beside everything else.
 */
export const UNTURNED_COUNT_STRIDES = 16

/**
 * Whether the unit may count more than `UNTURNED_COUNT_STRIDES` strides' positions. Where statements run in the
 * database, a trail's first count reads its whole log (at a million events 0.2 to 1.3 s of one of the database's
 * cores, docs/benchmarks.md), and two side by side take every core a small machine shares with its node: every
 * other request then waits for one. The storage turns this off where such counts take turns (SqlStorage), and runs a
 * unit that asks for a turn (`isCountTurnWanted`) again once it holds one, outside any transaction, so a unit waiting
 * for its turn holds no connection and no snapshot.
 */
export const CountTurnHeld = Context.Reference<boolean>("@custody-relay/storage-sql/TrailCounts/CountTurnHeld", {
  defaultValue: () => true
})

/** How a trail's events are read in the unit, for `TrailCounts`. */
export interface TrailReads<Row> {
  /**
   * Whether the index the reads go through holds the filter (a client alone; an entity, whatever else the filter asks,
   * as a record's events are few next to the log): a read then passes only the trail's own events, however far apart
   * in the log, and no read needs its span bounded.
   */
  readonly indexHolds: boolean
  /** Whether the trail is a time range's (its counts kept apart, see `MAX_RANGE_TRAILS`). */
  readonly timeRange: boolean
  /** The log's end in the unit's snapshot. */
  readonly top: () => Op<LogEnd>
  /**
   * The log's end in the unit's snapshot and the number of the trail's events with a position in (after, upTo]: one
   * statement, so the events after the last counted stride are counted in the read that learns the log's end.
   */
  readonly topWithTail: (after: number, upTo: number) => Op<LogEnd & { readonly tail: number }>
  /** How many of the trail's events have a position in (after, upTo]. */
  readonly count: (after: number, upTo: number) => Op<number>
  /**
   * The trail's newest `limit` events with a position in (newerThan, upTo], the number of the trail's events in
   * (after, after + stride] and in (after + stride, upTo], and the log's end: one statement, so one moment, in any
   * unit (a lookup's, see `firstPage`).
   */
  readonly newestWithTail: (
    after: number,
    stride: number,
    upTo: number,
    newerThan: number,
    limit: number
  ) => Op<{ readonly rows: ReadonlyArray<Row>; readonly inStride: number; readonly beyond: number; readonly end: LogEnd }>
  /** `limit` of the trail's events with a position in (after, upTo], oldest first, skipping `offset`. */
  readonly between: (after: number, upTo: number, limit: number, offset: number) => Op<ReadonlyArray<Row>>
  /** The events at these positions, newest first. */
  readonly atPositions: (positions: ReadonlyArray<number>) => Op<ReadonlyArray<Row>>
  /**
   * Whether each statement is a round trip and reads issued together share one (statements run in the database,
   * PostgreSQL): a later page is then guessed at in the round trip that learns the log's end (see `page`).
   */
  readonly readsShareRoundTrip: boolean
  /**
   * The trail's events per stride with a position in (after, upTo], for the strides with any, by index
   * (`(position - 1) / stride`), in the unit: present where statements run off the event loop (PostgreSQL), so a
   * unit counts every stride it lacks in one statement.
   */
  readonly countPerStride?: StrideCounts
  /**
   * Off the event loop, outside the unit, each in a snapshot of its own (absent where the storage has no read worker;
   * exact in any later snapshot, as they read no position above one the unit saw):
   * - `countPerStride`: the trail's events per stride with a position in (after, upTo], for the strides with any, by
   *   index (`(position - 1) / stride`);
   * - `positionsBetween`: the positions `between` would read.
   */
  readonly offLoop?: {
    readonly countPerStride: StrideCounts
    readonly positionsBetween: (after: number, upTo: number, limit: number, offset: number) => Op<ReadonlyArray<number>>
  }
}

/**
 * The log's end in a unit's snapshot: `top`, its largest position (0 when the log is empty), and `settled`, the
 * largest position at or below which the snapshot holds every event the log will ever have (at most `top`).
 */
export interface LogEnd {
  readonly top: number
  readonly settled: number
}

/** The trail's events per stride in (after, upTo], for the strides with any (see TrailReads). */
export type StrideCounts = (after: number, upTo: number, stride: number) => Op<ReadonlyArray<{ readonly stride: number; readonly count: number }>>

/** A trail's kept counts, and the total its last page was read with (what a guess at its next page assumes). */
interface Trail {
  /** The number of the trail's events at or below the end of each stride counted so far, in stride order. */
  readonly counts: Array<number>
  lastTotal: number | undefined
}

/**
 * Rows read in a guess at a later page (see `page`): the trail's events from the oldest, `first` being the rank (from
 * the oldest, from 0) of the first; exact in the unit's snapshot when it holds settled the stride `from` (-1: none)
 * they were read after, whose count they were ranked from.
 */
interface GuessedRows<Row> {
  readonly from: number
  readonly first: number
  readonly rows: ReadonlyArray<Row>
}

export class TrailCounts {
  readonly #trails = new Map<string, Trail>()
  readonly #rangeTrails = new Map<string, Trail>()
  /**
   * Positions of pages read off the loop, by trail and read (see `page`); final, as every one is at or below a top seen
   * (a read worker is SQLite's, where a snapshot holds settled every position it holds).
   */
  readonly #pagePositions = new Map<string, ReadonlyArray<number>>()
  /** The times of base trails' settled strides, from which a time range's trail is counted (see StrideTimes). */
  readonly strideTimes = new StrideTimes()
  /** The largest log top a read has seen: where a later page's read expects the log's end (see `page`). */
  #topSeen: number | undefined = undefined

  constructor(
    readonly stride: number = STRIDE_POSITIONS,
    readonly unitMillis: number = UNIT_MILLIS,
    readonly clock: () => number = () => performance.now()
  ) {}

  /**
   * The first page of the trail `trailKey` names and its total, in a lookup unit (Storage.unitForPage): one statement,
   * when the strides counted so far reach to within two strides of the log's end and the page's events lie within
   * `SPAN_ON_LOOP` strides of it (or the index holds the filter); it counts the next stride apart, and keeps that
   * count when the statement's snapshot holds the stride settled. Else (or when the snapshot does not hold the
   * counted strides settled) the unit stops, and the storage runs it again as a read unit (`isReadUnitWanted`), which
   * counts and may leave the loop (`page`).
   */
  firstPage<Row>(trailKey: string, limit: number, reads: TrailReads<Row>): Op<Page.Page<Row>> {
    const trail = this.#trailOf(trailKey, reads.timeRange)
    const { counts } = trail
    const after = counts.length * this.stride
    const upTo = after + TAIL_STRIDES * this.stride
    // The newest `limit` events, counted from the oldest, are at or above `known - limit` whatever came after.
    const known = counts.at(-1) ?? 0
    const from = lastAtOrBelow(counts, known - limit, counts.length)
    const newerThan = (from + 1) * this.stride
    if (!reads.indexHolds && upTo - newerThan > SPAN_ON_LOOP * this.stride) return Effect.fail(readUnitWanted())
    return Effect.flatMap(reads.newestWithTail(after, this.stride, upTo, newerThan, limit), ({ beyond, end, inStride, rows }) => {
      this.#see(end)
      // A log that grew past `upTo` since the trail was last counted, or a snapshot that does not hold the counted
      // strides settled (a lookup's older than that count, or one beside a transaction still writing below them).
      if (end.settled < after || end.top > upTo) return Effect.fail(readUnitWanted())
      // The statement's snapshot held the next stride settled: its count is final, and later lookups count from there.
      if (end.settled >= after + this.stride && counts.length * this.stride === after) counts.push(known + inStride)
      const total = known + inStride + beyond
      trail.lastTotal = total
      return Effect.succeed({ items: rows, total })
    })
  }

  /**
   * The page of `request` (newest first) of the trail `trailKey` names, and its total, read in one read unit's
   * snapshot; it may stop the unit to count or read off the loop, or pause (see above).
   *
   * The read that learns the log's end also counts the events after the strides kept, when the log's end last seen
   * lies within two strides of them; the count serves when the unit's snapshot holds settled just the strides kept,
   * as it does between two strides' worth of writes. Where reads issued together share a round trip (PostgreSQL),
   * the page is guessed at in it too: the rows of the page as it was at the trail's last total, `GUESS_MARGIN_ROWS`
   * more on either side, ranked from a kept stride's count; they serve when the snapshot holds that stride settled
   * and hold the page at the total read. A later page of a trail read before is then one round trip.
   */
  page<Row>(trailKey: string, request: Page.PageRequest, reads: TrailReads<Row>): Op<Page.Page<Row>> {
    const self = this
    return Effect.gen(function*() {
      const trail = self.#trailOf(trailKey, reads.timeRange)
      const { counts } = trail
      const tailAfter = counts.length * self.stride
      const tailUpTo = tailAfter + TAIL_STRIDES * self.stride
      const endRead: Op<LogEnd & { readonly tail?: number }> = self.#topSeen !== undefined && self.#topSeen <= tailUpTo
        ? reads.topWithTail(tailAfter, tailUpTo)
        : reads.top()
      const guess = reads.readsShareRoundTrip ? self.#guess(trail, request, tailUpTo, reads) : undefined
      const [end, guessed] = guess === undefined
        ? [yield* endRead, undefined]
        : yield* Effect.all([endRead, guess], { concurrency: 2 })
      self.#see(end)
      const { settled, top } = end
      // The strides this snapshot holds settled: the only counts it may use, however many are kept.
      const whole = Math.floor(settled / self.stride)
      // What is counted below: the strides it holds settled and lacks, then the events after them.
      if (top - Math.min(counts.length, whole) * self.stride > UNTURNED_COUNT_STRIDES * self.stride && !(yield* CountTurnHeld)) {
        return yield* Effect.fail(countTurnWanted())
      }
      if (counts.length < whole && reads.countPerStride !== undefined) {
        const first = counts.length
        appendStrides(counts, first, whole, yield* reads.countPerStride(first * self.stride, whole * self.stride, self.stride))
      }
      const began = self.clock()
      for (let counted = 0; counts.length < whole; counted++) {
        if (counted > 0 && self.clock() - began >= self.unitMillis && (yield* WalkMayPause)) {
          if (reads.offLoop !== undefined && (yield* WalkMayLeaveLoop)) {
            return yield* Effect.fail(self.#countFar(counts, whole, reads.offLoop.countPerStride))
          }
          return yield* Effect.fail(walkPause())
        }
        const k = counts.length
        const inStride = yield* reads.count(k * self.stride, (k + 1) * self.stride)
        // Strides are only ever appended, each once: a far count may have filled this one meanwhile.
        if (counts.length === k) counts.push((counts[k - 1] ?? 0) + inStride)
      }
      const below = counts[whole - 1] ?? 0
      // Bounded by the top, not open-ended: PostgreSQL's generic plan for a read unit prices `position > $n` at a
      // third of the log and scans the client's every event (the read units' plans, PostgresSession.isolation).
      const afterWhole = end.tail !== undefined && whole * self.stride === tailAfter && top <= tailUpTo
        ? end.tail
        : yield* reads.count(whole * self.stride, top)
      const total = below + afterWhole
      trail.lastTotal = total
      const { end: pageEnd, high, low, offset } = pageRanks(request, total)
      if (pageEnd <= offset) return { items: [], total }
      const fromGuess = guessed !== undefined && guessed.from < whole ? pageFromOldest(guessed.rows, guessed.first, low, high) : undefined
      if (fromGuess !== undefined) return { items: fromGuess, total }
      // The page lies after the last stride end with at most `low` of the trail's events before it, and at or before
      // the first with at least `high` (the log's end when none has).
      const { after, skip, upTo } = self.#span(counts, whole, low, high, top)
      // The page's positions, once read off the loop, hold whatever was appended since: the page's `limit` events
      // after `after` were all at or below the top then.
      const key = JSON.stringify([trailKey, after, high - low, skip])
      const positions = self.#pagePositions.get(key)
      if (positions !== undefined) return { items: yield* reads.atPositions(positions), total }
      const { offLoop } = reads
      const far = !reads.indexHolds && upTo - after > SPAN_ON_LOOP * self.stride && offLoop !== undefined
      if (far && (yield* WalkMayPause) && (yield* WalkMayLeaveLoop)) {
        return yield* Effect.fail(self.#readFar(key, offLoop.positionsBetween(after, upTo, high - low, skip)))
      }
      const found = yield* reads.between(after, upTo, high - low, skip)
      return { items: [...found].reverse(), total }
    })
  }

  /**
   * The rows of the page of `request` as it was at the trail's last total, with `GUESS_MARGIN_ROWS` more on either
   * side, read from the nearest kept stride's end before them (see `page`); undefined where no page of the trail was
   * read yet or the page lay past the trail's end.
   */
  #guess<Row>(trail: Trail, request: Page.PageRequest, tailUpTo: number, reads: TrailReads<Row>): Op<GuessedRows<Row>> | undefined {
    const ranks = trail.lastTotal === undefined ? undefined : pageRanks(request, trail.lastTotal)
    if (ranks === undefined || ranks.end <= ranks.offset) return undefined
    const { counts } = trail
    const first = Math.max(0, ranks.low - GUESS_MARGIN_ROWS)
    const past = ranks.high + GUESS_MARGIN_ROWS
    const { after, from, skip, upTo } = this.#span(counts, counts.length, first, past, tailUpTo)
    return Effect.map(reads.between(after, upTo, past - first, skip), (rows) => ({ from, first, rows }))
  }

  /**
   * Where a read of the trail's events [low, high) (counted from the oldest) runs, from the first `length` counts:
   * after the end of the last stride `from` (-1: the log's start) with at most `low` of them at or below it, skipping
   * `skip` of them, up to the end of the first stride with at least `high`, or to `end` when none of those has.
   */
  #span(counts: ReadonlyArray<number>, length: number, low: number, high: number, end: number) {
    const from = lastAtOrBelow(counts, low, length)
    const to = lastAtOrBelow(counts, high - 1, length) + 1
    return {
      from,
      after: (from + 1) * this.stride,
      skip: low - (from < 0 ? 0 : counts[from]!),
      upTo: to < length ? (to + 1) * this.stride : end
    }
  }

  /** Notes the log's end a read saw. */
  #see(end: LogEnd): void {
    this.#topSeen = Math.max(this.#topSeen ?? 0, end.top)
  }

  /** The trail's counts (none yet when it was never read, or forgotten), now its most recently read. */
  #trailOf(trailKey: string, timeRange: boolean): Trail {
    const trails = timeRange ? this.#rangeTrails : this.#trails
    const trail = trails.get(trailKey) ?? { counts: [], lastTotal: undefined }
    setRecent(trails, trailKey, trail, timeRange ? MAX_RANGE_TRAILS : MAX_TRAILS)
    return trail
  }

  /** Counts strides [counts.length, whole) off the event loop: the error the unit stops with (see PageBoundaries.farWalk). */
  #countFar(
    counts: Array<number>,
    whole: number,
    countPerStride: StrideCounts
  ): Storage.StorageError {
    const first = counts.length
    const stride = this.stride
    return farWalk(
      "an audit trail's count steps off the event loop",
      Effect.map(countPerStride(first * stride, whole * stride, stride), (found) => appendStrides(counts, first, whole, found))
    )
  }

  /** Reads a page's positions off the event loop, kept under `key` for the unit's next run (see `page`). */
  #readFar(key: string, positions: Op<ReadonlyArray<number>>): Storage.StorageError {
    return farWalk(
      "an audit trail's page is found off the event loop",
      Effect.map(positions, (found) => setRecent(this.#pagePositions, key, found, MAX_TRAILS))
    )
  }
}

/**
 * Appends to `counts` the strides up to `whole` from the counts per stride of strides [first, whole) `found` holds.
 * Another request may have counted some of these strides meanwhile (on the loop, or off it): every count is final,
 * so this goes on from where the trail's counts now end.
 */
const appendStrides = (
  counts: Array<number>,
  first: number,
  whole: number,
  found: ReadonlyArray<{ readonly stride: number; readonly count: number }>
): void => {
  const inStride = new Array<number>(whole - first).fill(0)
  for (const { count, stride: k } of found) inStride[k - first] = count
  for (let k = counts.length; k < whole; k++) counts.push((counts[k - 1] ?? 0) + inStride[k - first]!)
}

const countTurnsWanted = new WeakSet<Storage.StorageError>()

/** A read unit asks to run again holding a turn to count (see `CountTurnHeld`). */
const countTurnWanted = (): Storage.StorageError => markedConflict(countTurnsWanted, "an audit trail's long count waits for its turn")

export const isCountTurnWanted = (error: unknown): boolean => isMarked(countTurnsWanted, error)

const readUnitsWanted = new WeakSet<Storage.StorageError>()

/** A lookup asks to run again as a read unit, which may count (see `firstPage`). */
const readUnitWanted = (): Storage.StorageError => markedConflict(readUnitsWanted, "an audit trail's first page needs counting, which a read unit does")

export const isReadUnitWanted = (error: unknown): boolean => isMarked(readUnitsWanted, error)

/** The last of the first `length` counts at or below `wanted` (counts never decrease), or -1 when none is. */
const lastAtOrBelow = (counts: ReadonlyArray<number>, wanted: number, length: number): number => {
  let found = -1
  for (let lo = 0, hi = length - 1; lo <= hi;) {
    const mid = (lo + hi) >>> 1
    if (counts[mid]! <= wanted) {
      found = mid
      lo = mid + 1
    } else {
      hi = mid - 1
    }
  }
  return found
}
