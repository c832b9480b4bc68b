/**
 * How the SQL stores read a page (SqlUnit.pageOf), checked against a list held in memory: every page is exactly
 * the slice the port defines, with the total (PAGE-1, PAGE-2, PAGE-4), and no read skips more than half the list,
 * whichever page is asked for: a page past the middle is read from the oldest end and turned round. The storage
 * contract (StorageContract.ts) runs the same pages on SQLite and PostgreSQL.
 */
import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import { assert } from "vitest"
import { pageOf } from "../src/SqlUnit.js"

/** A list of `total` rows, newest first, and the reads a page made of it. */
const listOf = (total: number) => {
  const newestFirst = Array.from({ length: total }, (_, i) => total - i)
  const reads: Array<{ readonly limit: number; readonly offset: number; readonly fromOldest: boolean }> = []
  let counts = 0
  return {
    newestFirst,
    reads,
    counts: () => counts,
    rows: (limit: number, offset: number, fromOldest: boolean) =>
      Effect.sync(() => {
        reads.push({ limit, offset, fromOldest })
        const ordered = fromOldest ? [...newestFirst].reverse() : newestFirst
        return ordered.slice(offset, offset + limit)
      }),
    count: () =>
      Effect.sync(() => {
        counts++
        return total
      })
  }
}

const pageOfList = (total: number, page: number, limit: number) => {
  const list = listOf(total)
  const found = Effect.runSync(pageOf(list.rows, list.count, (row: number) => `#${row}`, { page, limit }))
  return { list, found }
}

describe("pageOf (PAGE-1, PAGE-4)", () => {
  it("every page is the port's slice with the total, and no read skips more than half the list", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 400 }), (total, limit, page) => {
        const { list, found } = pageOfList(total, page, limit)
        const start = (page - 1) * limit
        assert.deepStrictEqual(found, { items: list.newestFirst.slice(start, start + limit).map((row) => `#${row}`), total })
        for (const read of list.reads) {
          assert.isAtMost(read.offset, Math.floor(total / 2))
          assert.isAtMost(read.limit, limit)
        }
      }),
      { numRuns: 2_000 }
    )
  })

  it("the last page of a long list reads from the oldest end, the first from the newest", () => {
    const last = pageOfList(1_000_000, 50_000, 20)
    assert.deepStrictEqual(last.list.reads, [{ limit: 20, offset: 0, fromOldest: true }])
    assert.deepStrictEqual(last.found.items.at(-1), "#1")
    const middle = pageOfList(1_000_000, 25_001, 20)
    assert.deepStrictEqual(middle.list.reads, [{ limit: 20, offset: 499_980, fromOldest: true }])
    const first = pageOfList(1_000_000, 1, 20)
    assert.deepStrictEqual(first.list.reads, [{ limit: 20, offset: 0, fromOldest: false }])
  })

  it("a short first page is the whole list and is not counted; a page past the end reads nothing", () => {
    const short = pageOfList(5, 1, 20)
    assert.strictEqual(short.list.counts(), 0)
    assert.deepStrictEqual(short.found.total, 5)
    const past = pageOfList(5, 3, 20)
    assert.deepStrictEqual(past.list.reads, [])
    assert.deepStrictEqual(past.found, { items: [], total: 5 })
  })
})
