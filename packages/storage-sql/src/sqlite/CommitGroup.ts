/**
 * Group commit on the one SQLite connection: write units that run while a transaction is open share its COMMIT.
 *
 * Half of a write unit's time on SQLite is its commit appending the pages it changed to the WAL, one frame each:
 * an initiation changes about 20 pages (the transaction row and its indexes, the events, the balance), and the
 * commit writes them all, 78 of 237 µs measured (docs/benchmarks.md). Units that commit one after another change
 * mostly the same pages (the right edge of each time-ordered index, the same account), so one commit for several
 * writes each page once.
 *
 * How: the first write unit begins the transaction (BEGIN IMMEDIATE) and, when it succeeds, leaves it open; its
 * commit is scheduled for the end of the event loop's turn (`setImmediate`). Each write unit that takes the
 * connection before then runs inside a savepoint of the same transaction: a unit that fails rolls back to its
 * savepoint and leaves the others alone; one that succeeds releases it. One COMMIT then ends the group, and only
 * then does any member's unit succeed: nothing is answered before it is durable, and a failed commit fails every
 * member (nothing of the group was written, so each may be run again). Anything else that needs the connection
 * (a read unit, kysely's statements, closing the file) commits the open group first, so no one else ever sees
 * the group's writes before they are committed. Lookups read through the second, read-only connection and see
 * what is committed (see SqliteSession).
 *
 * The caller of every public method holds the connection's gate; the commit scheduled for the end of the turn
 * takes the gate itself, behind whoever holds it.
 */
import type { Storage } from "@custody-relay/core"
import type { SqliteDatabase } from "kysely"
import * as StorageFailure from "../StorageFailure.js"
import { classifySqliteError } from "./classifySqliteError.js"
import type { ConnectionGate } from "./ConnectionGate.js"

/** A unit's place in the group: it began the transaction, or it runs in a savepoint of it. */
export type Part = "began" | "savepoint"

type Settle = (failure: Storage.StorageError | undefined) => void

/** A group that ended: its members, and what failed them if its commit did. */
interface Ended {
  readonly members: ReadonlyArray<Settle>
  readonly failure: Storage.StorageError | undefined
}

const statement = (database: SqliteDatabase, sql: string) => {
  const prepared = database.prepare(sql)
  return () => {
    prepared.run([])
  }
}

export class CommitGroup {
  readonly #gate: ConnectionGate
  readonly #inTransaction: () => boolean
  readonly #begin: () => void
  readonly #commit: () => void
  readonly #rollback: () => void
  readonly #savepoint: () => void
  readonly #releaseSavepoint: () => void
  readonly #rollbackToSavepoint: () => void
  /** Whether a group's transaction is open on the connection. */
  #open = false
  /** The units whose writes the open transaction holds, waiting for its commit. */
  #members: Array<Settle> = []
  readonly #flushWhenFree = () => {
    if (!this.#open) return
    if (this.#gate.tryTake()) this.#flushAndGive()
    else void this.#gate.take().then(() => this.#flushAndGive())
  }

  constructor(database: SqliteDatabase, inTransaction: () => boolean, gate: ConnectionGate) {
    this.#gate = gate
    this.#inTransaction = inTransaction
    this.#begin = statement(database, "begin immediate")
    this.#commit = statement(database, "commit")
    this.#rollback = statement(database, "rollback")
    this.#savepoint = statement(database, "savepoint write_unit")
    this.#releaseSavepoint = statement(database, "release write_unit")
    this.#rollbackToSavepoint = statement(database, "rollback to write_unit")
  }

  /** Starts a write unit: in the open group's transaction, or in a new one. Throws what SQLite threw. */
  enter(): Part {
    if (this.#open) {
      this.#savepoint()
      return "savepoint"
    }
    this.#begin()
    return "began"
  }

  /**
   * The unit succeeded: its writes join the group, and `settle` is called once the group's COMMIT has run, with
   * its failure if it failed. Throws (the unit is then still the gate's holder and must `abandon`) when its
   * transaction is gone or its savepoint cannot be released.
   */
  keep(part: Part, settle: Settle): void {
    // SQLite ends the whole transaction on some errors (a full disk, an I/O error); a unit that went on after one
    // has nothing left to keep, and a later SAVEPOINT would begin a transaction of its own.
    if (!this.#inTransaction()) throw new Error("SQLite ended the write unit's transaction before it was kept")
    if (part === "savepoint") this.#releaseSavepoint()
    this.#members.push(settle)
    if (!this.#open) {
      this.#open = true
      setImmediate(this.#flushWhenFree)
    }
  }

  /** The unit failed: its writes are undone, the group's others kept. Never throws. */
  abandon(part: Part): void {
    try {
      if (part === "began") {
        if (this.#inTransaction()) this.#rollback()
        return
      }
      this.#rollbackToSavepoint()
      this.#releaseSavepoint()
    } catch {
      // SQLite ended the whole transaction on an error (a full disk, an I/O error); the check below sees to it.
    }
    if (part === "savepoint" && !this.#inTransaction()) {
      this.#settle(this.#takeMembers(StorageFailure.conflict(new Error("SQLite rolled back a group of write units on another unit's error"))))
    }
  }

  /** Commits the open group now, if there is one. */
  flush(): void {
    const ended = this.#end()
    if (ended !== undefined) this.#settle(ended)
  }

  /** Commits the open group (rolling it back if the commit fails) and takes its members out of it. */
  #end(): Ended | undefined {
    if (!this.#open) return undefined
    let failure: Storage.StorageError | undefined
    try {
      this.#commit()
    } catch (cause) {
      failure = classifySqliteError(cause)
      try {
        if (this.#inTransaction()) this.#rollback()
      } catch {
        // A rollback that fails leaves nothing open: SQLite has ended the transaction.
      }
    }
    return this.#takeMembers(failure)
  }

  #takeMembers(failure: Storage.StorageError | undefined): Ended {
    this.#open = false
    const members = this.#members
    this.#members = []
    return { members, failure }
  }

  #settle({ failure, members }: Ended): void {
    for (const settle of members) settle(failure)
  }

  #flushAndGive(): void {
    let ended: Ended | undefined
    try {
      ended = this.#end()
    } finally {
      // Given back before the members resume: a member's fiber may run on at once and take it again.
      this.#gate.give()
    }
    if (ended !== undefined) this.#settle(ended)
  }
}
