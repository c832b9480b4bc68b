/**
 * A TCP proxy in front of PostgreSQL that counts round trips on the wire: it reads the protocol's frontend messages
 * and counts each one that asks the server to answer (Sync after extended-protocol statements, or a simple Query).
 * A round trip is what a request waits for on a network to the database (issue 17), so tests count those rather
 * than statements: a pipeline of several statements is one.
 */
import { connect, createServer, type Server, type Socket } from "node:net"
import { Effect } from "effect"

/** Frontend messages that end a round trip: the server answers each with ReadyForQuery. */
const SYNC = 0x53
const QUERY = 0x51
/** Frontend messages that parse a statement, and that close a prepared one (PreparedStatements). */
const PARSE = 0x50
const CLOSE = 0x43
/** The backend message that ends the server's answer to one. */
const READY_FOR_QUERY = 0x5a

/**
 * Calls `each` with the type and body of every whole message in `buffer` (type byte, then a length that counts
 * itself); the rest.
 */
const messages = (buffer: Buffer, each: (type: number, body: Buffer) => void): Buffer => {
  let rest = buffer
  while (rest.length >= 5) {
    const length = rest.readInt32BE(1)
    if (rest.length < 1 + length) break
    each(rest[0] ?? 0, rest.subarray(5, 1 + length))
    rest = rest.subarray(1 + length)
  }
  return rest
}

/** The SQL of a Parse message (a statement's name, then its text) or a simple Query. */
const statementText = (type: number, body: Buffer): string => {
  const text = type === PARSE ? body.subarray(body.indexOf(0) + 1) : body
  return text.subarray(0, text.indexOf(0)).toString("utf8")
}

/** A proxy to `target` that counts round trips on every connection through it. */
export const countingProxy = async (target: URL) => {
  let roundTrips = 0
  let parses = 0
  let closes = 0
  /** Connections started, each answered with one ReadyForQuery too, and ReadyForQuery messages the server sent. */
  let startups = 0
  let answered = 0
  /** The server's replies held back while `holdReplies` is in force, in order. */
  let held: Array<() => void> | undefined
  /** Statements whose connections' replies are held from the moment one is sent (see `holdRepliesTo`). */
  let statementHold:
    | { readonly matches: (text: string) => boolean; seen: number; holding: boolean; readonly releases: Array<() => void> }
    | undefined
  /** Every open connection through the proxy: the client's socket and the server's. */
  const open = new Set<readonly [Socket, Socket]>()
  const server: Server = createServer((client: Socket) => {
    const upstream = connect(Number(target.port || 5432), target.hostname)
    const pair = [client, upstream] as const
    open.add(pair)
    let started = false
    let pending: Buffer = Buffer.alloc(0)
    let replies: Buffer = Buffer.alloc(0)
    /** This connection's replies held back by `holdRepliesTo`. */
    let heldHere: Array<() => void> | undefined
    client.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk])
      // The startup message has no type byte: its first four bytes are its length.
      if (!started && pending.length >= 4 && pending.length >= pending.readInt32BE(0)) {
        pending = pending.subarray(pending.readInt32BE(0))
        started = true
        startups++
      }
      if (started) {
        pending = messages(pending, (type, body) => {
          if (type === SYNC || type === QUERY) roundTrips++
          else if (type === PARSE) parses++
          else if (type === CLOSE) closes++
          const hold = statementHold
          if ((type === PARSE || type === QUERY) && hold !== undefined && hold.matches(statementText(type, body))) {
            hold.seen++
            if (hold.holding && heldHere === undefined) {
              heldHere = []
              hold.releases.push(() => {
                const replies = heldHere ?? []
                heldHere = undefined
                replies.forEach((reply) => reply())
              })
            }
          }
        })
      }
      upstream.write(chunk)
    })
    upstream.on("data", (chunk: Buffer) => {
      replies = messages(Buffer.concat([replies, chunk]), (type) => {
        if (type === READY_FOR_QUERY) answered++
      })
      const holding = heldHere ?? held
      if (holding === undefined) client.write(chunk)
      else holding.push(() => client.write(chunk))
    })
    upstream.on("end", () => client.end())
    client.on("error", () => upstream.destroy())
    upstream.on("error", () => client.destroy())
    client.on("close", () => {
      open.delete(pair)
      upstream.destroy()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  const url = new URL(target)
  url.hostname = "127.0.0.1"
  url.port = String(port)
  return {
    url: url.toString(),
    /**
     * Round trips made while `work` ran, and after it until every one sent has been answered: a statement the
     * client sent without waiting for its answer (a read unit's COMMIT) may reach the proxy after `work` ends.
     */
    count: async (work: () => Promise<unknown>): Promise<number> => {
      const before = roundTrips
      await work()
      for (let quiet = 0; quiet < 3;) {
        await new Promise((resolve) => setTimeout(resolve, 10))
        quiet = answered === roundTrips + startups ? quiet + 1 : 0
      }
      return roundTrips - before
    },
    /** Connections opened through the proxy so far. */
    connections: () => startups,
    /** Parse and Close messages sent through the proxy so far, on every connection. */
    sent: () => ({ parses, closes }),
    /** Holds every reply of the server from now until the returned function is called, which passes them on. */
    holdReplies: (): (() => void) => {
      held ??= []
      return () => {
        const replies = held ?? []
        held = undefined
        replies.forEach((reply) => reply())
      }
    },
    /**
     * From now until the returned `release` is called, holds every reply on each connection from the moment its
     * client sends a statement (parsed, or a simple query) whose text `matches`; `seen` tells how many were sent since
     * (after the release too, until the next call).
     */
    holdRepliesTo: (matches: (text: string) => boolean) => {
      const hold = { matches, seen: 0, holding: true, releases: [] as Array<() => void> }
      statementHold = hold
      return {
        seen: () => hold.seen,
        release: () => {
          hold.holding = false
          hold.releases.splice(0).forEach((release) => release())
        }
      }
    },
    /**
     * Cuts every open connection, both ways, as a network that fails would: what the server did stays done, and the
     * replies held back for them never arrive.
     */
    cutConnections: () => {
      for (const [client, upstream] of open) {
        client.destroy()
        upstream.destroy()
      }
      open.clear()
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

/** A counting proxy to the database at `url` for the scope, closed with it. */
export const scopedCountingProxy = (url: string) =>
  Effect.acquireRelease(Effect.promise(() => countingProxy(new URL(url))), (proxy) => Effect.promise(() => proxy.close()))
