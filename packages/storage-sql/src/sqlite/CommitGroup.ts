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
 * connection before then joins the same transaction. One COMMIT then ends the group, and only then does any
 * member's unit succeed: nothing is answered before it is durable, and a failed commit fails every member (nothing
 * of the group was written, so each may be run again). Anything else that needs the connection (a read unit,
 * kysely's statements, closing the file) commits the open group first, so no one else ever sees the group's writes
 * before they are committed. Lookups read through the second, read-only connection and see what is committed (see
 * SqliteSession).
 *
 * A unit that fails must leave no trace. Most fail before they change anything (a refusal is decided on what the
 * unit read, and a statement that fails is undone by SQLite itself), and then the group goes on untouched. One
 * that fails after a statement of its own changed rows (the session reports each, `wrote`) is undone by rolling
 * back the whole group, and every member kept so far fails with a conflict, which the storage's retry runs again
 * at once. Savepoints would undo the unit alone, but cost every joining unit a tenth of an initiation's time
 * (journalling each page it changes, and two statements), to spare a re-run that almost never happens.
 *
 * A failure is answered on what is committed, like a success (`failed`). A unit that joined read what the group's
 * earlier units wrote, uncommitted: a refusal for want of funds that an earlier unit reserved rests on that
 * reservation. Answered at once, it would stand even if the group then never committed (the process killed before
 * the COMMIT, the commit failed, a later unit undid the group), and a retry of the same request would then succeed:
 * one idempotency key answered both ways (TXN-INIT-1). So a joined unit's failure waits for its group's COMMIT, and
 * when the group does not commit, the unit fails as the group's members do, to be run again on what is committed.
 *
 * The caller of every public method holds the connection's gate; the commit scheduled for the end of the turn
 * takes the gate itself, behind whoever holds it.
 */
import type { Storage } from "@custody-relay/core"
import type { SqliteDatabase } from "kysely"
import * as StorageFailure from "../StorageFailure.js"
import { classifySqliteError } from "./classifySqliteError.js"
import type { ConnectionGate } from "./ConnectionGate.js"

/** A unit's place in the group: it began the transaction, or it joined one already open. */
export type Part = "began" | "joined"

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
  /** Told after each group's end, committed or rolled back (see LookupSnapshot). */
  readonly #ended: () => void
  /** Whether a group's transaction is open on the connection. */
  #open = false
  /** Whether the running unit changed rows (see `wrote`). */
  #unitWrote = false
  /** The units whose writes the open transaction holds, waiting for its commit. */
  #members: Array<Settle> = []
  readonly #flushWhenFree = () => {
    if (!this.#open) return
    if (this.#gate.tryTake()) this.#flushAndGive()
    else void this.#gate.take().then(() => this.#flushAndGive())
  }

  constructor(database: SqliteDatabase, inTransaction: () => boolean, gate: ConnectionGate, ended: () => void = () => {}) {
    this.#gate = gate
    this.#ended = ended
    this.#inTransaction = inTransaction
    this.#begin = statement(database, "begin immediate")
    this.#commit = statement(database, "commit")
    this.#rollback = statement(database, "rollback")
  }

  /** Starts a write unit: in the open group's transaction, or in a new one. Throws what SQLite threw. */
  enter(): Part {
    this.#unitWrote = false
    if (this.#open) return "joined"
    this.#begin()
    return "began"
  }

  /** A statement of the running unit changed rows: undoing the unit now means undoing its group. */
  wrote(): void {
    this.#unitWrote = true
  }

  /**
   * The unit succeeded: its writes join the group, and `settle` is called once the group's COMMIT has run, with
   * its failure if it failed. Throws (the unit is then still the gate's holder and must `abandon`) when its
   * transaction is gone.
   */
  keep(settle: Settle): void {
    // SQLite ends the whole transaction on some errors (a full disk, an I/O error); a unit that went on after one
    // has nothing left to keep, and the group's later units would run outside any transaction.
    if (!this.#inTransaction()) throw new Error("SQLite ended the write unit's transaction before it was kept")
    this.#members.push(settle)
    if (!this.#open) {
      this.#open = true
      setImmediate(this.#flushWhenFree)
    }
  }

  /**
   * The unit failed: its writes are undone. The group's others are kept when the unit changed nothing; otherwise
   * the group is rolled back and each of them fails with a conflict, to be run again. Never throws.
   */
  abandon(part: Part): void {
    if (part === "joined" && !this.#unitWrote && this.#inTransaction()) return
    try {
      if (this.#inTransaction()) this.#rollback()
    } catch {
      // A rollback that fails leaves nothing open: SQLite has ended the transaction.
    }
    // A unit that began the group is its only unit so far: members join only after it was kept.
    if (part === "joined") {
      this.#settle(this.#takeMembers(StorageFailure.conflict(new Error("the group of write units was rolled back to undo another unit's writes"))))
    }
  }

  /**
   * The unit failed with a failure to answer its caller: its writes are undone, as `abandon` does. Answers when that
   * failure may be answered: now (`{ replacedBy: undefined }`), now replaced by another failure, or, when it answers
   * undefined, once the group ends, through `settle` as a kept unit learns it. A unit that began the group read only
   * what is committed: now. One that joined and changed nothing waits for the group's COMMIT and fails with its
   * failure if it fails; one that joined and changed rows rolled the group back, so what it read is gone: it fails
   * with a conflict now, like the members it undid. Never throws.
   */
  failed(part: Part, settle: Settle): { readonly replacedBy: Storage.StorageError | undefined } | undefined {
    if (part === "joined" && !this.#unitWrote && this.#inTransaction()) {
      this.#members.push(settle)
      return undefined
    }
    this.abandon(part)
    return {
      replacedBy: part === "began" ? undefined : StorageFailure.conflict(new Error("the group of write units this unit read from was rolled back"))
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
    this.#ended()
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
