/**
 * `node delayProxy.mjs <host> <port> <millis>`: a TCP proxy that holds every chunk `millis` milliseconds in each
 * direction before passing it on, so a database on this host answers as one on another host would (a round trip
 * costs twice `millis` more). bench:pair starts it with BENCH_PG_DELAY_MS; it prints `listening <port>` when ready.
 * Node's timers fire in the order they were set for one delay, so each direction's bytes stay in order.
 */
import { connect, createServer } from "node:net"

const [host = "127.0.0.1", port = "5432", millis = "1"] = process.argv.slice(2)
const delay = Number(millis)

const server = createServer((client) => {
  const upstream = connect(Number(port), host)
  // Each delayed chunk goes out at once: with Nagle's algorithm a chunk written while an earlier one is unacknowledged
  // waits for the peer's delayed ACK (40 ms on Linux), far more than the delay this proxy adds.
  client.setNoDelay(true)
  upstream.setNoDelay(true)
  client.on("data", (chunk) => setTimeout(() => upstream.write(chunk), delay))
  upstream.on("data", (chunk) => setTimeout(() => client.write(chunk), delay))
  const end = () => setTimeout(() => {
    client.destroy()
    upstream.destroy()
  }, delay)
  client.on("close", end)
  upstream.on("close", end)
  client.on("error", () => undefined)
  upstream.on("error", () => undefined)
})
server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  process.stdout.write(`listening ${typeof address === "object" && address !== null ? address.port : 0}\n`)
})
