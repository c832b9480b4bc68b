/**
 * How the SQL stores read a page (SqlUnit.pageOf), checked against a list held in memory: every page is exactly
 * the slice the port defines, with the total (PAGE-1, PAGE-2, PAGE-4), and no read skips more than half the list,
 * whichever page is asked for: a page past the middle is read from the oldest end and turned round. The storage
 * contract (StorageContract.ts) runs the same pages on SQLite and PostgreSQL.
 */
import { describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import * as fc from "fast-check"
import { assert } from "vitest"
import { pageOf } from "../src/SqlUnit.js"

/** A list of `total` rows, newest first, and the reads a page made of it. */
const listOf = (total: number) => {
  const newestFirst = Array.from({ length: total }, (_, i) => ({ n: total - i }))
  const reads: Array<{ readonly limit: number; readonly offset: number; readonly fromOldest: boolean }> = []
  const firstReads: Array<number> = []
  let counts = 0
  return {
    newestFirst,
    reads,
    firstReads,
    counts: () => counts,
    listReads: {
      first: (limit: number) =>
        Effect.sync(() => {
          firstReads.push(limit)
          return newestFirst.slice(0, limit).map((row) => ({ ...row, list_total: total }))
        }),
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
}

const pageOfList = (total: number, page: number, limit: number, mode: "lookup" | "read" = "read") => {
  const list = listOf(total)
  const found = Effect.runSync(pageOf(list.listReads, (row: { readonly n: number }) => `#${row.n}`, { page, limit }, mode))
  return { list, found }
}

describe("pageOf (PAGE-1, PAGE-4)", () => {
  it("every page is the port's slice with the total, and no read skips more than half the list", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 400 }), (total, limit, page) => {
        const { list, found } = pageOfList(total, page, limit)
        const start = (page - 1) * limit
        assert.deepStrictEqual(found, { items: list.newestFirst.slice(start, start + limit).map((row) => `#${row.n}`), total })
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
    assert.deepStrictEqual(first.list.firstReads, [20])
    assert.deepStrictEqual(first.list.reads, [])
  })

  it("PAGE-1: the first page and its total are one read, full or short, and never counted apart; a page past the end reads nothing", () => {
    for (const [total, expected] of [[1_000, 1_000], [5, 5], [0, 0]] as const) {
      const { list, found } = pageOfList(total, 1, 20)
      assert.deepStrictEqual(list.firstReads, [20])
      assert.strictEqual(list.counts(), 0)
      assert.deepStrictEqual(list.reads, [])
      assert.strictEqual(found.total, expected)
      assert.strictEqual(found.items.length, Math.min(20, expected))
    }
    const past = pageOfList(5, 3, 20)
    assert.deepStrictEqual(past.list.reads, [])
    assert.deepStrictEqual(past.found, { items: [], total: 5 })
  })

  it("in a lookup unit the first page is read as in any unit, and a later page, which needs a snapshot, is a defect", () => {
    assert.deepStrictEqual(pageOfList(30, 1, 20, "lookup").found.total, 30)
    const later = Effect.runSyncExit(pageOf(listOf(30).listReads, (row: { readonly n: number }) => row.n, { page: 2, limit: 20 }, "lookup"))
    assert.isTrue(Exit.hasDies(later))
  })
})
