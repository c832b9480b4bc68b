/**
 * Page boundaries (PageBoundaries) against a model: a client's transactions in memory, read through the same
 * reads the SQL store makes, with short steps so a short list gets boundaries. Whatever happens between pages (new
 * transactions, transactions written with an old key, transactions moving between status groups, another
 * connection's commit), every page of the whole list and of a status group is the port's slice (PAGE-1, PAGE-4);
 * with `changed` left out the model finds pages that are off. The SQLite test in SqlStorage.test.ts runs it on a
 * real file.
 */
import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import { assert } from "vitest"
import { PageBoundaries, type SortKey } from "../src/PageBoundaries.js"

interface Row extends SortKey {
  group: "pending" | "completed"
}

const compare = (a: SortKey, b: SortKey) => a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0

type Step =
  | { readonly kind: "page"; readonly group: "pending" | undefined; readonly page: number; readonly limit: number }
  | { readonly kind: "insert"; readonly at: number | undefined; readonly group: "pending" | "completed" }
  | { readonly kind: "move"; readonly which: number }
  | { readonly kind: "foreign"; readonly at: number }

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("page" as const), group: fc.constantFrom("pending" as const, undefined), page: fc.integer({ min: 1, max: 40 }), limit: fc.integer({ min: 1, max: 9 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("insert" as const), at: fc.option(fc.integer({ min: 0, max: 400 }), { nil: undefined }), group: fc.constantFrom("pending" as const, "completed" as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("move" as const), which: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("foreign" as const), at: fc.integer({ min: 0, max: 400 }) }) }
)

/** Runs the steps; `tellChanges: false` leaves out the calls that keep boundaries exact. */
const run = (initial: number, stepRows: number, steps: ReadonlyArray<Step>, tellChanges = true): string | undefined => {
  let serial = 0
  const made = (at: number, group: Row["group"]): Row => ({ created_at: String(at).padStart(6, "0"), id: String(serial++).padStart(6, "0"), group })
  const rows: Array<Row> = Array.from({ length: initial }, (_, i) => made(i, i % 3 === 0 ? "pending" : "completed"))
  const boundaries = new PageBoundaries(stepRows)
  let version = 0
  for (const s of steps) {
    if (s.kind === "insert") {
      const row = made(s.at ?? 1_000 + serial, s.group)
      rows.push(row)
      if (tellChanges) boundaries.changed("client", row)
    } else if (s.kind === "move" && rows.length > 0) {
      const row = rows[s.which % rows.length]!
      row.group = row.group === "pending" ? "completed" : "pending"
      if (tellChanges) boundaries.changed("client", row)
    } else if (s.kind === "foreign") {
      rows.push(made(s.at, "pending"))
      if (tellChanges) version++
    } else if (s.kind === "page") {
      const list = rows.filter((row) => s.group === undefined || row.group === s.group).sort(compare)
      const oldest = (key: SortKey | undefined) => key === undefined ? 0 : list.filter((row) => compare(row, key) <= 0).length
      const start = (s.page - 1) * s.limit
      const expected = [...list].reverse().slice(start, start + s.limit).map((row) => row.id)
      if (start === 0 || start >= list.length) continue
      const found = Effect.runSync(boundaries.page(`client|${s.group}`, "client", version, list.length, { page: s.page, limit: s.limit }, {
        after: (key, limit, offset) => Effect.succeed(list.slice(oldest(key) + offset, oldest(key) + offset + limit)),
        upTo: (key, limit, offset) => {
          const end = key === undefined ? list.length : oldest(key)
          return Effect.succeed(list.slice(Math.max(0, end - offset - limit), Math.max(0, end - offset)).reverse())
        }
      })).map((row) => row.id)
      if (JSON.stringify(found) !== JSON.stringify(expected)) return JSON.stringify({ step: s, found, expected })
    }
  }
  return undefined
}

const steps = fc.array(step, { minLength: 1, maxLength: 60 })

describe("PageBoundaries (PAGE-1, PAGE-4)", () => {
  it("every page is the port's slice, whatever was written between pages", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 1, max: 12 }), steps, (initial, stepRows, list) => {
        assert.strictEqual(run(initial, stepRows, list), undefined)
      }),
      { numRuns: 500 }
    )
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
  })

  it("a walk longer than a step leaves boundaries a step apart, and the next page of the list walks less than a step", () => {
    const boundaries = new PageBoundaries(10)
    const list = Array.from({ length: 1_000 }, (_, i) => ({ created_at: String(i).padStart(6, "0"), id: "x" }))
    const skipped: Array<number> = []
    const reads = {
      after: (key: SortKey | undefined, limit: number, offset: number) => {
        const start = key === undefined ? 0 : Number(key.created_at) + 1
        skipped.push(offset)
        return Effect.succeed(list.slice(start + offset, start + offset + limit))
      },
      upTo: (key: SortKey | undefined, limit: number, offset: number) => {
        const end = key === undefined ? list.length : Number(key.created_at) + 1
        skipped.push(offset)
        return Effect.succeed(list.slice(Math.max(0, end - offset - limit), end - offset).reverse())
      }
    }
    Effect.runSync(boundaries.page("l", "client", 0, 1_000, { page: 25, limit: 20 }, reads))
    assert.strictEqual(boundaries.size(), 48)
    skipped.length = 0
    // Rows 650 to 656 counted from the oldest: 3 from the boundary at 660.
    const page = Effect.runSync(boundaries.page("l", "client", 0, 1_000, { page: 50, limit: 7 }, reads))
    assert.deepStrictEqual(page.map((row) => row.created_at), list.slice(650, 657).reverse().map((row) => row.created_at))
    assert.deepStrictEqual(skipped.length, 1)
    assert.isBelow(skipped[0]!, 10)
    // Another connection's commit (a new data version) forgets them all.
    Effect.runSync(boundaries.page("l", "client", 1, 1_000, { page: 2, limit: 5 }, reads))
    assert.strictEqual(boundaries.size(), 0)
  })
})
