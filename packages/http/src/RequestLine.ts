/**
 * The level of the one line the handler logs per request. A successful read (GET or HEAD answered below 400 in less
 * than `slowReadMillis`) is logged at Debug; a request answered 503 (the storage unavailable or busy) at Warn, with
 * the error's message; every other request at Info: a command, whatever its answer, a read that was refused or failed
 * (401, 403, 404, 429, 500), and a slow read. So at the default level, Info, the log holds
 * every change made through the relay, every refusal and every read slow enough to look into, the lines an operator
 * or an auditor looks for, while the reads that are most of a custody API's traffic (balances and statuses polled)
 * do not fill it. A line per read cost 5 to 13% of a GET's throughput with the output going to a file or through a
 * pipe, and 3 MB of log a second at 10,000 reads a second (docs/benchmarks.md, "Logging: a successful read's line at
 * Debug"). `logLevel: "Debug"` (`RELAY_LOG_LEVEL=Debug` for the server) logs every request.
 */
import type { LogLevel } from "effect"

/** From how many milliseconds a successful read is logged at Info all the same, unless the handler is told otherwise. */
export const DEFAULT_SLOW_READ_MILLIS = 1000

export const levelOf = (method: string, status: number, durationMs: number, slowReadMillis: number): "Debug" | "Info" | "Warn" =>
  status === 503 ? "Warn" : (method === "GET" || method === "HEAD") && status < 400 && durationMs < slowReadMillis ? "Debug" : "Info"

/** The most verbose level a request's line is logged at: what must pass for every request to have its line. */
export const MOST_VERBOSE: LogLevel.LogLevel = "Debug"
