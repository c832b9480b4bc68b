/**
 * Lookups on the read-only connection share one read transaction, for at most the rest of the event loop's turn,
 * and only while nothing has committed since it began.
 *
 * On its own, each statement on a WAL file is a read transaction of its own: SQLite takes a read lock on the WAL
 * index, checks the WAL file and lets the lock go, three system calls around a statement that itself takes about two
 * microseconds (docs/benchmarks.md). Lookups that share a read transaction pay them once.
 *
 * What a lookup reads is still what is committed when its request is served:
 * - Every request checks its credential first, and that check reads the file's commit version (`currentVersion`)
 *   on a connection of its own, in a statement of its own: the one read per request that takes the lock. When the
 *   version moved since the shared transaction began, whoever committed (this process, another server, the operator
 *   CLI), the transaction ends there and the request's lookups begin a new one. So a change of permissions, or any
 *   other, applies to the next request (AUTH-PERM-2), exactly as when every statement was its own.
 * - This process's own commits end it too (`end`, told by the commit group and by kysely's use of the writer), so a
 *   request that committed and then looks up sees its own writes.
 * - It never outlives the turn: it ends at `setImmediate`, before the loop waits for anything, so a lookup with no
 *   request before it (a background worker's) sees what was committed by the turn it runs in, and the checkpointer
 *   is never held back for longer than a turn.
 */
import type { SqliteDatabase } from "kysely"

export class LookupSnapshot {
  readonly #begin: () => void
  readonly #commit: () => void
  readonly #inTransaction: () => boolean
  readonly #version: () => number
  /** The commit version last read. */
  #checked: number | undefined
  /** A version read before the open transaction began; while the file is still at it, the transaction is current. */
  #since: number | undefined
  #scheduled = false
  readonly #endAtTurnEnd = () => {
    this.#scheduled = false
    this.end()
  }

  constructor(
    /** The read-only connection (with its statement cache) that lookups read through. */
    readonly reader: SqliteDatabase,
    inTransaction: () => boolean,
    /** The file's commit version read now, in a statement of its own, on a connection that never writes. */
    version: () => number
  ) {
    const begin = reader.prepare("begin deferred")
    const commit = reader.prepare("commit")
    this.#begin = () => {
      begin.run([])
    }
    this.#commit = () => {
      commit.run([])
    }
    this.#inTransaction = inTransaction
    this.#version = version
  }

  /** Before a lookup's statement: the shared read transaction, begun now if none is open. Throws what SQLite threw. */
  enter(): void {
    if (this.#inTransaction()) return
    this.#begin()
    this.#since = this.#checked
    if (!this.#scheduled) {
      this.#scheduled = true
      setImmediate(this.#endAtTurnEnd)
    }
  }

  /**
   * The file's commit version now (PRAGMA data_version, which moves with every commit of any other connection); the
   * shared transaction ends if anything committed since it began. Throws what SQLite threw.
   */
  currentVersion(): number {
    const version = this.#version()
    if (version !== this.#since) this.end()
    this.#checked = version
    return version
  }

  /** Ends the shared read transaction, if one is open: the next lookup sees every commit made so far. Never throws. */
  end(): void {
    this.#since = undefined
    if (!this.#inTransaction()) return
    try {
      this.#commit()
    } catch {
      // Ending a read transaction releases a lock; one SQLite has already ended leaves nothing to release.
    }
  }
}
