/**
 * Reads off the event loop: a worker thread with its own read-only connection to the file runs single statements,
 * each its own snapshot, while the event loop serves requests. better-sqlite3 runs a statement on the thread that
 * calls it, so a long read on the store's connection holds every other request; a deep page's first walk (see
 * PageBoundaries) steps here instead. The thread starts at the first read, so a store that never walks far never
 * pays for it; should it die, the next read starts another. An audit trail's first count runs here too
 * (TrailCounts).
 *
 * On Linux the thread lowers its own priority to the lowest (nice 19; a thread's nice is its own there): a walk is
 * background work, and on a machine whose cores are all busy a thread at the same priority takes turns with the
 * event loop, so readers wait behind it as if it ran there. Measured in `bench:deep-pages`: a reader's p99 during
 * first walks 1.4 to 2.3 times its quiet p99 at nice 19 (five runs), 2.1 to 3.8 times at the process's own (four);
 * the walks take longer (docs/benchmarks.md).
 */
import type { CompiledQuery } from "kysely"
import { type DriverWorker, startDriverWorker } from "./DriverWorker.js"

/**
 * The worker connection's page cache, in KiB. A walk reads each page of the list's index once, in order, so a cache
 * holds little it reads again: at better-sqlite3's default (16 MiB) the worker added 35 MB to the process's RSS
 * after one walk to the middle of a million rows, at 256 KiB 18 MB, and its steps took as long.
 */
export const CACHE_KIB = 256

export interface ReadWorker {
  /** The statement's rows, read on the worker's connection. */
  readonly read: <R>(query: CompiledQuery<R>) => Promise<Array<R>>
  /** Closes the worker's connection and ends the thread. */
  readonly stop: () => Promise<void>
}

// Evaluated in the worker (see DriverWorker).
// Statements are kept by text: a store makes a few shapes of them (StatementTemplate); past 256 the worker forgets
// them all and prepares afresh.
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads")
const Database = require(workerData.driver)
const db = new Database(workerData.filename, { readonly: true, fileMustExist: true, timeout: workerData.busyTimeoutMillis })
db.pragma("cache_size = -" + workerData.cacheKib)
try {
  const thread = Number(require("node:fs").readlinkSync("/proc/thread-self").split("/").pop())
  require("node:os").setPriority(thread, 19)
} catch {
  // Not Linux: the thread runs at the process's priority.
}
const statements = new Map()
parentPort.on("message", (message) => {
  if (message === "stop") {
    db.close()
    parentPort.postMessage("stopped")
    return
  }
  try {
    let statement = statements.get(message.sql)
    if (statement === undefined) {
      if (statements.size >= 256) statements.clear()
      statements.set(message.sql, statement = db.prepare(message.sql))
    }
    parentPort.postMessage({ id: message.id, rows: statement.all(message.parameters) })
  } catch (error) {
    parentPort.postMessage({ id: message.id, error: { message: String(error && error.message), code: error && error.code } })
  }
})
`

type Answer = { readonly id: number; readonly rows: Array<unknown> } | { readonly id: number; readonly error: { readonly message: string; readonly code: unknown } }

export const readWorker = (options: { readonly filename: string; readonly busyTimeoutMillis: number }): ReadWorker => {
  const waiting = new Map<number, { readonly resolve: (rows: Array<unknown>) => void; readonly reject: (error: Error) => void }>()
  let nextId = 0
  let running: DriverWorker | undefined
  const failAll = (error: Error) => {
    for (const { reject } of waiting.values()) reject(error)
    waiting.clear()
  }
  const start = (): DriverWorker => {
    const started = startDriverWorker(WORKER_SOURCE, { ...options, cacheKib: CACHE_KIB }, (answer: Answer) => {
      const waiter = waiting.get(answer.id)
      waiting.delete(answer.id)
      if (waiter === undefined) return
      if ("rows" in answer) waiter.resolve(answer.rows)
      else waiter.reject(Object.assign(new Error(answer.error.message), { code: answer.error.code }))
    })
    started.worker.on("error", failAll)
    void started.exited.then(() => {
      if (running === started) running = undefined
      failAll(new Error("the read worker ended"))
    })
    return running = started
  }
  return {
    read: <R>(query: CompiledQuery<R>) =>
      new Promise<Array<R>>((resolve, reject) => {
        const { worker } = running ?? start()
        const id = nextId++
        waiting.set(id, { resolve: resolve as (rows: Array<unknown>) => void, reject })
        worker.postMessage({ id, sql: query.sql, parameters: query.parameters })
      }),
    stop: async () => {
      const current = running
      if (current === undefined) return
      running = undefined
      await current.stop()
    }
  }
}
