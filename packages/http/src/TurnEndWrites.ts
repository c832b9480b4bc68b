/**
 * Replies finished in the same turn of the event loop go out on their sockets one after another at the turn's end,
 * instead of each between the handling of the next requests. A performance measure, the only one of its kind here
 * (docs/benchmarks.md, section "replies written together at the end of a turn").
 *
 * A reply's `write` on a socket costs the kernel most when it has to wake the process that reads it. On a
 * 2-core VM under load, a server that writes every reply as soon as it is ready, with a request's work between two
 * writes, wakes the client's side at nearly every write: a GET account's `writev` took about 85 µs of the relay's
 * 270 a request under the profiler, three times the baseline's. Written back to back, the later writes of a turn
 * find the reader already awake, and the same `writev` took about 23 µs. This is the flush consolidation servers
 * such as Netty do at the end of a read loop.
 *
 * The first reply of a turn is written at once, so a lone request waits for nothing: only replies that finish
 * while the turn is still handling others wait, and for no longer than the rest of that turn's requests take (the
 * turn's end is node's `setImmediate`, which runs right after the loop's poll for I/O). Replies that finish later,
 * out of a promise (a command after its commit), are written by whoever settles them, already together.
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
