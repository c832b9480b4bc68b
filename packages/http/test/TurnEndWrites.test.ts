/**
 * Replies finished in one turn of the event loop: the first written at once, the others together at the turn's
 * end, in the order they finished (TurnEndWrites.ts), and one that cannot be written holds none of the others back.
 */
import fc from "fast-check"
import { afterEach, describe, expect, it, vi } from "vitest"
import { turnEndWrites } from "../src/TurnEndWrites.js"

const turnEnd = () => new Promise<void>((resolve) => setImmediate(resolve))

afterEach(() => {
  vi.restoreAllMocks()
})

describe("replies written at the end of a turn", () => {
  it("the first reply of a turn is written at once, the turn's others at its end in order, and the next turn's first at once again", async () => {
    const writes = turnEndWrites()
    const written: Array<string> = []
    writes(() => written.push("a"))
    expect(written).toEqual(["a"])
    writes(() => written.push("b"))
    writes(() => written.push("c"))
    await Promise.resolve()
    expect(written).toEqual(["a"])
    await turnEnd()
    expect(written).toEqual(["a", "b", "c"])
    writes(() => written.push("d"))
    expect(written).toEqual(["a", "b", "c", "d"])
  })

  it("whatever the turns, every reply is written once, in the order it finished, and no later than its turn's end", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 1, maxLength: 8 }), async (turns) => {
        const writes = turnEndWrites()
        const written: Array<number> = []
        let next = 0
        for (const replies of turns) {
          const first = next
          for (let n = 0; n < replies; n++) {
            const reply = next++
            writes(() => written.push(reply))
          }
          if (replies > 0) expect(written.at(-1)).toBe(first)
          await turnEnd()
          expect(written).toEqual(Array.from({ length: next }, (_, index) => index))
        }
      }),
      { numRuns: 100 }
    )
  })

  it("a reply that throws leaves the turn's others written, and its error is thrown after them, uncaught as it would have been", async () => {
    const later: Array<() => void> = []
    vi.spyOn(globalThis, "queueMicrotask").mockImplementation((callback) => {
      later.push(callback)
    })
    const writes = turnEndWrites()
    const written: Array<string> = []
    const broken = new Error("a header node refused")
    writes(() => written.push("first"))
    writes(() => {
      throw broken
    })
    writes(() => written.push("after"))
    await turnEnd()
    vi.restoreAllMocks()
    expect(written).toEqual(["first", "after"])
    expect(later).toHaveLength(1)
    expect(() => later[0]?.()).toThrow(broken)
  })
})
