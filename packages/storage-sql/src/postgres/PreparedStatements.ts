/**
 * Statements a PostgreSQL connection keeps prepared, by their text. An unnamed statement is parsed, analysed and
 * planned again at every run; a named one is parsed once per connection and then only bound and run, and after five
 * runs PostgreSQL may keep a generic plan (its `plan_cache_mode`). The relay runs the same few dozen statements all
 * the time, so most Parse messages are work thrown away: with them kept, a node on a local PostgreSQL served 1.4 to
 * 1.7 times the requests a second (`bench:pair`), and a deep page's p99 under two writers fell by a quarter to a
 * third (`bench:storage`; docs/benchmarks.md). pgx, postgres.js and JDBC do the same by default.
 *
 * - Names are given out once per process (`cr1`, `cr2`, ...), so a name is never reused for another text.
 * - A name is kept only once the pipeline that parsed it succeeded; one that failed may have parsed some of its
 *   statements before its error, so their names are closed later (Close of a name the server does not have is no
 *   error).
 * - A connection keeps at most `capacity` statements: a new one then takes the place of the one used least recently,
 *   whose name is closed. Statements a connection runs once (texts that vary) cannot crowd out the ones it runs all
 *   the time for longer than those go unused.
 * - A schema change can make a kept plan invalid: PostgreSQL then refuses it ("cached plan must not change result
 *   type", 0A000), and a pooler that reset the session no longer has it (26000). Either makes the connection forget
 *   every name it kept (and close them), and the unit fails as a lost race, so the storage runs it again
 *   (classifyPostgresError), now parsing afresh.
 * - Capacity 0 keeps nothing: for a pooler in transaction mode that does not carry prepared statements between
 *   clients (PgBouncer before 1.21, or without `max_prepared_statements`).
 */

import * as StorageFailure from "../StorageFailure.js"

/** How one pipeline sends one statement: by a kept name, parsed under a new name, or unnamed (`name` ""). */
export interface Prepared {
  readonly name: string
  readonly parse: boolean
}

/** Whether `cause` says the connection's kept statements are no longer valid (see the module's comment). */
export const invalidatesKept = (cause: unknown): boolean => {
  const code = StorageFailure.codeOf(cause)
  if (code === "26000") return true
  return code === "0A000" && typeof cause === "object" && cause !== null && "message" in cause && typeof cause.message === "string" &&
    cause.message.includes("cached plan")
}

/** How one pipeline sends its statements (`statements`, in order), the new names it parses, by text, and the names it closes. */
export interface Plan {
  readonly statements: ReadonlyArray<Prepared>
  readonly parsed: ReadonlyMap<string, string>
  readonly closing: ReadonlyArray<string>
}

let lastName = 0

export class PreparedStatements {
  readonly #kept = new Map<string, string>()
  /** Names the server may hold that nothing uses any more: closed with the next pipeline. */
  #stale: Array<string> = []

  constructor(readonly capacity: number) {}

  /**
   * How to send each of `texts` in one pipeline, and the stale names to close in it. A kept statement it uses becomes
   * the most recently used; a new one, when the connection is full, evicts the least recently used (closed later).
   */
  plan(texts: ReadonlyArray<string>): Plan {
    const fresh = new Map<string, string>()
    const statements = texts.map((text): Prepared => {
      const kept = this.#kept.get(text)
      if (kept !== undefined) {
        // A Map iterates in insertion order: re-inserted, the text is the last to be evicted.
        this.#kept.delete(text)
        this.#kept.set(text, kept)
        return { name: kept, parse: false }
      }
      const parsedHere = fresh.get(text)
      if (parsedHere !== undefined) return { name: parsedHere, parse: false }
      // More new statements in one pipeline than a connection keeps: the rest go unnamed.
      if (fresh.size >= this.capacity) return { name: "", parse: true }
      const name = `cr${++lastName}`
      fresh.set(text, name)
      return { name, parse: true }
    })
    // Room for what this pipeline parses: the least recently used kept statements go, closed with this pipeline
    // (after its statements, so none of them is closed before it runs).
    const evicted: Array<string> = []
    for (const [text, name] of this.#kept) {
      if (this.#kept.size + fresh.size <= this.capacity) break
      this.#kept.delete(text)
      evicted.push(name)
    }
    if (evicted.length > 0) this.#stale = [...this.#stale, ...evicted]
    return { statements, parsed: fresh, closing: this.#stale }
  }

  /** The pipeline sent as `plan` said succeeded: its new names are kept, its closed ones are gone. */
  succeeded(plan: Plan): void {
    for (const [text, name] of plan.parsed) this.#kept.set(text, name)
    if (plan.closing.length > 0) this.#stale = this.#stale.filter((name) => !plan.closing.includes(name))
  }

  /** The pipeline failed with `cause`: its new names are closed later, and every kept one too if `cause` invalidates them. */
  failed(plan: Plan, cause: unknown): void {
    const forgotten = invalidatesKept(cause) ? [...this.#kept.values()] : []
    if (forgotten.length > 0) this.#kept.clear()
    this.#stale = [...new Set([...this.#stale, ...plan.parsed.values(), ...forgotten])]
  }
}

const onConnection = new WeakMap<object, PreparedStatements>()

/** The statements `connection` keeps (none yet on a new one). */
export const preparedOn = (connection: object, capacity: number): PreparedStatements => {
  let prepared = onConnection.get(connection)
  if (prepared === undefined) {
    prepared = new PreparedStatements(capacity)
    onConnection.set(connection, prepared)
  }
  return prepared
}
