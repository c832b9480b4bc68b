/**
 * A time range's trail counted per stride from its base trail's stride times (StrideTimes): exact against the
 * events themselves whatever the order of their times, reading the base trail's strides once and, for a new range,
 * only the strides its edges cut.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import { MAX_CUT_RUNS, type RangeReads, StrideTimes, type TimeRange, withinRange } from "../src/StrideTimes.js"

/** A log of events: whether each is the base trail's, and its time (a fixed-width text, as `at` is). */
interface LoggedEvent {
  readonly base: boolean
  readonly at: string
}

const timeOf = (second: number) => `2026-01-01T00:${String(Math.floor(second / 60)).padStart(2, "0")}:${String(second % 60).padStart(2, "0")}.000Z`

/** RangeReads over `log`, noting the strides each read passes. */
const readsOf = (log: ReadonlyArray<LoggedEvent>, range: TimeRange, seen: { base: Array<number>; cut: Array<number> }): RangeReads => {
  const inRange = (at: string) => (range.from === undefined || at >= range.from) && (range.to === undefined || at <= range.to)
  return {
    basePerStride: (after, upTo, stride) =>
      Effect.sync(() => {
        const per = new Map<number, { stride: number; count: number; earliest: string; latest: string }>()
        for (let position = after + 1; position <= Math.min(upTo, log.length); position++) {
          const event = log[position - 1]!
          const k = Math.floor((position - 1) / stride)
          if (!seen.base.includes(k)) seen.base.push(k)
          if (!event.base) continue
          const kept = per.get(k)
          per.set(k, kept === undefined
            ? { stride: k, count: 1, earliest: event.at, latest: event.at }
            : { stride: k, count: kept.count + 1, earliest: event.at < kept.earliest ? event.at : kept.earliest, latest: event.at > kept.latest ? event.at : kept.latest })
        }
        return [...per.values()]
      }),
    perStrideWithin: (ranges, stride) =>
      Effect.sync(() => {
        const per = new Map<number, number>()
        for (const [after, upTo] of ranges) {
          for (let position = after + 1; position <= Math.min(upTo, log.length); position++) {
            const event = log[position - 1]!
            const k = Math.floor((position - 1) / stride)
            if (!seen.cut.includes(k)) seen.cut.push(k)
            if (event.base && inRange(event.at)) per.set(k, (per.get(k) ?? 0) + 1)
          }
        }
        return [...per].map(([k, count]) => ({ stride: k, count }))
      })
  }
}

/** The range's trail's events per stride in (after, upTo], for the strides with any, counted from the events. */
const expected = (log: ReadonlyArray<LoggedEvent>, range: TimeRange, after: number, upTo: number, stride: number) => {
  const per = new Map<number, number>()
  for (let position = after + 1; position <= upTo; position++) {
    const event = log[position - 1]!
    if (event.base && (range.from === undefined || event.at >= range.from) && (range.to === undefined || event.at <= range.to)) {
      const k = Math.floor((position - 1) / stride)
      per.set(k, (per.get(k) ?? 0) + 1)
    }
  }
  return [...per].map(([k, count]) => ({ stride: k, count })).sort((a, b) => a.stride - b.stride)
}

describe("StrideTimes: a time range's trail counted from its base trail's stride times (PAGE-1, PAGE-4)", () => {
  it.effect("every range's count per stride is exact, whatever the order of the events' times, however the strides were asked for", () =>
    Effect.sync(() =>
      fc.assert(
        fc.property(
          // Times mostly rising with position, with a jitter that can reorder neighbours, or at random.
          fc.integer({ min: 8, max: 120 }),
          fc.constantFrom(0, 3, 30, 10_000),
          fc.array(fc.tuple(fc.integer({ min: 0, max: 200 }), fc.integer({ min: 0, max: 200 }), fc.boolean(), fc.boolean(), fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 30 })), { minLength: 1, maxLength: 12 }),
          fc.integer({ min: 0, max: 1_000_000 }),
          (length, jitter, asks, seed) => {
            const stride = 4
            let state = seed
            const random = () => (state = (state * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648
            const log: Array<LoggedEvent> = Array.from({ length }, (_, i) => ({
              base: random() < 0.7,
              at: timeOf(Math.max(0, Math.min(3_599, Math.round(i + (random() - 0.5) * 2 * jitter))))
            }))
            const times = new StrideTimes()
            const strides = Math.floor(length / stride)
            for (const [a, b, openFrom, openTo, first, count] of asks) {
              const range: TimeRange = { from: openFrom ? undefined : timeOf(Math.min(a, b)), to: openTo ? undefined : timeOf(Math.max(a, b)) }
              const k0 = Math.min(first, strides)
              const k1 = Math.min(strides, k0 + count)
              const seen = { base: [] as Array<number>, cut: [] as Array<number> }
              const found = Effect.runSync(times.countPerStride("base", range, readsOf(log, range, seen), k0 * stride, k1 * stride, stride))
              assert.deepStrictEqual([...found].sort((x, y) => x.stride - y.stride), expected(log, range, k0 * stride, k1 * stride, stride))
              // Only strides the range's edges may cut are read for the range itself.
              for (const k of seen.cut) {
                const slice = log.slice(k * stride, (k + 1) * stride).filter((event) => event.base).map((event) => event.at).sort()
                assert.strictEqual(withinRange({ count: slice.length, earliest: slice[0], latest: slice.at(-1) }, range), "part")
              }
            }
          }
        ),
        { numRuns: 500 }
      )
    ))

  it.effect("a base trail's strides are read once; a new range then reads only the strides its edges cut", () =>
    Effect.sync(() => {
      const stride = 4
      // Times rising with position: one event a second.
      const log: Array<LoggedEvent> = Array.from({ length: 400 }, (_, i) => ({ base: i % 2 === 0, at: timeOf(i) }))
      const times = new StrideTimes()
      const first = { base: [] as Array<number>, cut: [] as Array<number> }
      const lastHour: TimeRange = { from: timeOf(101), to: undefined }
      Effect.runSync(times.countPerStride("base", lastHour, readsOf(log, lastHour, first), 0, 400, stride))
      assert.strictEqual(first.base.length, 100)
      assert.deepStrictEqual(first.cut, [25])
      // A later range: no base stride read again, one stride cut at each edge.
      const later = { base: [] as Array<number>, cut: [] as Array<number> }
      const range: TimeRange = { from: timeOf(201), to: timeOf(349) }
      const found = Effect.runSync(times.countPerStride("base", range, readsOf(log, range, later), 0, 400, stride))
      assert.deepStrictEqual(later, { base: [], cut: [50, 87] })
      assert.strictEqual(found.reduce((sum, { count }) => sum + count, 0), expected(log, range, 0, 400, stride).reduce((sum, { count }) => sum + count, 0))
    }))

  it.effect("times far out of order cut many strides apart: one read passes from the first to the last and keeps the cut strides' counts, exact", () =>
    Effect.sync(() => {
      const stride = 4
      // An old event in every other stride of a young log: a recent range cuts each of those strides.
      const log: Array<LoggedEvent> = Array.from({ length: 8 * (MAX_CUT_RUNS + 10) }, (_, i) => ({ base: true, at: i % 8 === 0 ? timeOf(0) : timeOf(600 + i) }))
      const range: TimeRange = { from: timeOf(300), to: undefined }
      const asked: Array<number> = []
      const reads = readsOf(log, range, { base: [], cut: [] })
      const counting: RangeReads = { ...reads, perStrideWithin: (ranges, size) => (asked.push(ranges.length), reads.perStrideWithin(ranges, size)) }
      const times = new StrideTimes()
      const found = Effect.runSync(times.countPerStride("base", range, counting, 0, log.length, stride))
      assert.deepStrictEqual(asked, [1])
      assert.deepStrictEqual([...found].sort((a, b) => a.stride - b.stride), expected(log, range, 0, log.length, stride))
    }))
})
