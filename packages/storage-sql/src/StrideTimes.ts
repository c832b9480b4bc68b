/**
 * The times a trail's settled strides span, so that a time range's trail (`from`, `to`) is counted without reading
 * every event of the log. Each distinct filter is a trail of its own (TrailCounts), and a time range moves with the
 * clock ("the last hour"): counted like the other trails, each new range would read every event of its client in
 * the log, 310 to 630 ms at a million events on PostgreSQL, 180 to 410 ms on SQLite (docs/benchmarks.md).
 *
 * A time range's trail is its *base* trail (the same filter without the range) cut by time. Per settled stride of the
 * base trail (TrailCounts.STRIDE_POSITIONS positions) this keeps its number of events and the least and greatest `at`
 * among them; final, as nothing is added at or below a settled position and the log keeps every event. A stride then
 * counts for the range as all of its base events when both its times lie in the range, as none when neither span
 * reaches it, and only a stride the range's edge cuts is counted from its rows. Events are appended in about the
 * order of their times (a unit's clock reading shortly before its insert), so a range's edges cut a stride or two
 * each, and a new range reads those alone. Exact whatever the order: the times are compared as SQL compares them
 * (`at` is text in byte order on both engines, migrations/ColumnTypes).
 */
import { Effect } from "effect"
import { setRecent } from "./RecentlyUsed.js"
import type { Op } from "./SqlUnit.js"
import type { StrideCounts } from "./TrailCounts.js"

/** A settled stride of a base trail: its events, and the least and greatest time among them (none when empty). */
export interface StrideTime {
  readonly count: number
  readonly earliest: string | undefined
  readonly latest: string | undefined
}

/**
 * How many base trails' stride times are kept, the least recently read forgotten first: 113 KB each at a million
 * events (two times and a count per stride of 2,048 positions, measured on Node 24), 11 MB at a hundred million. A
 * forgotten base trail's strides are read again, once, by the next range that needs them.
 */
export const MAX_BASE_TRAILS = 8

/**
 * How many runs of cut strides one read takes apart (two parameters each); beyond, one read passes from the first cut
 * stride to the last and keeps only the cut ones' counts. Times far out of order (old events written into a young
 * log) can cut every other stride, and a statement's parameters are bounded (32,766 on SQLite).
 */
export const MAX_CUT_RUNS = 32

/** A time range, its ends inclusive (a trail's `from` and `to`); either may be open. */
export interface TimeRange {
  readonly from: string | undefined
  readonly to: string | undefined
}

/** The reads of a time range's trail and its base trail, per stride, as TrailReads counts them (in the unit or off it). */
export interface RangeReads {
  /** The base trail's events per stride in (after, upTo], with their least and greatest time, for the strides with any. */
  readonly basePerStride: (
    after: number,
    upTo: number,
    stride: number
  ) => Op<ReadonlyArray<{ readonly stride: number; readonly count: number; readonly earliest: string; readonly latest: string }>>
  /** The range's trail's events per stride in these ranges of positions ((after, upTo] each, apart and in order). */
  readonly perStrideWithin: (ranges: ReadonlyArray<readonly [number, number]>, stride: number) => ReturnType<StrideCounts>
}

export class StrideTimes {
  readonly #bases = new Map<string, Map<number, StrideTime>>()

  /**
   * The range's trail's events per stride in (after, upTo] (stride ends, every stride in them settled in the
   * snapshot the reads run in, as TrailCounts asks for no other), for the strides with any: from the base trail's
   * kept stride times where a stride lies wholly in or out of the range, its missing strides read first in one
   * statement; the strides the range's edges cut read in one more.
   */
  countPerStride(baseKey: string, range: TimeRange, reads: RangeReads, after: number, upTo: number, stride: number): ReturnType<StrideCounts> {
    const self = this
    return Effect.gen(function*() {
      const first = after / stride
      const end = upTo / stride
      const times = self.#timesOf(baseKey)
      let lacking = -1
      let lastLacking = -1
      for (let k = first; k < end; k++) {
        if (times.has(k)) continue
        if (lacking < 0) lacking = k
        lastLacking = k
      }
      if (lacking >= 0) {
        const found = yield* reads.basePerStride(lacking * stride, (lastLacking + 1) * stride, stride)
        const byStride = new Map(found.map((row) => [row.stride, row]))
        for (let k = lacking; k <= lastLacking; k++) {
          const row = byStride.get(k)
          if (!times.has(k)) times.set(k, row === undefined ? EMPTY : { count: row.count, earliest: row.earliest, latest: row.latest })
        }
      }
      const counts: Array<{ readonly stride: number; readonly count: number }> = []
      const cut: Array<[number, number]> = []
      const cutStrides = new Set<number>()
      for (let k = first; k < end; k++) {
        const time = times.get(k)!
        const within = withinRange(time, range)
        if (within === "all") counts.push({ stride: k, count: time.count })
        else if (within === "part") {
          cutStrides.add(k)
          const last = cut.at(-1)
          if (last !== undefined && last[1] === k * stride) last[1] = (k + 1) * stride
          else cut.push([k * stride, (k + 1) * stride])
        }
      }
      if (cut.length > MAX_CUT_RUNS) {
        const found = yield* reads.perStrideWithin([[cut[0]![0], cut.at(-1)![1]]], stride)
        counts.push(...found.filter((row) => cutStrides.has(row.stride)))
      } else if (cut.length > 0) {
        counts.push(...(yield* reads.perStrideWithin(cut, stride)))
      }
      return counts
    })
  }

  /** The kept stride times of a base trail (none yet when it was never counted, or forgotten), now its most recently read. */
  #timesOf(baseKey: string): Map<number, StrideTime> {
    const times = this.#bases.get(baseKey) ?? new Map<number, StrideTime>()
    setRecent(this.#bases, baseKey, times, MAX_BASE_TRAILS)
    return times
  }
}

const EMPTY: StrideTime = { count: 0, earliest: undefined, latest: undefined }

/**
 * Whether a stride's base events all lie in the range, none do, or some may: compared as strings, as SQL compares
 * the text column (byte order; the times are ASCII).
 */
export const withinRange = (time: StrideTime, range: TimeRange): "all" | "none" | "part" => {
  if (time.count === 0 || time.earliest === undefined || time.latest === undefined) return "none"
  if ((range.from !== undefined && time.latest < range.from) || (range.to !== undefined && time.earliest > range.to)) return "none"
  if ((range.from === undefined || time.earliest >= range.from) && (range.to === undefined || time.latest <= range.to)) return "all"
  return "part"
}
