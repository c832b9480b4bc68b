/**
 * Deep pages of the transaction list without walking to them. A page at offset n makes the database step over n
 * index entries (about 50 ns each on SQLite, on the event loop: 25 ms for the middle of a million rows, and every
 * other request waits). Reading from the nearer end (SqlUnit.pageOf) halves the worst walk; this keeps, per list
 * (client and filter), a few boundaries: sort keys with the number of the list's rows at or before them, oldest
 * first. A page then seeks to the nearest boundary through the index and walks at most a step from there. A walk
 * longer than a step leaves a boundary every step on its way, so the first deep read of a list pays the walk once
 * and every later page of it is a seek and a short walk.
 *
 * Counting from the oldest end makes boundaries outlive the writes a list usually gets: a new transaction sorts
 * newest, after every boundary, and moves none. A boundary is exact only while no row at or before its key enters
 * or leaves the list, so:
 * - every transaction this process inserts, or moves to another status group, forgets the boundaries of its
 *   client's lists at or after its key (`changed`), before its unit commits; a unit that rolls back only forgets
 *   more than it had to;
 * - what other writers changed is read in the unit that uses the boundaries, after its snapshot is taken (a
 *   `Sighting`, one statement per engine, see SqlEngine.listChanges):
 *   - SQLite: `PRAGMA data_version`, which moves when another connection (another process on the file) commits;
 *     a new version forgets every boundary. SQLite runs one unit at a time, so a unit's snapshot is the newest.
 *   - PostgreSQL: other nodes write all the time, so a node keeps, per client, the snapshot its boundaries are exact
 *     in, and reads the client's list changes (migration 8's log, written by a trigger) of every transaction that
 *     snapshot did not see committed: those it counted as running, and those from its next transaction id on. (Not
 *     of every transaction from its oldest running one: another client's long transaction, a report or a backup,
 *     holds that back, and every unit would read again each change since and forget the boundaries after it, though
 *     they counted it long ago.) Units of a node run side by side on their own snapshots, so a unit
 *     uses and adds boundaries only when its snapshot sees everything the kept one saw (`seesAllOf`): it forgets
 *     the boundaries at or after each change, then its snapshot becomes the kept one. Under writes a reader often
 *     began just before another took a newer snapshot: its snapshot misses a commit the kept one saw, so it was
 *     taken before the kept one and everything it sees the kept one saw. The snapshots kept before the kept one are
 *     remembered with the least key changed since each (`EarlierSnapshot`); where the unit's snapshot sees all one
 *     of them saw, the boundaries before that key are exact in it too, and it reads from those, adding none. A unit
 *     that cannot use them (its snapshot older than every remembered one, its page more than a step from those it
 *     may use, or its kept snapshot moved on while it walked) would read its page from the nearer end, walking up
 *     to half the list (100 to 400 ms at a million rows; docs/benchmarks.md). So where its page is more than a step
 *     from both ends, it asks to run again (`isNewerSnapshotWanted`): a unit begun later sees every commit the kept
 *     snapshot saw. The storage runs a read unit again so up to `MAX_NEWER_SNAPSHOTS` times
 *     (`MayAskNewerSnapshot`); otherwise, and in its last run, the unit reads from the nearer end, as without
 *     boundaries.
 *
 * A list's first deep page still walks to it: about 120 steps to the middle of a million rows, 40 to 200 ms, and
 * more for a list whose filter its index does not hold. Where statements run on the event loop (SQLite), no request
 * may wait that long behind it, so a unit that has walked for `unitMillis` takes no further step: it stops with a
 * pause (`isWalkPause`), the storage gives the event loop a turn and runs the read unit again (SqlStorage), and the
 * new unit seeks to the boundaries the last one left. Each unit takes at least one step, and each is an ordinary
 * read unit, so the rules above keep every boundary exact across the turns in between. A request whose walk pauses
 * `MAX_WALK_PAUSES` times (its boundaries forgotten turn after turn, say) walks the rest in one unit, as without
 * pauses.
 *
 * Where the list's key reads can also run off the event loop (`ListReads.keysOffLoop`: a SQLite file's read worker),
 * a unit that would step instead stops with a far walk (`farWalkOf`): the storage runs its steps there, outside any
 * unit, each step in a snapshot of its own, while the event loop serves other requests, then runs the read unit
 * again, which takes the boundaries the steps reached before it reads. They are exact in that unit's snapshot when
 * nothing changed at or before them meanwhile:
 * - no other writer committed: the unit's data version is the one the walk began in (else all are dropped);
 * - this process changed nothing at or before them: `changed` tells each far walk of the client the least key it
 *   changed. Oldest first, a boundary before that key is exact (its count is the anchor's, exact before the key,
 *   plus the rows between, none changed); newest first, counts are the anchor's minus the rows between, so every
 *   one is dropped if the key is at or before the anchor (from the newest end, whatever the key).
 */
import { Page, Storage } from "@custody-relay/core"
import { Context, Effect } from "effect"
import { fromNearerEnd, type Op } from "./SqlUnit.js"
import * as StorageFailure from "./StorageFailure.js"

/**
 * What a unit learned of other writers, read after its snapshot was taken (see SqlEngine.listChanges).
 * `DataVersion`: SQLite's data version. `Snapshot`: PostgreSQL's snapshot (its next transaction id, those running
 * when it was taken, and its text to tell two apart) and the client's list changes by the transactions `unseenBy`
 * did not see committed, `unseenBy` being the snapshot kept when the unit asked (undefined: none was kept, and no
 * change is read).
 */
export type Sighting =
  | { readonly _tag: "DataVersion"; readonly version: number }
  | {
    readonly _tag: "Snapshot"
    readonly unseenBy: SeenCommits | undefined
    readonly xmax: bigint
    readonly running: ReadonlyArray<bigint>
    readonly snapshot: string
    readonly changes: ReadonlyArray<SortKey>
  }

/**
 * The commits a PostgreSQL snapshot saw: those of every transaction below `xmax` (the next id when it was taken) but
 * the ones `running` then (a finished transaction never runs again).
 */
export interface SeenCommits {
  readonly xmax: bigint
  readonly running: ReadonlySet<bigint>
}

/**
 * How long a client's kept PostgreSQL snapshot may go unused before its boundaries are forgotten: the list-change
 * log is pruned of entries older than `LIST_CHANGES_KEPT_MILLIS`, so a snapshot must be brought up to date well
 * before its changes could be pruned.
 */
export const SNAPSHOT_KEPT_MILLIS = 10 * 60_000
/** How long the list-change log keeps an entry (SqlLayer prunes older ones). */
export const LIST_CHANGES_KEPT_MILLIS = 60 * 60_000

/** The snapshot a client's boundaries are exact in (PostgreSQL). */
interface KeptSnapshot extends SeenCommits {
  readonly snapshot: string
  seenAt: number
  /** The snapshots kept before it, newest first, at most `EARLIER_SNAPSHOTS` (see `EarlierSnapshot`). */
  readonly earlier: ReadonlyArray<EarlierSnapshot>
}

/**
 * A snapshot its client's boundaries were kept in before the kept one, and the least key changed by what the kept
 * one sees and it did not (undefined: nothing changed): every kept boundary before that key has the count it has in
 * this snapshot too. A unit on a snapshot older than the kept one uses those boundaries when its snapshot sees
 * every commit this one saw (see the module's comment).
 */
interface EarlierSnapshot extends SeenCommits {
  readonly changedFrom: SortKey | undefined
}

/**
 * How many snapshots kept before the kept one are remembered per client. Two readers on one node under writes
 * overlap by a unit at a time, so the one that finishes second is mostly a snapshot or two behind (under two writers
 * and two readers, 1.6% of deep pages, which ran again on a newer snapshot before: docs/benchmarks.md).
 */
export const EARLIER_SNAPSHOTS = 4

/**
 * How a unit may use its client's kept boundaries. `Kept`: its snapshot is (or just became) the kept one; it uses
 * them and adds the ones its walk reaches, while `current()` says the kept snapshot is still its own. `Older`: its
 * snapshot misses a commit the kept one saw but sees all an earlier kept one saw; it uses the boundaries before
 * `before` (all when undefined) and adds none.
 */
type Use =
  | { readonly _tag: "Kept"; readonly current: () => boolean }
  | { readonly _tag: "Older"; readonly before: SortKey | undefined }

/**
 * Whether `snapshot` sees every commit `kept` saw. `kept` saw as committed every transaction below its `xmax` that
 * was not running; a finished transaction never runs again, so `snapshot` sees them all unless it counts one of
 * them as running or not yet begun: one in its own running set, or at or above its own `xmax`, that `kept` did not
 * count as running. Exact for two snapshots of one server, whichever was taken first: an older snapshot with no
 * commit between the two sees the same.
 */
export const seesAllOf = (
  snapshot: { readonly xmax: bigint; readonly running: Iterable<bigint> },
  kept: SeenCommits
): boolean => {
  if (snapshot.xmax < kept.xmax) {
    if (kept.xmax - snapshot.xmax > BigInt(kept.running.size)) return false
    for (let xid = snapshot.xmax; xid < kept.xmax; xid++) if (!kept.running.has(xid)) return false
  }
  for (const xid of snapshot.running) if (xid < kept.xmax && !kept.running.has(xid)) return false
  return true
}

/** A row's place in the list order: the list is sorted by (created_at, id). */
export interface SortKey {
  readonly created_at: string
  readonly id: string
}

/** `count` rows of the list sort at or before `key`. */
export interface Boundary {
  readonly count: number
  readonly key: SortKey
}

/** Where a walk starts: a boundary, or an end of the list (no key; count 0 for the oldest, the total for the newest). */
interface Anchor {
  readonly count: number
  readonly key: SortKey | undefined
}

/**
 * The longest walk a page makes from a boundary where statements run off the event loop (PostgreSQL); longer walks
 * leave boundaries this far apart, 1,953 for a million rows. A deep page's own read is the walk from its nearest
 * boundary, which PostgreSQL makes through the rows themselves: at 512 its p99 at a million rows was a quarter to a
 * third lower than at 4,096, alone and under writers (docs/benchmarks.md).
 */
export const STEP_ROWS = 512

/**
 * How many boundaries one read of a walk leaves where statements run off the event loop (PostgreSQL): a read is a
 * round trip, so a first walk makes as many as it did with boundaries 4,096 rows apart, each walking the index
 * alone through as many rows. Where statements run on the event loop one read leaves one (a reader waits behind
 * each read, see STEP_ROWS_ON_EVENT_LOOP).
 */
export const BOUNDARIES_PER_READ = 8

/**
 * The same where statements run on the event loop (SQLite): 0.15 to 0.8 ms a step through the list's index, up to
 * 3.5 ms where the filter reads each row it passes; 488 boundaries for a million rows. A walk cannot pause inside a
 * step, so the step is what a reader waits behind during first walks: readers' p99 there was 12 to 15 ms with 2,048
 * against 18 to 22 ms with 4,096, pages at random as fast (docs/benchmarks.md). On PostgreSQL, where a step is a
 * round trip and no reader waits behind it, 2,048 made a first walk 1.6 times slower.
 */
export const STEP_ROWS_ON_EVENT_LOOP = 2_048

/** Lists whose boundaries are kept; the least recently used list is forgotten beyond it. */
export const MAX_LISTS = 1_024

/**
 * How long a unit walks before it pauses, where statements run on the event loop: a step or two (see
 * STEP_ROWS_ON_EVENT_LOOP), so a reader waits about a step behind a deep page. 1 ms measured a little better than 2
 * (docs/benchmarks.md).
 */
export const UNIT_MILLIS = 1

/** How often one request's walk may pause; after that it walks the rest in one unit (see above). */
export const MAX_WALK_PAUSES = 1_000

/**
 * How many far walks one request may make. Another process that commits all the time voids each (its boundaries
 * are dropped, and the next unit walks far again); after these the request walks on the event loop, pausing.
 */
export const MAX_FAR_WALKS = 3

/**
 * Whether a walk may step off the event loop where its list's reads can; the storage turns it off for a request
 * whose far walk failed (its worker died, say), which then walks on the event loop, pausing (see SqlStorage).
 */
export const WalkMayLeaveLoop = Context.Reference<boolean>("@custody-relay/storage-sql/PageBoundaries/WalkMayLeaveLoop", {
  defaultValue: () => true
})

/**
 * A conflict the storage's loop knows by its mark (`marks`) and handles; like a conflict, one reaching anything but
 * that loop is re-run as a lost race would be (the audit trail's asks are marked so too, TrailCounts).
 */
export const markedConflict = (marks: WeakSet<Storage.StorageError>, message: string): Storage.StorageError => {
  const error = StorageFailure.conflict(new Error(message))
  marks.add(error)
  return error
}

export const isMarked = (marks: WeakSet<Storage.StorageError>, error: unknown): boolean => error instanceof Storage.StorageError && marks.has(error)

/** Whether a walk may pause or step off the event loop; the storage turns it off for a request's last run (see SqlStorage). */
export const WalkMayPause = Context.Reference<boolean>("@custody-relay/storage-sql/PageBoundaries/WalkMayPause", {
  defaultValue: () => true
})

const walkPauses = new WeakSet<Storage.StorageError>()

/** A walk paused: run the read unit again after a turn of the event loop (the audit trail's counts pause so too, TrailCounts). */
export const walkPause = (): Storage.StorageError => markedConflict(walkPauses, "a deep page's walk paused to let other work run")

export const isWalkPause = (error: unknown): boolean => isMarked(walkPauses, error)

const farWalks = new WeakMap<Storage.StorageError, Effect.Effect<void, Storage.StorageError>>()

/**
 * The steps of the far walk a unit stopped with (see above), to run outside any unit before the read unit runs
 * again; undefined for any other error. Like a pause, it is a conflict.
 */
export const farWalkOf = (error: unknown): Effect.Effect<void, Storage.StorageError> | undefined =>
  error instanceof Storage.StorageError ? farWalks.get(error) : undefined

/**
 * The error a read unit stops with to have `offLoop` run outside any unit, off the event loop, before it runs again
 * (see `farWalkOf`); the audit trail's counts leave the loop so too (TrailCounts).
 */
export const farWalk = (message: string, offLoop: Effect.Effect<void, Storage.StorageError>): Storage.StorageError => {
  const error = StorageFailure.conflict(new Error(message))
  farWalks.set(error, offLoop)
  return error
}

/**
 * How many times one request's read unit may run again on a newer snapshot (see the module's comment); its last run
 * reads from the nearer end.
 */
export const MAX_NEWER_SNAPSHOTS = 3

/**
 * Whether a unit that cannot use its client's kept boundaries may ask to run again on a newer snapshot. Off unless
 * the storage will run it again (a read unit; see SqlStorage), so a page read inside any other unit reads from the
 * nearer end.
 */
export const MayAskNewerSnapshot = Context.Reference<boolean>("@custody-relay/storage-sql/PageBoundaries/MayAskNewerSnapshot", {
  defaultValue: () => false
})

const newerSnapshotsWanted = new WeakSet<Storage.StorageError>()

/** A unit asks to run again on a newer snapshot. */
const newerSnapshotWanted = (): Storage.StorageError =>
  markedConflict(newerSnapshotsWanted, "a deep page's unit began on a snapshot older than its client's page boundaries")

export const isNewerSnapshotWanted = (error: unknown): boolean => isMarked(newerSnapshotsWanted, error)

const compareKeys = (a: SortKey, b: SortKey): number =>
  a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0

/**
 * How a list's rows are read around a key: `after` oldest first from just after `key` (from the oldest row when
 * none), `upTo` newest first from `key` itself (from the newest row when none), each skipping `offset` rows.
 */
export interface ListReads<Row extends SortKey> {
  readonly after: (key: SortKey | undefined, limit: number, offset: number) => Op<ReadonlyArray<Row>>
  readonly upTo: (key: SortKey | undefined, limit: number, offset: number) => Op<ReadonlyArray<Row>>
  /**
   * What a step to new boundaries reads: up to `count` sort keys, `every` rows apart. Oldest first the `every`th row
   * after the key, and each `every`th after it; newest first the `every`th row before the key (its own row is the
   * 0th), and each `every`th before that. From the list's end when no key is given. The list's index holds the sort
   * key, so PostgreSQL walks the index alone (an index-only scan) rather than fetching every row it skips.
   */
  readonly keysAfter: (key: SortKey | undefined, every: number, count: number) => Op<ReadonlyArray<SortKey>>
  readonly keysUpTo: (key: SortKey | undefined, every: number, count: number) => Op<ReadonlyArray<SortKey>>
  /** The key reads again, run off the event loop outside the unit, each in a snapshot of its own (see above). */
  readonly keysOffLoop?: Pick<ListReads<Row>, "keysAfter" | "keysUpTo">
}

interface List {
  readonly clientId: string
  /** Sorted by count (and so by key). */
  boundaries: Array<Boundary>
  /** The total the list's last page was read with: what a guess at the next page assumes (see `guess`). */
  lastTotal: number | undefined
}

/**
 * How many rows more than the page a guess reads on either side (see `guess`), so that it still holds the page when
 * the list grew or shrank by up to this many rows since its last page was read.
 */
export const GUESS_MARGIN_ROWS = 8

/**
 * Rows read in a guess at a page (see `guess`), and where they sit in the list. `FromNewest`: newest first from the
 * newest row, skipping `skip` rows (where they are does not depend on the snapshot). `Anchored`: around `anchor`, a
 * boundary (undefined: the oldest end, count 0); `first` is the list position (counted from the oldest, from 0) of
 * the first row read when `oldestFirst`, else one past it, the rows going down from there.
 */
export type GuessedRows<Row> =
  | { readonly _tag: "FromNewest"; readonly skip: number; readonly rows: ReadonlyArray<Row> }
  | {
    readonly _tag: "Anchored"
    readonly anchor: Boundary | undefined
    readonly oldestFirst: boolean
    readonly first: number
    readonly rows: ReadonlyArray<Row>
  }

/**
 * The page out of a guess's rows, or undefined when they do not hold all of it: rows [offset, end) counted from the
 * newest, which are [low, high) counted from the oldest. The caller has checked that the guess's anchor is exact in
 * the unit's snapshot.
 */
const pageFromGuess = <Row>(
  guessed: GuessedRows<Row>,
  offset: number,
  end: number,
  low: number,
  high: number
): ReadonlyArray<Row> | undefined => {
  if (guessed._tag === "FromNewest") {
    const { rows, skip } = guessed
    return skip <= offset && end - skip <= rows.length ? rows.slice(offset - skip, end - skip) : undefined
  }
  const { first, oldestFirst, rows } = guessed
  if (oldestFirst) return pageFromOldest(rows, first, low, high)
  return high <= first && first - low <= rows.length ? rows.slice(first - high, first - low) : undefined
}

/**
 * The page [low, high) (counted from the oldest), newest first, out of rows read oldest first whose first has the rank
 * `first`; undefined when they do not hold all of it.
 */
export const pageFromOldest = <Row>(rows: ReadonlyArray<Row>, first: number, low: number, high: number): ReadonlyArray<Row> | undefined =>
  first <= low && high - first <= rows.length ? rows.slice(low - first, high - first).reverse() : undefined

/** A walk whose steps run off the event loop, from `from` toward a page (see above). */
interface FarWalk {
  readonly listKey: string
  readonly clientId: string
  /** The data version it began in. */
  readonly version: number | undefined
  readonly from: Anchor
  readonly oldestFirst: boolean
  /** The least key this process changed in the client's lists since it began. */
  leastChanged: SortKey | undefined
  /** The boundaries its steps reached, a step apart, once they have run. */
  reached: ReadonlyArray<Boundary> | undefined
}

/** The lesser of two keys; undefined stands for none. */
const leastOf = (a: SortKey | undefined, b: SortKey | undefined): SortKey | undefined =>
  a === undefined ? b : b === undefined || compareKeys(a, b) <= 0 ? a : b

/** Whether a unit that may use the kept boundaries as `use` says may use `boundary`. */
const usable = (use: Use, boundary: Boundary): boolean =>
  use._tag === "Kept" || use.before === undefined || compareKeys(boundary.key, use.before) < 0

/** Where SQLite's data version is the only sighting: the boundaries kept are the unit's (one unit at a time). */
const alwaysKept: Use = { _tag: "Kept", current: () => true }

/**
 * Where the page of `request` (newest first) lies in a list of `total` rows: its rows counted from the newest
 * [offset, end), and from the oldest [low, high); none (`end <= offset`) when it lies past the list's end.
 */
export const pageRanks = (request: Page.PageRequest, total: number) => {
  const offset = Page.offset(request)
  const end = Math.min(offset + request.limit, total)
  return { offset, end, low: total - end, high: total - offset }
}

/**
 * The anchor nearest the page [low, high) among `boundaries` (sorted by count) and the list's ends: the oldest end
 * (no key, count 0), the newest end (no key, count total) or a boundary, and how many rows a read from it skips. A
 * read oldest first from an anchor reaches the page when the anchor is at or before `low`; newest first, when it is
 * at or after `high`.
 */
const nearest = (boundaries: ReadonlyArray<Boundary>, total: number, low: number, high: number) => {
  let best: { from: Boundary | undefined; walk: number; oldestFirst: boolean } = { from: undefined, walk: low, oldestFirst: true }
  if (total - high < best.walk) best = { from: undefined, walk: total - high, oldestFirst: false }
  // The last boundary at or before `low` and the one after it are the candidates.
  let below = -1
  for (let lo = 0, hi = boundaries.length - 1; lo <= hi;) {
    const mid = (lo + hi) >>> 1
    if (boundaries[mid]!.count <= low) {
      below = mid
      lo = mid + 1
    } else {
      hi = mid - 1
    }
  }
  const before = boundaries[below]
  if (before !== undefined && low - before.count < best.walk) best = { from: before, walk: low - before.count, oldestFirst: true }
  // The first boundary at or after `high`: counts between low and high would fall inside the page.
  for (let i = below + 1; i < boundaries.length; i++) {
    const after = boundaries[i]!
    if (after.count < high) continue
    if (after.count - high < best.walk) best = { from: after, walk: after.count - high, oldestFirst: false }
    break
  }
  return best
}

/** The page [low, high), newest first, read from an anchor `nearest` chose, skipping `walk` rows. */
const readFrom = <Row extends SortKey>(
  from: Boundary | undefined,
  oldestFirst: boolean,
  walk: number,
  low: number,
  high: number,
  reads: ListReads<Row>
): Op<ReadonlyArray<Row>> =>
  oldestFirst ? Effect.map(reads.after(from?.key, high - low, walk), (rows) => [...rows].reverse()) : reads.upTo(from?.key, high - low, walk)

export class PageBoundaries {
  readonly #lists = new Map<string, List>()
  #version: number | undefined = undefined
  /** Per client, the snapshot its boundaries are exact in (PostgreSQL only). */
  readonly #snapshots = new Map<string, KeptSnapshot>()
  /** Far walks begun and not yet taken by a unit. */
  readonly #farWalks = new Set<FarWalk>()

  /**
   * `stepRows`: the longest walk from a boundary, and how far apart a walk leaves them (tests use short steps on
   * short lists). `unitMillis`: how long a unit walks before it pauses (never where statements run off the event
   * loop), on `clock`. `boundariesPerRead`: how many boundaries, a step apart, one read of a walk may leave.
   */
  constructor(
    readonly stepRows: number = STEP_ROWS,
    readonly unitMillis: number = Number.POSITIVE_INFINITY,
    readonly clock: () => number = () => performance.now(),
    readonly boundariesPerRead: number = 1
  ) {}

  /** Rows of `clientId` entered, left or moved within a list at `key`: every boundary at or after it may be off. */
  changed(clientId: string, key: SortKey): void {
    for (const list of this.#lists.values()) {
      if (list.clientId === clientId) list.boundaries = list.boundaries.filter((boundary) => compareKeys(boundary.key, key) < 0)
    }
    for (const walk of this.#farWalks) {
      if (walk.clientId === clientId && (walk.leastChanged === undefined || compareKeys(key, walk.leastChanged) < 0)) walk.leastChanged = key
    }
  }

  /**
   * The snapshot `clientId`'s boundaries are kept in, whose unseen changes a unit asks the log for; undefined when
   * none is kept (PostgreSQL; SQLite asks nothing).
   */
  keptSnapshot(clientId: string, now: number = Date.now()): SeenCommits | undefined {
    const kept = this.#snapshots.get(clientId)
    return kept === undefined || now - kept.seenAt > SNAPSHOT_KEPT_MILLIS ? undefined : kept
  }

  /** Boundaries kept in total, for tests and benchmarks. */
  size(): number {
    let size = 0
    for (const list of this.#lists.values()) size += list.boundaries.length
    return size
  }

  /**
   * The page of `request` of a list of `total` rows, read from the nearest boundary or end. `sighting` is what
   * this unit read of other writers, after its snapshot was taken.
   */
  page<Row extends SortKey>(
    listKey: string,
    clientId: string,
    sighting: Sighting,
    total: number,
    request: Page.PageRequest,
    reads: ListReads<Row>,
    now: number = Date.now(),
    guessed?: GuessedRows<Row>
  ): Op<ReadonlyArray<Row>> {
    const use = this.#bringUpToDate(clientId, sighting, now)
    const { end, high, low, offset } = pageRanks(request, total)
    const list = this.#listOf(listKey, clientId)
    list.lastTotal = total
    if (guessed !== undefined) {
      // A boundary the guess read from holds if it is still kept and the unit may use it; the ends of the list
      // hold in any snapshot.
      const exact = guessed._tag === "FromNewest" || guessed.anchor === undefined ||
        (use !== undefined && list.boundaries.includes(guessed.anchor) && usable(use, guessed.anchor))
      const found = exact ? pageFromGuess(guessed, offset, end, low, high) : undefined
      if (found !== undefined) return Effect.succeed(found)
    }
    if (use === undefined) return this.#withoutBoundaries(total, low, high, reads)
    if (use._tag === "Older") {
      const { from, oldestFirst, walk } = nearest(list.boundaries.filter((boundary) => usable(use, boundary)), total, low, high)
      return walk < this.stepRows ? readFrom(from, oldestFirst, walk, low, high, reads) : this.#withoutBoundaries(total, low, high, reads)
    }
    if (sighting._tag === "DataVersion") this.#takeFarWalks()
    return PageBoundaries.#walk(this, list, use.current, listKey, total, low, high, reads)
  }

  /**
   * A read of the page of `request` issued before the unit knows the list's total or what other writers changed, so
   * that it goes in the same round trip as those reads (where each statement is a round trip, PostgreSQL): from the
   * anchor nearest the page as it was when the list's last page was read (`lastTotal`), with `GUESS_MARGIN_ROWS` more
   * on either side. `page` answers from it when its anchor is still exact in the unit's snapshot and its rows hold
   * the page at the total read, and reads the page as it would have otherwise. Undefined where no page of the list
   * was read yet, or the page is a step or more from every anchor (a walk, which needs the total and the snapshot).
   */
  guess<Row extends SortKey>(listKey: string, request: Page.PageRequest, reads: ListReads<Row>): Op<GuessedRows<Row>> | undefined {
    const list = this.#lists.get(listKey)
    const total = list?.lastTotal
    if (list === undefined || total === undefined) return undefined
    const { end, high, low, offset } = pageRanks(request, total)
    if (end <= offset) return undefined
    const { from, walk, oldestFirst } = nearest(list.boundaries, total, low, high)
    if (walk >= this.stepRows) return undefined
    const margin = GUESS_MARGIN_ROWS
    if (from === undefined && !oldestFirst) {
      // From the newest end the page is where the request says, whatever the total.
      return Effect.map(reads.upTo(undefined, request.limit, offset), (rows) => ({ _tag: "FromNewest", skip: offset, rows }))
    }
    const count = from?.count ?? 0
    if (oldestFirst) {
      const first = Math.max(count, low - margin)
      return Effect.map(
        reads.after(from?.key, high + margin - first, first - count),
        (rows) => ({ _tag: "Anchored", anchor: from, oldestFirst, first, rows })
      )
    }
    const first = Math.min(count, high + margin)
    return Effect.map(
      reads.upTo(from?.key, first - Math.max(0, low - margin), count - first),
      (rows) => ({ _tag: "Anchored", anchor: from, oldestFirst, first, rows })
    )
  }

  /** The page [low, high) of a list read from its nearest kept boundary, adding boundaries a step at a time. */
  static readonly #walk = Effect.fnUntraced(function*<Row extends SortKey>(
    self: PageBoundaries,
    list: List,
    current: () => boolean,
    listKey: string,
    total: number,
    low: number,
    high: number,
    reads: ListReads<Row>
  ) {
    // A step that adds no boundary (one already there, so the anchor was not the nearest) would repeat forever:
    // a bound of steps the list can hold, then the walk itself.
    let stepped = Math.ceil(total / self.stepRows) + 1
    const began = self.clock()
    let walked = false
    for (;;) {
      stepped--
      // Another unit may have moved the client's kept snapshot on while this one read (here, and before a
      // boundary is added): the kept boundaries are then exact in a snapshot this unit's may not see.
      if (!current()) return yield* self.#withoutBoundaries(total, low, high, reads)
      const { from, walk, oldestFirst } = nearest(list.boundaries, total, low, high)
      if (walk < self.stepRows || stepped === 0) return yield* readFrom(from, oldestFirst, walk, low, high, reads)
      const anchor: Anchor = { count: from?.count ?? (oldestFirst ? 0 : total), key: from?.key }
      if (reads.keysOffLoop !== undefined && (yield* WalkMayPause) && (yield* WalkMayLeaveLoop)) {
        return yield* Effect.fail(self.#walkFar(list, listKey, anchor, oldestFirst, Math.floor(walk / self.stepRows), reads.keysOffLoop))
      }
      if (walked && self.clock() - began >= self.unitMillis && (yield* WalkMayPause)) return yield* Effect.fail(walkPause())
      walked = true
      // New boundaries toward the page, a step apart, none beyond the last step before it; then look again.
      const next = yield* self.#stepsFrom(anchor, oldestFirst, Math.min(self.boundariesPerRead, Math.floor(walk / self.stepRows)), reads)
      if (next.length === 0) return yield* Effect.die(new Error(`list ${listKey} is shorter than its total ${total}`))
      if (!current()) return yield* self.#withoutBoundaries(total, low, high, reads)
      for (const boundary of next) self.#insert(list, boundary)
    }
  })

  /**
   * Up to `steps` boundaries a step apart from `anchor`, toward the oldest or the newest end, in one read: fewer
   * where the list ends before them. Oldest first the read starts just after the anchor's key, newest first at the
   * key itself.
   */
  #stepsFrom(anchor: Anchor, oldestFirst: boolean, steps: number, reads: Pick<ListReads<SortKey>, "keysAfter" | "keysUpTo">): Op<Array<Boundary>> {
    const stepRows = this.stepRows
    const sign = oldestFirst ? 1 : -1
    return Effect.map(
      oldestFirst ? reads.keysAfter(anchor.key, stepRows, steps) : reads.keysUpTo(anchor.key, stepRows, steps),
      (rows) => rows.map((row, at) => ({ count: anchor.count + sign * stepRows * (at + 1), key: { created_at: row.created_at, id: row.id } }))
    )
  }

  /**
   * Begins a far walk of `steps` steps from `from` toward a page: the error a unit stops with (see `farWalkOf`). Its
   * steps leave boundaries a step apart, as a walk on the event loop does.
   */
  #walkFar(
    list: List,
    listKey: string,
    from: Anchor,
    oldestFirst: boolean,
    steps: number,
    reads: NonNullable<ListReads<SortKey>["keysOffLoop"]>
  ): Storage.StorageError {
    const walk: FarWalk = { listKey, clientId: list.clientId, version: this.#version, from, oldestFirst, leastChanged: undefined, reached: undefined }
    // A walk whose steps never ran (its request ended first) is never taken: the oldest go beyond a bound.
    if (this.#farWalks.size >= MAX_LISTS) this.#farWalks.delete(this.#farWalks.values().next().value as FarWalk)
    this.#farWalks.add(walk)
    const self = this
    const steps$ = Effect.gen(function*() {
      const reached: Array<Boundary> = []
      let anchor = from
      while (reached.length < steps) {
        const wanted = Math.min(self.boundariesPerRead, steps - reached.length)
        const next = yield* self.#stepsFrom(anchor, oldestFirst, wanted, reads)
        reached.push(...next)
        anchor = next.at(-1) ?? anchor
        if (next.length < wanted) break
      }
      walk.reached = reached
    })
    return farWalk("a deep page's walk steps off the event loop", Effect.onError(steps$, () => Effect.sync(() => this.#farWalks.delete(walk))))
  }

  /** The boundaries far walks reached, those still exact in this unit's snapshot (see above). */
  #takeFarWalks(): void {
    for (const walk of this.#farWalks) {
      if (walk.reached === undefined) continue
      this.#farWalks.delete(walk)
      const least = walk.leastChanged
      if (walk.version !== this.#version) continue
      if (!walk.oldestFirst && least !== undefined && (walk.from.key === undefined || compareKeys(least, walk.from.key) <= 0)) continue
      const list = this.#listOf(walk.listKey, walk.clientId)
      for (const boundary of walk.reached) {
        if (walk.oldestFirst && least !== undefined && compareKeys(boundary.key, least) >= 0) break
        this.#insert(list, boundary)
      }
    }
  }

  /**
   * Brings the kept boundaries up to the unit's sighting. Answers how the unit may use them, or undefined when it
   * may not use them at all.
   */
  #bringUpToDate(clientId: string, sighting: Sighting, now: number): Use | undefined {
    if (sighting._tag === "DataVersion") {
      if (sighting.version !== this.#version) {
        this.#lists.clear()
        this.#version = sighting.version
      }
      return alwaysKept
    }
    const found = this.#snapshots.get(clientId)
    const kept = found === undefined || now - found.seenAt > SNAPSHOT_KEPT_MILLIS ? undefined : found
    const taken = (earlier: ReadonlyArray<EarlierSnapshot>): KeptSnapshot => ({
      xmax: sighting.xmax,
      running: new Set(sighting.running),
      snapshot: sighting.snapshot,
      seenAt: now,
      earlier
    })
    let next: KeptSnapshot
    if (kept === undefined) {
      this.#forgetClient(clientId)
      next = taken([])
    } else if (sighting.snapshot === kept.snapshot) {
      kept.seenAt = now
      next = kept
    } else if (sighting.unseenBy !== undefined && seesAllOf(kept, sighting.unseenBy) && seesAllOf(sighting, kept)) {
      // What this snapshot sees and the kept one did not is among the changes read: they are those of every
      // transaction the snapshot kept when the unit asked did not see committed, and the kept one sees all that one
      // saw (another unit may have moved it on since: to a newer one, which does, or to a fresh one after forgetting
      // all, which may not).
      // The kept snapshot and those before it become earlier ones, each with the least key changed since it.
      let least: SortKey | undefined = undefined
      for (const key of sighting.changes) {
        this.changed(clientId, key)
        least = leastOf(least, key)
      }
      next = taken([
        { xmax: kept.xmax, running: kept.running, changedFrom: least },
        ...kept.earlier.slice(0, EARLIER_SNAPSHOTS - 1).map((earlier) => ({ ...earlier, changedFrom: leastOf(earlier.changedFrom, least) }))
      ])
    } else if (!seesAllOf(sighting, kept)) {
      // Taken before the kept one (which saw a commit this one misses), so every commit this one sees, the kept one
      // saw too: what this one sees and an earlier one it sees all of did not is among what the kept one saw and
      // the earlier one did not, so none of it changed a row before the earlier one's `changedFrom`.
      const earlier = kept.earlier.find((earlier) => seesAllOf(sighting, earlier))
      return earlier === undefined ? undefined : { _tag: "Older", before: earlier.changedFrom }
    } else {
      return undefined
    }
    this.#snapshots.delete(clientId)
    if (this.#snapshots.size >= MAX_LISTS) this.#forgetClient(this.#snapshots.keys().next().value as string)
    this.#snapshots.set(clientId, next)
    return { _tag: "Kept", current: () => this.#snapshots.get(clientId) === next }
  }

  #forgetClient(clientId: string): void {
    this.#snapshots.delete(clientId)
    for (const [listKey, list] of this.#lists) if (list.clientId === clientId) this.#lists.delete(listKey)
  }

  /**
   * The page [low, high) for a unit that cannot use its client's kept boundaries (see the module's comment): it asks
   * to run again on a newer snapshot where the page is more than a step from both ends and it may, else reads it
   * from the nearer end.
   */
  #withoutBoundaries<Row extends SortKey>(total: number, low: number, high: number, reads: ListReads<Row>): Op<ReadonlyArray<Row>> {
    if (Math.min(low, total - high) < this.stepRows) return this.#fromNearerEnd(total, low, high, reads)
    return Effect.flatMap(MayAskNewerSnapshot, (may) => may ? Effect.fail(newerSnapshotWanted()) : this.#fromNearerEnd(total, low, high, reads))
  }

  /** The page (rows [low, high) counted from the oldest) read from the nearer end of the list, without boundaries. */
  #fromNearerEnd<Row extends SortKey>(total: number, low: number, high: number, reads: ListReads<Row>): Op<ReadonlyArray<Row>> {
    return fromNearerEnd(
      (limit, offset, fromOldest) => fromOldest ? reads.after(undefined, limit, offset) : reads.upTo(undefined, limit, offset),
      total,
      total - high,
      total - low
    )
  }

  #listOf(listKey: string, clientId: string): List {
    let list = this.#lists.get(listKey)
    if (list !== undefined) {
      // Most recently used last, so the first is the one to forget.
      this.#lists.delete(listKey)
    } else {
      list = { clientId, boundaries: [], lastTotal: undefined }
      if (this.#lists.size >= MAX_LISTS) this.#lists.delete(this.#lists.keys().next().value as string)
    }
    this.#lists.set(listKey, list)
    return list
  }

  #insert(list: List, boundary: Boundary): void {
    const at = list.boundaries.findIndex((kept) => kept.count >= boundary.count)
    if (at === -1) list.boundaries.push(boundary)
    else if (list.boundaries[at]!.count !== boundary.count) list.boundaries.splice(at, 0, boundary)
  }
}
