/**
 * Page boundaries (PageBoundaries) against a model: a client's transactions in memory, read through the same
 * reads the SQL store makes, with short steps so a short list gets boundaries. Whatever happens between pages (new
 * transactions, transactions written with an old key, transactions moving between status groups, another
 * connection's commit, another node's change), every page of the whole list and of a status group is the port's
 * slice (PAGE-1, PAGE-4), told of other writers as SQLite tells it (a data version) and as PostgreSQL does (a
 * snapshot and a log of list changes); with the changes left out the model finds pages that are off. Units on
 * PostgreSQL snapshots older than, or overlapping, the kept one add no boundaries and use only those an earlier kept
 * snapshot they see all of shares with it; where the storage lets them, those whose page is then far from both ends
 * ask to run again on a newer snapshot instead. The tests in
 * SqlStorage.test.ts run the same on a real SQLite file and a real PostgreSQL database.
 */
import { describe, it } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import * as fc from "fast-check"
import { assert } from "vitest"
import {
  farWalkOf,
  isNewerSnapshotWanted,
  isWalkPause,
  type ListReads,
  MayAskNewerSnapshot,
  PageBoundaries,
  type SeenCommits,
  seesAllOf,
  type Sighting,
  SNAPSHOT_KEPT_MILLIS,
  type SortKey,
  WalkMayPause
} from "../src/PageBoundaries.js"

interface Row extends SortKey {
  group: "pending" | "completed"
}

const compare = (a: SortKey, b: SortKey) => a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0

type Step =
  | { readonly kind: "page"; readonly group: "pending" | undefined; readonly page: number; readonly limit: number }
  | { readonly kind: "insert"; readonly at: number | undefined; readonly group: "pending" | "completed" }
  | { readonly kind: "move"; readonly which: number }
  | { readonly kind: "foreign"; readonly at: number }
  | { readonly kind: "foreignMove"; readonly which: number }

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("page" as const), group: fc.constantFrom("pending" as const, undefined), page: fc.integer({ min: 1, max: 40 }), limit: fc.integer({ min: 1, max: 9 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("insert" as const), at: fc.option(fc.integer({ min: 0, max: 400 }), { nil: undefined }), group: fc.constantFrom("pending" as const, "completed" as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("move" as const), which: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("foreign" as const), at: fc.integer({ min: 0, max: 400 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("foreignMove" as const), which: fc.nat() }) }
)

type Engine = "sqlite" | "postgres"

/** How many boundaries one read of a walk may leave (PageBoundaries' `boundariesPerRead`): one, as on SQLite, or several. */
const perRead = fc.integer({ min: 1, max: 4 })

/**
 * A list's reads with the key-only reads made from them (the rows here are their own keys and a group): every
 * `every`th row oldest first from just after the key, newest first from the key's own row (the 0th).
 */
const withKeys = <Row extends SortKey>(reads: Pick<ListReads<Row>, "after" | "upTo">): ListReads<Row> => {
  // Read from the first key's offset on, so that a read's offset is the walk to its first key.
  const everyOf = (rows: ReadonlyArray<Row>, every: number) => rows.filter((_, at) => at % every === 0)
  const spanOf = (every: number, count: number) => every * (count - 1) + 1
  return {
    ...reads,
    keysAfter: (key, every, count) => Effect.map(reads.after(key, spanOf(every, count), every - 1), (rows) => everyOf(rows, every)),
    keysUpTo: (key, every, count) => Effect.map(reads.upTo(key, spanOf(every, count), every), (rows) => everyOf(rows, every))
  }
}

/** Rows with keys from their place `at` and ids in the order made. */
const rowMaker = () => {
  let serial = 0
  return (at: number, group: Row["group"]): Row => ({ created_at: String(at).padStart(6, "0"), id: String(serial++).padStart(6, "0"), group })
}

/** The reads of `list` (sorted oldest first) as the SQL store makes them, each answered through `answer`. */
const readsOver = (list: ReadonlyArray<Row>, answer: <A>(value: () => A) => Effect.Effect<A> = Effect.sync): ListReads<Row> => {
  const oldest = (key: SortKey | undefined) => key === undefined ? 0 : list.filter((row) => compare(row, key) <= 0).length
  return withKeys({
    after: (key, limit, offset) => answer(() => list.slice(oldest(key) + offset, oldest(key) + offset + limit)),
    upTo: (key, limit, offset) =>
      answer(() => {
        const end = key === undefined ? list.length : oldest(key)
        return list.slice(Math.max(0, end - offset - limit), Math.max(0, end - offset)).reverse()
      })
  })
}

/** A PostgreSQL sighting, its snapshot's text written as PostgreSQL writes it: `xmin:xmax:running,...`. */
const snapshotSighting = (
  unseenBy: SeenCommits | undefined,
  xmin: bigint,
  xmax: bigint,
  running: ReadonlyArray<bigint>,
  changes: ReadonlyArray<SortKey>
): Sighting => ({ _tag: "Snapshot", unseenBy, xmax, running, snapshot: `${xmin}:${xmax}:${running.join(",")}`, changes })

/** Whether a change by transaction `xid` is one `by` did not see committed: what PostgresEngine's log query reads. */
const unseen = (by: SeenCommits, xid: bigint) => xid >= by.xmax || by.running.has(xid)

/** The commits a snapshot `xmin:xmax:running` saw. */
const saw = (xmax: number, running: ReadonlyArray<number> = []): SeenCommits => ({ xmax: BigInt(xmax), running: new Set(running.map(BigInt)) })

/** A list of 1,000 rows keyed by their place, and its reads, counting the rows each skips; `during` runs inside the next read, once. */
const numberedList = Array.from({ length: 1_000 }, (_, i) => ({ created_at: String(i).padStart(6, "0"), id: "x" }))
const counting = () => {
  const list = numberedList
  const skipped: Array<number> = []
  let during: (() => void) | undefined
  const reads = withKeys({
    after: (key: SortKey | undefined, limit: number, offset: number) =>
      Effect.sync(() => {
        const next = during
        during = undefined
        next?.()
        const start = key === undefined ? 0 : Number(key.created_at) + 1
        skipped.push(offset)
        return list.slice(start + offset, start + offset + limit)
      }),
    upTo: (key: SortKey | undefined, limit: number, offset: number) =>
      Effect.sync(() => {
        const next = during
        during = undefined
        next?.()
        const end = key === undefined ? list.length : Number(key.created_at) + 1
        skipped.push(offset)
        return list.slice(Math.max(0, end - offset - limit), end - offset).reverse()
      })
  })
  return { skipped, reads, duringNextRead: (run: () => void) => (during = run) }
}

/** A clock that moves a millisecond each time it is read. */
const tickingClock = () => {
  let millis = 0
  return () => millis++
}

/** A unit's page, or the pause its walk made, or the far walk it stopped with: its steps (see PageBoundaries). */
const pageOrPause = <A>(effect: Effect.Effect<A, unknown>): A | "paused" | { readonly far: Effect.Effect<void, unknown> } => {
  const exit = Effect.runSyncExit(effect)
  if (Exit.isSuccess(exit)) return exit.value
  const error = Cause.findErrorOption(exit.cause)
  if (error._tag === "Some" && isWalkPause(error.value)) return "paused"
  const far = error._tag === "Some" ? farWalkOf(error.value) : undefined
  if (far !== undefined) return { far }
  throw Cause.squash(exit.cause)
}

/** A unit's page, or the pause its walk made; no far walks. */
const pageOrPauseHere = <A>(effect: Effect.Effect<A, unknown>): A | "paused" => {
  const answer = pageOrPause(effect)
  if (typeof answer === "object" && answer !== null && "far" in answer) throw new Error("a far walk without off-loop reads")
  return answer
}

/**
 * Runs the steps; `tellChanges: false` leaves out what keeps boundaries exact (this process's own `changed` calls,
 * and the data version or the log entries of other writers). On "postgres" every page's unit has a snapshot that
 * sees every commit (the concurrent cases are the tests below), and another node's writes reach the log.
 * `unitMillis`: units walk that long on a clock that moves a millisecond each time it is read, so a unit takes
 * about that many steps; a page whose walk pauses is asked again, as a new unit, after each later step (so the
 * steps' writes fall between its units), and after the last until it is answered; it must be the slice of the list
 * as it is when answered. `far`: the list's key reads also run off the loop, on the list as it is when each runs,
 * and before each of those reads the next step, if it is a write, is made: a far walk's steps are written to
 * between them.
 */
const run = (
  initial: number,
  stepRows: number,
  steps: ReadonlyArray<Step>,
  tellChanges = true,
  engine: Engine = "sqlite",
  unitMillis?: number,
  far = false,
  guess = false,
  perRead = 1
): string | undefined => {
  const made = rowMaker()
  const rows: Array<Row> = Array.from({ length: initial }, (_, i) => made(i, i % 3 === 0 ? "pending" : "completed"))
  const boundaries = new PageBoundaries(stepRows, unitMillis, tickingClock(), perRead)
  let version = 0
  // PostgreSQL: transaction ids, and the log of other nodes' list changes.
  let nextXid = 3n
  const log: Array<{ readonly xid: bigint; readonly key: SortKey }> = []
  const foreignChange = (row: Row) => {
    if (!tellChanges) return
    if (engine === "sqlite") version++
    else log.push({ xid: nextXid++, key: row })
  }
  const sighting = (): Sighting => {
    if (engine === "sqlite") return { _tag: "DataVersion", version }
    const unseenBy = boundaries.keptSnapshot("client", 0)
    return snapshotSighting(unseenBy, nextXid, nextXid, [], unseenBy === undefined ? [] : log.filter((entry) => unseen(unseenBy, entry.xid)).map((entry) => entry.key))
  }
  type PageStep = Extract<Step, { kind: "page" }>
  let next = 0
  /** Makes the step if it is a write; false for a page. */
  const write = (s: Step): boolean => {
    if (s.kind === "insert") {
      const row = made(s.at ?? 1_000 + rows.length, s.group)
      rows.push(row)
      if (tellChanges) boundaries.changed("client", row)
    } else if (s.kind === "move") {
      if (rows.length === 0) return true
      const row = rows[s.which % rows.length]!
      row.group = row.group === "pending" ? "completed" : "pending"
      if (tellChanges) boundaries.changed("client", row)
    } else if (s.kind === "foreign") {
      const row = made(s.at, "pending")
      rows.push(row)
      foreignChange(row)
    } else if (s.kind === "foreignMove") {
      if (rows.length === 0) return true
      const row = rows[s.which % rows.length]!
      row.group = row.group === "pending" ? "completed" : "pending"
      foreignChange(row)
    } else {
      return false
    }
    return true
  }
  const listOf = (group: PageStep["group"]) => rows.filter((row) => group === undefined || row.group === group).sort(compare)
  /** One unit of a page: undefined once answered as expected, "paused", or what was found instead. */
  const askPage = (s: PageStep): string | "paused" | undefined => {
    const list = listOf(s.group)
    const start = (s.page - 1) * s.limit
    const expected = [...list].reverse().slice(start, start + s.limit).map((row) => row.id)
    if (start === 0 || start >= list.length) return undefined
    const offLoop = readsOver(list, <A>(value: () => A) =>
      Effect.sync(() => {
        const step = steps[next]
        if (step !== undefined && write(step)) next++
        const now = listOf(s.group)
        list.splice(0, list.length, ...now)
        return value()
      }))
    const reads: ListReads<Row> = far ? { ...readsOver(list), keysOffLoop: offLoop } : readsOver(list)
    const request = { page: s.page, limit: s.limit }
    // Made before the unit's sighting, as the store makes it; its rows read in the unit's snapshot.
    const guessed = guess ? boundaries.guess(`client|${s.group}`, request, reads) : undefined
    const found = pageOrPause(boundaries.page(`client|${s.group}`, "client", sighting(), list.length, request, reads, 0, guessed && Effect.runSync(guessed)))
    if (found === "paused") return found
    if ("far" in found) {
      Effect.runSync(found.far)
      return "paused"
    }
    const ids = found.map((row) => row.id)
    return JSON.stringify(ids) === JSON.stringify(expected) ? undefined : JSON.stringify({ step: s, found: ids, expected })
  }
  let paused: Array<PageStep> = []
  const askPaused = (): string | undefined => {
    const asked = paused
    paused = []
    for (const page of asked) {
      const answer = askPage(page)
      if (answer === "paused") paused.push(page)
      else if (answer !== undefined) return answer
    }
    return undefined
  }
  while (next < steps.length) {
    const failed = askPaused()
    if (failed !== undefined) return failed
    const s = steps[next++]
    if (s === undefined) break
    if (s.kind === "page") {
      const answer = askPage(s)
      if (answer === "paused") paused.push(s)
      else if (answer !== undefined) return answer
    } else {
      write(s)
    }
  }
  // With nothing written between them, each unit walks on from the boundaries the last one left.
  for (let round = 0; paused.length > 0; round++) {
    if (round > initial + steps.length) return `pages paused without end: ${JSON.stringify(paused)}`
    const failed = askPaused()
    if (failed !== undefined) return failed
  }
  return undefined
}

const steps = fc.array(step, { minLength: 1, maxLength: 60 })

describe("PageBoundaries (PAGE-1, PAGE-4)", () => {
  for (const engine of ["sqlite", "postgres"] as const) {
    it(`every page is the port's slice, whatever was written between pages (${engine})`, () => {
      fc.assert(
        fc.property(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 1, max: 12 }), perRead, steps, (initial, stepRows, boundariesPerRead, list) => {
          assert.strictEqual(run(initial, stepRows, list, true, engine, undefined, false, false, boundariesPerRead), undefined)
        }),
        { numRuns: 500 }
      )
    })
  }

  for (const engine of ["sqlite", "postgres"] as const) {
    it(`a walk that pauses every few steps, written to between its units, still answers the port's slice (${engine})`, () => {
      fc.assert(
        fc.property(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 0, max: 3 }), perRead, steps, (initial, stepRows, unitMillis, boundariesPerRead, list) => {
          assert.strictEqual(run(initial, stepRows, list, true, engine, unitMillis, false, false, boundariesPerRead), undefined)
        }),
        { numRuns: 500 }
      )
    })
  }

  for (const engine of ["sqlite", "postgres"] as const) {
    it(`a page guessed at before the unit's total and sighting, from the anchor nearest it at the list's last total, is the port's slice, whatever was written between pages (${engine})`, () => {
      fc.assert(
        fc.property(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 1, max: 12 }), perRead, steps, (initial, stepRows, boundariesPerRead, list) => {
          assert.strictEqual(run(initial, stepRows, list, true, engine, undefined, false, true, boundariesPerRead), undefined)
        }),
        { numRuns: 1_000 }
      )
    })
  }

  it("a walk whose steps run off the event loop, each in a snapshot of its own, written to here and by other writers between them, still answers the port's slice (sqlite)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 1, max: 12 }), perRead, steps, (initial, stepRows, boundariesPerRead, list) => {
        assert.strictEqual(run(initial, stepRows, list, true, "sqlite", undefined, true, false, boundariesPerRead), undefined)
      }),
      { numRuns: 1_000 }
    )
  })

  it("a walk leaves several boundaries a step apart in one read where it may, and none past the last step before its page", () => {
    // The middle of 1,000 rows is 48 steps of 10 from the nearer (newest) end: reads of 5 boundaries, the last of 3.
    const boundaries = new PageBoundaries(10, undefined, undefined, 5)
    const { skipped, reads } = counting()
    const sighting: Sighting = { _tag: "DataVersion", version: 0 }
    const found = Effect.runSync(boundaries.page("l", "client", sighting, 1_000, { page: 25, limit: 20 }, reads))
    assert.deepStrictEqual(found.map((row) => row.created_at), numberedList.slice(500, 520).reverse().map((row) => row.created_at))
    // Ten reads of keys (each first walks a step) and the page's own read, at the boundary 480 rows from the newest.
    assert.deepStrictEqual(skipped, [...Array.from({ length: 10 }, () => 10), 0])
    assert.strictEqual(boundaries.size(), 48)
    // A page on the way reads from a boundary just left, walking nothing.
    skipped.length = 0
    const next = Effect.runSync(boundaries.page("l", "client", sighting, 1_000, { page: 24, limit: 20 }, reads))
    assert.deepStrictEqual(next.map((row) => row.created_at), numberedList.slice(520, 540).reverse().map((row) => row.created_at))
    assert.deepStrictEqual(skipped, [0])
  })

  it("a unit that has walked for unitMillis pauses; the next unit starts from the boundaries it left; none pauses where the storage says it may not", () => {
    // Each step reads the clock once: 4 milliseconds are 4 steps.
    const boundaries = new PageBoundaries(10, 4, tickingClock())
    const list = numberedList
    const { skipped, reads } = counting()
    const sighting: Sighting = { _tag: "DataVersion", version: 0 }
    // The middle of 1,000 rows, 48 steps of 10 from the nearer end: 12 units of 4 steps, the last reading the page.
    const units: Array<ReadonlyArray<number>> = []
    let answer: ReadonlyArray<SortKey> | "paused" = "paused"
    while (answer === "paused" && units.length < 100) {
      skipped.length = 0
      answer = pageOrPauseHere(boundaries.page("l", "client", sighting, 1_000, { page: 25, limit: 20 }, reads))
      units.push([...skipped])
    }
    assert.notStrictEqual(answer, "paused")
    assert.deepStrictEqual((answer as ReadonlyArray<SortKey>).map((row) => row.created_at), list.slice(500, 520).reverse().map((row) => row.created_at))
    assert.strictEqual(units.length, 12)
    for (const unit of units.slice(0, -1)) assert.deepStrictEqual(unit, [10, 10, 10, 10])
    assert.deepStrictEqual(units.at(-1), [10, 10, 10, 10, 0])
    assert.strictEqual(boundaries.size(), 48)
    // A new data version forgets them; told it may not pause, the unit walks all the way at once.
    skipped.length = 0
    const whole = Effect.runSync(Effect.provideService(
      boundaries.page("l", "client", { _tag: "DataVersion", version: 1 }, 1_000, { page: 25, limit: 20 }, reads),
      WalkMayPause,
      false
    ))
    assert.strictEqual(whole.length, 20)
    assert.strictEqual(skipped.length, 49)
  })

  it("without being told of changes, boundaries go stale: the model can tell", () => {
    // An old transaction written after the boundaries were made moves every later row by one.
    const stale = run(200, 4, [
      { kind: "page", group: undefined, page: 10, limit: 10 },
      { kind: "insert", at: 5, group: "completed" },
      { kind: "page", group: undefined, page: 10, limit: 10 }
    ], false)
    assert.isDefined(stale)
    const foreign = run(200, 4, [
      { kind: "page", group: undefined, page: 10, limit: 10 },
      { kind: "foreign", at: 5 },
      { kind: "page", group: undefined, page: 10, limit: 10 }
    ], false)
    assert.isDefined(foreign)
    // Another node's old transaction, and another node's status change, on PostgreSQL without the log.
    for (const change of [{ kind: "foreign", at: 5 }, { kind: "foreignMove", which: 3 }] as const) {
      const steps: ReadonlyArray<Step> = [
        { kind: "page", group: "pending", page: 5, limit: 10 },
        change,
        { kind: "page", group: "pending", page: 5, limit: 10 }
      ]
      assert.isDefined(run(200, 4, steps, false, "postgres"), change.kind)
      assert.isUndefined(run(200, 4, steps, true, "postgres"), change.kind)
    }
  })

  it("a walk longer than a step leaves boundaries a step apart, and the next page of the list walks less than a step", () => {
    const boundaries = new PageBoundaries(10)
    const list = numberedList
    const { skipped, reads } = counting()
    Effect.runSync(boundaries.page("l", "client", { _tag: "DataVersion", version: 0 }, 1_000, { page: 25, limit: 20 }, reads))
    assert.strictEqual(boundaries.size(), 48)
    skipped.length = 0
    // Rows 650 to 656 counted from the oldest: 3 from the boundary at 660.
    const page = Effect.runSync(boundaries.page("l", "client", { _tag: "DataVersion", version: 0 }, 1_000, { page: 50, limit: 7 }, reads))
    assert.deepStrictEqual(page.map((row) => row.created_at), list.slice(650, 657).reverse().map((row) => row.created_at))
    assert.deepStrictEqual(skipped.length, 1)
    assert.isBelow(skipped[0]!, 10)
    // Another connection's commit (a new data version) forgets them all.
    Effect.runSync(boundaries.page("l", "client", { _tag: "DataVersion", version: 1 }, 1_000, { page: 2, limit: 5 }, reads))
    assert.strictEqual(boundaries.size(), 0)
  })

  it("seesAllOf is exact: against every transaction of a history, one snapshot sees all the other saw finished", () => {
    // A history of transactions beginning (the next id) and ending (any running one), and two snapshots taken in it.
    const history = fc.array(fc.oneof(fc.constant("begin" as const), fc.nat({ max: 20 })), { maxLength: 40 })
    fc.assert(
      fc.property(history, fc.nat(), fc.nat(), (events, first, second) => {
        let next = 1n
        const running: Array<bigint> = []
        const snapshots: Array<{ readonly xmax: bigint; readonly running: ReadonlyArray<bigint> }> = []
        const take = () => snapshots.push({ xmax: next, running: [...running] })
        take()
        for (const event of events) {
          if (event === "begin") running.push(next++)
          else if (running.length > 0) running.splice(event % running.length, 1)
          take()
        }
        const a = snapshots[first % snapshots.length]!
        const b = snapshots[second % snapshots.length]!
        const finished = (snapshot: typeof a, xid: bigint) => xid < snapshot.xmax && !snapshot.running.includes(xid)
        let exact = true
        for (let xid = 1n; xid < next; xid++) if (finished(b, xid) && !finished(a, xid)) exact = false
        const kept = { xmin: 0n, xmax: b.xmax, running: new Set(b.running), snapshot: "", seenAt: 0 }
        assert.strictEqual(seesAllOf(a, kept), exact, JSON.stringify({ a, b }, (_, value) => typeof value === "bigint" ? Number(value) : value))
      }),
      { numRuns: 2_000 }
    )
  })

  it("units on concurrent PostgreSQL snapshots, other nodes writing between and during them: every page is its own snapshot's slice", async () => {
    // Other nodes' write transactions begin (taking the next id), commit in any order, and each changes one row:
    // an insert anywhere in the order, or a move to a status group, logged with its id. Units of this node start
    // at any point (asking for the changes the kept snapshot did not see, taking their snapshot), and every read they
    // make waits until the schedule lets it through, so units overlap each other and the commits.
    type Change = { readonly kind: "insert"; readonly at: number; readonly group: Row["group"] } | { readonly kind: "move"; readonly which: number; readonly group: Row["group"] }
    type Event =
      | { readonly kind: "begin"; readonly change: Change }
      | { readonly kind: "commit"; readonly which: number }
      | { readonly kind: "unit"; readonly group: "pending" | undefined; readonly position: number; readonly limit: number }
      | { readonly kind: "release"; readonly count: number }
    const group = fc.constantFrom("pending" as const, "completed" as const)
    const event: fc.Arbitrary<Event> = fc.oneof(
      { weight: 2, arbitrary: fc.record({ kind: fc.constant("begin" as const), change: fc.oneof(fc.record({ kind: fc.constant("insert" as const), at: fc.integer({ min: 0, max: 200 }), group }), fc.record({ kind: fc.constant("move" as const), which: fc.nat(), group })) }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant("commit" as const), which: fc.nat() }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant("unit" as const), group: fc.constantFrom("pending" as const, undefined), position: fc.nat(), limit: fc.integer({ min: 1, max: 9 }) }) },
      { weight: 3, arbitrary: fc.record({ kind: fc.constant("release" as const), count: fc.integer({ min: 1, max: 4 }) }) }
    )
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 40, max: 200 }), fc.integer({ min: 1, max: 6 }), perRead, fc.array(event, { minLength: 10, maxLength: 60, size: "max" }), fc.nat(), async (initial, stepRows, boundariesPerRead, events, seed) => {
        const made = rowMaker()
        const initialRows = Array.from({ length: initial }, (_, i) => made(i, i % 3 === 0 ? "pending" : "completed"))
        type Writer = { readonly xid: bigint; readonly change: Change; readonly row: Row }
        const running: Array<Writer> = []
        const commits: Array<Writer> = []
        let nextXid = 2n
        /** The rows a snapshot sees: the initial ones with the first `prefix` commits applied, in commit order. */
        const rowsAt = (prefix: number): Array<Row> => {
          const rows = new Map(initialRows.map((row) => [row.id, { ...row }]))
          for (const writer of commits.slice(0, prefix)) {
            if (writer.change.kind === "insert") rows.set(writer.row.id, { ...writer.row })
            else { const row = rows.get(writer.row.id); if (row !== undefined) row.group = writer.change.group }
          }
          return [...rows.values()]
        }
        const boundaries = new PageBoundaries(stepRows, undefined, undefined, boundariesPerRead)
        let random = seed
        const pick = (n: number) => (random = (random * 1103515245 + 12345) % 2147483648) % n
        const gates: Array<() => void> = []
        const gate = () => new Promise<void>((resolve) => gates.push(resolve))
        const flush = () => new Promise<void>((resolve) => setImmediate(resolve))
        const failures: Array<string> = []
        const units: Array<Promise<void>> = []
        const unit = async (s: Extract<Event, { kind: "unit" }>) => {
          const unseenBy = boundaries.keptSnapshot("client", 0)
          const prefix = commits.length
          const runningIds = running.map((writer) => writer.xid)
          const xmax = nextXid
          const xmin = runningIds.length === 0 ? xmax : runningIds.reduce((a, b) => (a < b ? a : b))
          const seen = new Set(commits.slice(0, prefix).map((writer) => writer.xid))
          const list = rowsAt(prefix).filter((row) => s.group === undefined || row.group === s.group).sort(compare)
          // A page past the first (the first reads no boundary), anywhere in the list.
          const pages = Math.ceil(list.length / s.limit)
          if (pages < 2) return
          const page = 2 + (s.position % (pages - 1))
          const start = (page - 1) * s.limit
          const expected = [...list].reverse().slice(start, start + s.limit).map((row) => row.id)
          const waited = <A>(value: () => A) => Effect.promise(async () => { await gate(); return value() })
          // Every other unit guesses at its page as the store does, from the boundaries kept when it asks, before its
          // snapshot's changes are known; its rows are read in the unit's snapshot, whenever the schedule lets them.
          const guess = s.position % 2 === 0 ? boundaries.guess(`client|${s.group}`, { page, limit: s.limit }, readsOver(list, waited)) : undefined
          await gate()
          const guessed = guess === undefined ? undefined : await Effect.runPromise(guess)
          const changes = unseenBy === undefined ? [] : commits.slice(0, prefix).filter((writer) => seen.has(writer.xid) && unseen(unseenBy, writer.xid)).map((writer) => writer.row)
          const sighting = snapshotSighting(unseenBy, xmin, xmax, runningIds, changes)
          const found = await Effect.runPromise(boundaries.page(`client|${s.group}`, "client", sighting, list.length, { page, limit: s.limit }, readsOver(list, waited), 0, guessed))
          const ids = found.map((row) => row.id)
          if (JSON.stringify(ids) !== JSON.stringify(expected)) failures.push(JSON.stringify({ unit: s, page, ids, expected }))
        }
        const release = async (count: number) => {
          for (let i = 0; i < count && gates.length > 0; i++) gates.splice(pick(gates.length), 1)[0]!()
          await flush()
        }
        for (const e of events) {
          if (e.kind === "begin") {
            const rows = rowsAt(commits.length)
            const row = e.change.kind === "insert" ? made(e.change.at, e.change.group) : rows[e.change.which % rows.length]!
            running.push({ xid: nextXid++, change: e.change, row })
          } else if (e.kind === "commit" && running.length > 0) {
            commits.push(running.splice(e.which % running.length, 1)[0]!)
          } else if (e.kind === "unit") {
            units.push(unit(e))
          } else if (e.kind === "release") {
            await release(e.count)
          }
          await flush()
        }
        let done = false
        void Promise.all(units).then(() => (done = true))
        while (!done) await release(gates.length + 1)
        assert.deepStrictEqual(failures, [])
      }),
      { numRuns: 10_000 }
    )
  }, 120_000)

  describe("PostgreSQL snapshots: a unit uses boundaries only when its snapshot sees all the kept one saw", () => {
    const list = numberedList
    /** A snapshot as PostgreSQL writes it, `xmin:xmax:running`; by default its oldest running transaction runs. */
    const snapshot = (
      unseenBy: SeenCommits | undefined,
      xmin: number,
      xmax: number,
      changes: ReadonlyArray<SortKey> = [],
      running: ReadonlyArray<number> = xmin < xmax ? [xmin] : []
    ): Sighting => snapshotSighting(unseenBy, BigInt(xmin), BigInt(xmax), running.map(BigInt), changes)
    /** The snapshot every test here keeps first, 10:12:10 (transaction 11 committed, 10 running). */
    const K1 = saw(12, [10])
    const keptXmax = (boundaries: PageBoundaries, now = 0) => boundaries.keptSnapshot("client", now)?.xmax
    const middle = { page: 25, limit: 20 }
    const expectedMiddle = list.slice(500, 520).reverse().map((row) => row.created_at)
    const pageOf = (boundaries: PageBoundaries, sighting: Sighting, reads: ReturnType<typeof counting>["reads"], now = 0) =>
      Effect.runSync(boundaries.page("l", "client", sighting, 1_000, middle, reads, now)).map((row) => row.created_at)

    it("the first unit keeps its snapshot; one on the same snapshot or a newer one uses the boundaries", () => {
      const boundaries = new PageBoundaries(10)
      const { skipped, reads } = counting()
      assert.isUndefined(keptXmax(boundaries))
      assert.deepStrictEqual(pageOf(boundaries, snapshot(undefined, 10, 12), reads), expectedMiddle)
      assert.strictEqual(keptXmax(boundaries), 12n)
      assert.isAbove(boundaries.size(), 0)
      // The same; one taken after the kept one's running transaction ended; one in which it still runs, with a
      // newer one (each sees every commit the kept one saw); and one whose changes were read as unseen by an earlier
      // kept snapshot (another unit moved the kept one on meanwhile).
      for (const sighting of [snapshot(K1, 10, 12), snapshot(K1, 12, 12), snapshot(saw(12), 15, 16), snapshot(saw(16, [15]), 15, 18, [], [15, 17]), snapshot(saw(12), 19, 19)]) {
        skipped.length = 0
        assert.deepStrictEqual(pageOf(boundaries, sighting, reads), expectedMiddle)
        assert.deepStrictEqual(skipped, [0], "a seek to a boundary and no walk")
      }
      // Unused for longer than SNAPSHOT_KEPT_MILLIS (the log may have been pruned since): nothing kept.
      assert.isUndefined(keptXmax(boundaries, SNAPSHOT_KEPT_MILLIS + 1))
    })

    it("a newer snapshot forgets the boundaries at or after each change it read, and only those", () => {
      const boundaries = new PageBoundaries(10)
      const { reads } = counting()
      pageOf(boundaries, snapshot(undefined, 10, 12), reads)
      const kept = boundaries.size()
      pageOf(boundaries, snapshot(K1, 12, 13, [list[900]!]), reads)
      assert.isBelow(boundaries.size(), kept)
      assert.isAbove(boundaries.size(), 0)
    })

    it("a unit on an older snapshot (one that misses a commit the kept one saw) with no earlier kept snapshot it sees all of, or one that asked before the kept snapshot moved, neither uses nor adds boundaries", () => {
      const boundaries = new PageBoundaries(10)
      const { skipped, reads } = counting()
      pageOf(boundaries, snapshot(undefined, 10, 12), reads)
      const kept = boundaries.size()
      // Kept: 10:12:10, so transaction 11 had committed. Older: taken before 11 began (xmax 10), or while 11 ran
      // (running 11); and two whose changes may miss some (read as unseen by a snapshot that saw transaction 10
      // committed, which the kept one did not, or none read): each reads the page from the nearer end, walking 480 rows.
      for (const sighting of [snapshot(K1, 8, 10), snapshot(K1, 11, 13), snapshot(saw(14), 14, 15), snapshot(undefined, 14, 15)]) {
        skipped.length = 0
        assert.deepStrictEqual(pageOf(boundaries, sighting, reads), expectedMiddle)
        assert.deepStrictEqual(skipped, [480], sighting._tag === "Snapshot" ? sighting.snapshot : "")
        assert.strictEqual(boundaries.size(), kept)
        assert.strictEqual(keptXmax(boundaries), 12n)
      }
    })

    it("a unit whose changes were read as unseen by a snapshot the kept one does not see all of (kept since, fresh, after the one it asked with went unused too long) neither uses nor adds boundaries", () => {
      const boundaries = new PageBoundaries(10)
      // K1 (10:12:10) saw transaction 11 commit, which inserted the list's oldest row.
      pageOf(boundaries, snapshot(undefined, 10, 12), counting().reads)
      const asked = boundaries.keptSnapshot("client", 0)
      // K1 goes unused for longer than SNAPSHOT_KEPT_MILLIS; then a unit on a snapshot taken while 11 ran (10:12:10,11,
      // its list without 11's row) keeps its own, fresh, and walks to the middle page.
      const later = SNAPSHOT_KEPT_MILLIS + 1
      const before11 = numberedList.slice(1).map((row) => ({ ...row, group: "pending" as const }))
      const fresh = Effect.runSync(boundaries.page("l", "client", snapshot(undefined, 10, 12, [], [10, 11]), before11.length, middle, readsOver(before11), later))
      assert.deepStrictEqual(fresh.map((row) => row.created_at), before11.slice(499, 519).reverse().map((row) => row.created_at))
      const kept = boundaries.size()
      // A unit that asked while K1 was kept, on a newer snapshot (13:13:): its changes are those of 10 and 12 (none
      // here), not 11's, which the fresh kept snapshot did not see. Its boundaries count one row too few here.
      const { skipped, reads } = counting()
      assert.deepStrictEqual(pageOf(boundaries, snapshot(asked, 13, 13), reads, later), expectedMiddle)
      assert.deepStrictEqual(skipped, [480])
      assert.strictEqual(boundaries.size(), kept)
    })

    it("a guess read from a kept boundary is not used by a unit on an older snapshot, in which the boundary's count is off", () => {
      const boundaries = new PageBoundaries(10)
      pageOf(boundaries, snapshot(undefined, 10, 12), counting().reads)
      // The older snapshot misses transaction 11, which inserted the list's oldest row: every count there is one less.
      const older = numberedList.slice(1).map((row) => ({ ...row, group: "pending" as const }))
      const reads = readsOver(older)
      const guess = boundaries.guess("l", middle, reads)
      assert.isDefined(guess)
      const guessed = Effect.runSync(guess!)
      assert.strictEqual(guessed._tag, "Anchored")
      const found = Effect.runSync(boundaries.page("l", "client", snapshot(K1, 8, 10), older.length, middle, reads, 0, guessed))
      assert.deepStrictEqual(found.map((row) => row.created_at), older.slice(499, 519).reverse().map((row) => row.created_at))
    })

    it("a unit on a snapshot older than the kept one uses the boundaries an earlier kept snapshot it sees all of shares with the kept one (those before the least key changed between them), and adds none", () => {
      const boundaries = new PageBoundaries(10)
      // K1 = 10:12:10 (transaction 11 committed, 10 running) reads the middle page: boundaries 10 rows apart from the
      // newest end down to it.
      pageOf(boundaries, snapshot(undefined, 10, 12), counting().reads)
      // Transaction 12 inserts a row between the 900th and the 901st and commits; K2 = 13:14:13 sees it, reads the
      // change (forgetting K1's boundaries after the new row), and walks from the newest end to page 3, leaving
      // boundaries there again, exact in K2.
      const inserted: Row = { created_at: "000899", id: "y", group: "pending" }
      const base: Array<Row> = numberedList.map((row) => ({ ...row, group: "pending" }))
      const newer = [...base.slice(0, 900), inserted, ...base.slice(900)]
      const page3 = { page: 3, limit: 20 }
      const found = Effect.runSync(boundaries.page("l", "client", snapshot(K1, 13, 14, [inserted]), newer.length, page3, readsOver(newer), 0))
      assert.deepStrictEqual(found, newer.slice(941, 961).reverse())
      assert.strictEqual(keptXmax(boundaries), 14n)
      const kept = boundaries.size()
      // A unit taken while 10 and 12 ran (10:13:10,12), which asked while K1 was kept: it misses 12, which K2 saw,
      // and sees all K1 saw. Its list is the one without the new row.
      const older = snapshot(K1, 10, 13, [], [10, 12])
      const { skipped, reads } = counting()
      // The middle page, before the new row: from K1's boundary at 500, a seek and no walk.
      assert.deepStrictEqual(pageOf(boundaries, older, reads), expectedMiddle)
      assert.deepStrictEqual(skipped, [0])
      // Page 3, after it: K2's boundaries there count the new row, so it reads from the nearer end (40 rows), or
      // asks for a newer snapshot where the storage lets it.
      skipped.length = 0
      const olderPage3 = Effect.runSync(boundaries.page("l", "client", older, base.length, page3, reads, 0))
      assert.deepStrictEqual(olderPage3.map((row) => row.created_at), base.slice(940, 960).reverse().map((row) => row.created_at))
      assert.deepStrictEqual(skipped, [40])
      // Nor does it take a page guessed at from one of them, read in its snapshot.
      const guess = boundaries.guess("l", page3, reads)
      assert.isDefined(guess)
      const guessed = Effect.runSync(guess!)
      assert.isTrue(guessed._tag === "Anchored" && guessed.anchor !== undefined && guessed.anchor.key.created_at > inserted.created_at)
      const fromGuess = Effect.runSync(boundaries.page("l", "client", older, base.length, page3, reads, 0, guessed))
      assert.deepStrictEqual(fromGuess.map((row) => row.created_at), base.slice(940, 960).reverse().map((row) => row.created_at))
      const asked = Effect.runSyncExit(Effect.provideService(boundaries.page("l", "client", older, base.length, page3, reads, 0), MayAskNewerSnapshot, true))
      const error = Exit.isFailure(asked) ? Cause.findErrorOption(asked.cause) : undefined
      assert.isTrue(error?._tag === "Some" && isNewerSnapshotWanted(error.value))
      // It added no boundary, and the kept snapshot is still K2.
      assert.strictEqual(boundaries.size(), kept)
      assert.strictEqual(keptXmax(boundaries), 14n)
      // A unit that misses a commit K1 saw too (taken before 11 ended: 10:12:10,11) uses none.
      skipped.length = 0
      assert.deepStrictEqual(pageOf(boundaries, snapshot(K1, 10, 12, [], [10, 11]), reads), expectedMiddle)
      assert.deepStrictEqual(skipped, [480])
      // A unit newer than K2 that read no changes (it asked while nothing was kept) sees commits after K2 it knows
      // nothing of: it uses none either.
      skipped.length = 0
      assert.deepStrictEqual(pageOf(boundaries, snapshot(undefined, 20, 21), reads), expectedMiddle)
      assert.deepStrictEqual(skipped, [480])
      assert.strictEqual(keptXmax(boundaries), 14n)
    })

    it("a unit that cannot use the boundaries asks to run again on a newer snapshot where the storage lets it and its page is more than a step from both ends; else it reads from the nearer end (PAGE-4)", () => {
      const boundaries = new PageBoundaries(10)
      const { skipped, reads } = counting()
      pageOf(boundaries, snapshot(undefined, 10, 12), reads)
      const kept = boundaries.size()
      /** The unit's page where it may ask for a newer snapshot, or "newer" where it asked. */
      const asking = (sighting: Sighting, request: { readonly page: number; readonly limit: number }, withReads = reads) => {
        const exit = Effect.runSyncExit(
          Effect.provideService(boundaries.page("l", "client", sighting, 1_000, request, withReads, 0), MayAskNewerSnapshot, true)
        )
        if (Exit.isSuccess(exit)) return exit.value.map((row) => row.created_at)
        const error = Cause.findErrorOption(exit.cause)
        if (error._tag === "Some" && isNewerSnapshotWanted(error.value)) return "newer"
        throw Cause.squash(exit.cause)
      }
      // An older snapshot (taken while transaction 11 ran), the middle page: it asks, reading nothing.
      const older = snapshot(K1, 11, 13)
      skipped.length = 0
      assert.strictEqual(asking(older, middle), "newer")
      assert.deepStrictEqual(skipped, [])
      assert.strictEqual(boundaries.size(), kept)
      // Its page less than a step (10 rows) from an end: read from that end, as without boundaries.
      assert.deepStrictEqual(asking(older, { page: 1, limit: 20 }), list.slice(980).reverse().map((row) => row.created_at))
      assert.deepStrictEqual(asking(older, { page: 50, limit: 20 }), list.slice(0, 20).reverse().map((row) => row.created_at))
      // Where the storage does not let it ask (the default: a page read inside another unit), the nearer end.
      skipped.length = 0
      assert.deepStrictEqual(pageOf(boundaries, older, reads), expectedMiddle)
      assert.deepStrictEqual(skipped, [480])
      // A unit whose kept snapshot a newer unit moves on while it walks asks too.
      const fresh = new PageBoundaries(10)
      const walking = counting()
      walking.duringNextRead(() => {
        assert.deepStrictEqual(Effect.runSync(fresh.page("l", "client", snapshot(K1, 20, 21), 1_000, middle, counting().reads, 0)).map((row) => row.created_at), expectedMiddle)
      })
      const exit = Effect.runSyncExit(Effect.provideService(fresh.page("l", "client", snapshot(undefined, 10, 12), 1_000, middle, walking.reads, 0), MayAskNewerSnapshot, true))
      const error = Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : undefined
      assert.isTrue(error?._tag === "Some" && isNewerSnapshotWanted(error.value))
      // Run again on a newer snapshot, the unit uses the boundaries: a seek and no walk.
      skipped.length = 0
      assert.deepStrictEqual(asking(snapshot(K1, 12, 13), middle), expectedMiddle)
      assert.deepStrictEqual(skipped, [0])
    })

    it("a unit whose kept snapshot moves on while it walks stops using the boundaries and adds none", () => {
      const boundaries = new PageBoundaries(10)
      const { skipped, reads, duringNextRead } = counting()
      // The first unit's walk: while it reads its first step, a unit on a newer snapshot (it asked for the changes
      // the first unit's did not see) brings the kept one up.
      duringNextRead(() => {
        assert.deepStrictEqual(pageOf(boundaries, snapshot(K1, 20, 21), counting().reads), expectedMiddle)
      })
      const before = boundaries.size()
      assert.strictEqual(before, 0)
      assert.deepStrictEqual(pageOf(boundaries, snapshot(undefined, 10, 12), reads), expectedMiddle)
      // The newer unit's snapshot is kept, with its boundaries; the older unit read from the nearer end.
      assert.strictEqual(keptXmax(boundaries), 21n)
      assert.deepStrictEqual(skipped.slice(-1), [480])
      const newerOnly = new PageBoundaries(10)
      pageOf(newerOnly, snapshot(undefined, 20, 21), counting().reads)
      assert.strictEqual(boundaries.size(), newerOnly.size())
    })
  })
})
