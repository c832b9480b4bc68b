/**
 * A TCP proxy in front of PostgreSQL that counts round trips on the wire: it reads the protocol's frontend messages
 * and counts each one that asks the server to answer (Sync after extended-protocol statements, or a simple Query).
 * A round trip is what a request waits for on a network to the database (issue 17), so tests count those rather
 * than statements: a pipeline of several statements is one.
 */
import { connect, createServer, type Server, type Socket } from "node:net"

/** Frontend messages that end a round trip: the server answers each with ReadyForQuery. */
const SYNC = 0x53
const QUERY = 0x51

/** A proxy to `target` that counts round trips on every connection through it. */
export const countingProxy = async (target: URL) => {
  let roundTrips = 0
  const server: Server = createServer((client: Socket) => {
    const upstream = connect(Number(target.port || 5432), target.hostname)
    let started = false
    let pending = Buffer.alloc(0)
    client.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk])
      for (;;) {
        // The startup message has no type byte: its first four bytes are its length.
        if (!started) {
          if (pending.length < 4) break
          const length = pending.readInt32BE(0)
          if (pending.length < length) break
          pending = pending.subarray(length)
          started = true
          continue
        }
        if (pending.length < 5) break
        const length = pending.readInt32BE(1)
        if (pending.length < 1 + length) break
        if (pending[0] === SYNC || pending[0] === QUERY) roundTrips++
        pending = pending.subarray(1 + length)
      }
      upstream.write(chunk)
    })
    upstream.pipe(client)
    client.on("error", () => upstream.destroy())
    upstream.on("error", () => client.destroy())
    client.on("close", () => upstream.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  const url = new URL(target)
  url.hostname = "127.0.0.1"
  url.port = String(port)
  return {
    url: url.toString(),
    /** Round trips made while `work` ran. */
    count: async (work: () => Promise<unknown>): Promise<number> => {
      const before = roundTrips
      await work()
      return roundTrips - before
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
