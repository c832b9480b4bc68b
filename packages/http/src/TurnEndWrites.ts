/**
 * Replies finished in the same turn of the event loop go out on their sockets one after another at the turn's end,
 * instead of each between the handling of the next requests: a performance measure, measured in docs/benchmarks.md
 * (section "replies written together at the end of a turn": 1.16 times the GETs a second on a 2-core VM).
 *
 * A reply's `writev` costs the kernel more when it has to wake the process that reads it, and a server that works
 * longer between two writes finds that process asleep more often. Written as soon as each was ready, a GET account's
 * reply took about 80 µs of `writev` out of the relay's 270 µs a request under the profiler (the baseline's, 49).
 * Written back to back, the later writes of a turn find the reader already awake: about 28 µs. This is the flush
 * consolidation servers such as Netty do at the end of a read loop.
 *
 * The first reply of a turn is written at once, so a lone request waits for nothing: only replies that finish
 * while the turn is still handling others wait, and for no longer than the rest of that turn's requests take (the
 * turn's end is node's `setImmediate`, which runs right after the loop's poll for I/O). Replies that come out of a
 * promise are written when it settles, not through here: on SQLite a commit group's members settle together after
 * the turn's end, and would otherwise wait a whole turn more; on PostgreSQL holding them measured no gain.
 */

/** Writes one reply. */
export type Send = () => void

/** Where replies are written: at once for the first of a turn, at the turn's end for the others, in order. */
export type TurnEndWrites = (send: Send) => void

export const turnEndWrites = (): TurnEndWrites => {
  let turnOpen = false
  let waiting: Array<Send> = []
  const endTurn = () => {
    turnOpen = false
    const due = waiting
    waiting = []
    for (const send of due) {
      try {
        send()
      } catch (error) {
        // Thrown where it would have been without the wait, as an uncaught error, once the turn's others are out.
        queueMicrotask(() => {
          throw error
        })
      }
    }
  }
  return (send) => {
    if (turnOpen) {
      waiting.push(send)
      return
    }
    turnOpen = true
    setImmediate(endTurn)
    send()
  }
}
