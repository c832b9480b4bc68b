/**
 * A worker thread with a better-sqlite3 connection of its own (the WAL checkpointer, the read worker). Its source is
 * plain CommonJS evaluated in the worker, which loads the driver from the path this thread gives it
 * (`workerData.driver`), so bundling never moves it. The thread never keeps a process alive that is otherwise done.
 * Stopping it posts "stop": the worker finishes what it does on stopping, closes its connection and answers
 * "stopped", and the thread is then ended.
 */
import { createRequire } from "node:module"
import { Worker } from "node:worker_threads"

export interface DriverWorker {
  readonly worker: Worker
  /** Settles once the thread has ended, however it ended. */
  readonly exited: Promise<void>
  /** Stops the worker (once, whoever asks again) and waits until its thread has ended. */
  readonly stop: () => Promise<void>
}

/** Starts `source` with `data` and the driver's path as its `workerData`; `onMessage` gets every message but "stopped". */
export const startDriverWorker = <M>(source: string, data: Readonly<Record<string, unknown>>, onMessage: (message: M) => void): DriverWorker => {
  const driver = createRequire(import.meta.url).resolve("better-sqlite3")
  const worker = new Worker(source, { eval: true, workerData: { ...data, driver } })
  worker.unref()
  const exited = new Promise<void>((resolve) => {
    worker.once("exit", () => resolve())
    worker.once("error", () => resolve())
  })
  worker.on("message", (message: M | "stopped") => {
    if (message === "stopped") void worker.terminate()
    else onMessage(message)
  })
  let stopped: Promise<void> | undefined
  return {
    worker,
    exited,
    stop: () => {
      if (stopped === undefined) {
        worker.postMessage("stop")
        stopped = exited
      }
      return stopped
    }
  }
}
