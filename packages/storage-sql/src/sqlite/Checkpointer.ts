/**
 * WAL checkpoints off the request path. In WAL mode every commit appends its pages to the -wal file, and SQLite
 * copies them back into the database file (a checkpoint, with an fsync) once the log passes 1000 pages, inside
 * whichever commit crossed the line: that commit, and the request waiting on it, pays a few milliseconds, about
 * 30 µs per write unit on average (measured, docs/benchmarks.md). Here a worker thread with its own connection
 * runs a PASSIVE checkpoint (it never blocks readers or the writer) every interval instead, on another core.
 *
 * The store's connection keeps an automatic checkpoint at a higher mark (FALLBACK_AUTOCHECKPOINT_PAGES), so
 * should the worker stall or die the log still stays bounded. Durability does not change: a commit is in the
 * log before it returns, and a checkpoint only moves committed pages.
 */
import { startDriverWorker } from "./DriverWorker.js"

export const DEFAULT_CHECKPOINT_INTERVAL_MILLIS = 100

/** The store's own automatic checkpoint while the worker runs: ten times SQLite's default of 1000 pages. */
export const FALLBACK_AUTOCHECKPOINT_PAGES = 10_000

/** What one PASSIVE checkpoint did: frames in the log and frames now copied into the database file. */
export interface CheckpointResult {
  readonly log: number
  readonly checkpointed: number
}

export interface Checkpointer {
  /** Checkpoints the worker has run that copied at least one frame. */
  readonly copied: () => number
  readonly last: () => CheckpointResult | undefined
  /** Runs a last checkpoint, closes the worker's connection and ends the thread. */
  readonly stop: () => Promise<void>
}

// Evaluated in the worker (see DriverWorker).
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads")
const Database = require(workerData.driver)
const db = new Database(workerData.filename, { fileMustExist: true, timeout: workerData.busyTimeoutMillis })
const checkpoint = db.prepare("PRAGMA wal_checkpoint(PASSIVE)")
const run = () => {
  try {
    const [result] = checkpoint.all()
    if (result.checkpointed > 0) parentPort.postMessage({ log: result.log, checkpointed: result.checkpointed })
  } catch {
    // Busy or locked: the next interval tries again; the store's fallback bounds the log meanwhile.
  }
}
const timer = setInterval(run, workerData.intervalMillis)
parentPort.on("message", (message) => {
  if (message !== "stop") return
  clearInterval(timer)
  run()
  db.close()
  parentPort.postMessage("stopped")
})
`

export const startCheckpointer = (options: {
  readonly filename: string
  readonly intervalMillis: number
  readonly busyTimeoutMillis: number
}): Checkpointer => {
  let copied = 0
  let last: CheckpointResult | undefined
  const { stop } = startDriverWorker(WORKER_SOURCE, options, (message: CheckpointResult) => {
    copied++
    last = message
  })
  return { copied: () => copied, last: () => last, stop }
}
