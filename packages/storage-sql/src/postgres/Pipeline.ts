/**
 * Several statements sent to PostgreSQL as one round trip: each as an extended-protocol Parse, Bind, Describe and
 * Execute, and one Sync after the last. The server runs them in order and answers them all before its one
 * ReadyForQuery. node-postgres sends one statement per round trip and has no pipelining of its own
 * (brianc/node-postgres#2646), but it runs any object with a `submit(connection)` method on its connection in
 * turn (how pg-cursor and pg-query-stream work); this is such an object.
 *
 * After an error the server skips every message up to the Sync, so the statements after the failing one do not
 * run, and the pipeline fails with that error. Inside a transaction block (every pipeline of PostgresSession is)
 * the block is then aborted and only a ROLLBACK ends it.
 *
 * Each statement is sent under the name its connection keeps for its text, parsed only the first time (see
 * PreparedStatements).
 *
 * A round trip waits at most `replyTimeoutMillis` for its answer (PgParts). The server bounds what it runs
 * (`statement_timeout`, `lock_timeout`), but nothing of the server's reaches a client the network has cut off, or a
 * server that is frozen: without a bound of its own the round trip would wait until TCP gave up (many minutes),
 * holding its connection, its unit and its request. Past the bound the pipeline fails as `UnansweredReply` and closes
 * the connection: an answer that came later would be taken for the next statement's. The bound is the whole round
 * trip's, not each statement's: the server holds a pipeline's answers back until its Sync (unless they fill its
 * buffer), so the client hears nothing of the first statements before the last has run.
 */
import type { QueryResult } from "kysely"
import { type Plan, type PreparedStatements, preparedOn } from "./PreparedStatements.js"

/** One statement: its text, with $n parameters, and their values. */
export interface PipelineStatement {
  readonly sql: string
  readonly parameters: ReadonlyArray<unknown>
}

/** The part of pg's wire connection a submittable uses (pg/lib/connection.js). */
interface WireConnection {
  readonly stream: { cork?: () => void; uncork?: () => void; destroy: () => void }
  parse(message: { text: string; name: string }): void
  bind(message: { statement: string; values: ReadonlyArray<unknown>; valueMapper: (value: unknown) => unknown }): void
  describe(message: { type: "P"; name: string }): void
  execute(message: { portal: string; rows: number }): void
  close(message: { type: "S"; name: string }): void
  sync(): void
  sendCopyFail(reason: string): void
}

/** pg's Result (exported by pg as `Result`): one statement's rows and command tag. */
interface PgResult {
  readonly command: string | null
  readonly rowCount: number | null
  readonly rows: Array<Record<string, unknown>>
  addRow(row: Record<string, unknown>): void
  addCommandComplete(message: unknown): void
}

/** A column of a RowDescription message (pg-protocol's Field): its name and type. */
interface Field {
  readonly name: string
  readonly dataTypeID: number
}

/** Parses a column's text into its value: pg's type parser for the column's type (`pg.types.getTypeParser`). */
type TypeParser = (text: string) => unknown

/**
 * What pipelines are made with: pg's own Result, type parsers and parameter mapping, so values and rows mean what they
 * mean through pg's `query` (a parser set with `pg.types.setTypeParser` included).
 */
export interface PgParts {
  readonly newResult: () => PgResult
  readonly typeParser: (dataTypeID: number) => TypeParser
  readonly prepareValue: (value: unknown) => unknown
  /** How many statements each connection keeps prepared (PreparedStatements); 0 sends every one unnamed. */
  readonly preparedStatements: number
  /** How long a round trip waits for its answer before it closes the connection; 0 waits as long as TCP does. */
  readonly replyTimeoutMillis: number
}

/**
 * A round trip the server did not answer within `replyTimeoutMillis` (see the top of this file): its connection is
 * closed. The statements may have run, or may yet; a transaction of the connection's ends with it, uncommitted, unless
 * its COMMIT was among them.
 */
export class UnansweredReply extends Error {
  constructor(readonly replyTimeoutMillis: number) {
    super(`PostgreSQL did not answer within ${replyTimeoutMillis} ms; the connection was closed`)
    this.name = "UnansweredReply"
  }
}

/**
 * Arms the bound on one round trip on `stream` (see the top of this file): past `millis`, `fail` gets
 * `UnansweredReply` and the stream is destroyed. Returns what disarms it, to call when the answer comes. Unref'd: a
 * round trip waiting on the network does not keep a process alive that would otherwise end. 0 arms nothing.
 */
export const replyDeadline = (millis: number, stream: { destroy(): void }, fail: (error: UnansweredReply) => void): () => void => {
  if (millis <= 0) return () => undefined
  const timer = setTimeout(() => {
    fail(new UnansweredReply(millis))
    stream.destroy()
  }, millis)
  timer.unref()
  return () => clearTimeout(timer)
}

/** What kysely's pg driver makes of a result: the rows, and the count a write changed. */
const resultOf = (result: PgResult): QueryResult<unknown> => {
  const changes = result.command === "INSERT" || result.command === "UPDATE" || result.command === "DELETE" ||
    result.command === "MERGE"
  return changes ? { rows: result.rows, numAffectedRows: BigInt(result.rowCount ?? 0) } : { rows: result.rows }
}

/**
 * A statement's columns, read from its RowDescription: each row starts as a copy of `empty` (every column, in order,
 * so one allocation of the right shape) and its values are parsed into it. pg's own Result does the same, but builds
 * its empty row from `Object.create(null)`, an object in dictionary mode: a statement of one row of 24 columns took
 * 8.3 µs that way against 2 to 4 here (docs/benchmarks.md, "a statement's columns"). A pipeline's statements ask for text
 * results only (Bind without result formats), so every value is text.
 */
interface Columns {
  readonly names: ReadonlyArray<string>
  readonly parsers: ReadonlyArray<TypeParser>
  readonly empty: Readonly<Record<string, null>>
}

const NO_COLUMNS: Columns = { names: [], parsers: [], empty: {} }

const columnsOf = (fields: ReadonlyArray<Field>, typeParser: PgParts["typeParser"]): Columns => {
  const empty: Record<string, null> = {}
  for (const field of fields) empty[field.name] = null
  return { names: fields.map((field) => field.name), parsers: fields.map((field) => typeParser(field.dataTypeID)), empty }
}

const rowOf = ({ empty, names, parsers }: Columns, values: ReadonlyArray<string | null>): Record<string, unknown> => {
  const row: Record<string, unknown> = { ...empty }
  for (let at = 0; at < names.length; at++) {
    const text = values[at] ?? null
    if (text !== null) row[names[at]!] = parsers[at]!(text)
  }
  return row
}

/** A pg submittable running `statements` in one round trip; `done` gets every result, in order, or the error. */
export class Pipeline {
  private readonly results: Array<QueryResult<unknown>> = []
  private current: PgResult
  /** The columns of the statement whose rows are arriving. */
  private columns: Columns = NO_COLUMNS
  private failure: unknown = undefined
  /** The connection's kept statements, and how this pipeline sent its own (set by `submit`). */
  private prepared: { readonly on: PreparedStatements; readonly plan: Plan } | undefined
  /** Disarms the bound on the round trip (`replyDeadline`), armed when it is sent. */
  private disarm: () => void = () => undefined
  /** Whether `done` was called: once, with the answers, the server's error or `UnansweredReply`. */
  private finished = false

  constructor(
    private readonly parts: PgParts,
    private readonly statements: ReadonlyArray<PipelineStatement>,
    private readonly done: (error: unknown, results?: ReadonlyArray<QueryResult<unknown>>) => void
  ) {
    this.current = parts.newResult()
  }

  private finish(error: unknown, results?: ReadonlyArray<QueryResult<unknown>>): void {
    this.disarm()
    if (this.finished) return
    this.finished = true
    this.done(error, results)
  }

  submit(connection: WireConnection): null {
    // Corked, the messages leave in one write (one packet where they fit), as pg does for a single statement.
    const on = preparedOn(connection, this.parts.preparedStatements)
    const plan = on.plan(this.statements.map((statement) => statement.sql))
    this.prepared = { on, plan }
    connection.stream.cork?.()
    try {
      this.statements.forEach((statement, index) => {
        const { name, parse } = plan.statements[index] ?? { name: "", parse: true }
        if (parse) connection.parse({ text: statement.sql, name })
        connection.bind({ statement: name, values: statement.parameters, valueMapper: this.parts.prepareValue })
        connection.describe({ type: "P", name: "" })
        connection.execute({ portal: "", rows: 0 })
      })
      // After the statements, so an error before them skips these too and the names stay to be closed later.
      for (const name of plan.closing) connection.close({ type: "S", name })
      connection.sync()
    } finally {
      connection.stream.uncork?.()
    }
    // Past the bound the pipeline fails, and the connection closes (pg then fails whatever else waits on it).
    this.disarm = replyDeadline(this.parts.replyTimeoutMillis, connection.stream, (error) => this.finish(error))
    return null
  }

  handleRowDescription(message: { fields: ReadonlyArray<Field> }): void {
    this.columns = columnsOf(message.fields, this.parts.typeParser)
  }

  handleDataRow(message: { fields: ReadonlyArray<string | null> }): void {
    if (this.failure !== undefined) return
    try {
      this.current.addRow(rowOf(this.columns, message.fields))
    } catch (cause) {
      this.failure = cause
    }
  }

  handleCommandComplete(message: unknown): void {
    this.current.addCommandComplete(message)
    this.results.push(resultOf(this.current))
    this.current = this.parts.newResult()
  }

  handleEmptyQuery(): void {
    this.results.push({ rows: [] })
    this.current = this.parts.newResult()
  }

  /** The server's error; pg stops calling this pipeline after it, and the ReadyForQuery that follows is not ours. */
  handleError(error: unknown): void {
    if (this.finished) return
    this.prepared?.on.failed(this.prepared.plan, error)
    this.finish(this.failure ?? error)
  }

  handleReadyForQuery(): void {
    if (this.finished) return
    // The server ran every statement (a failure here is reading a row), so it holds what it parsed.
    this.prepared?.on.succeeded(this.prepared.plan)
    if (this.failure !== undefined) this.finish(this.failure)
    else this.finish(undefined, this.results)
  }

  handlePortalSuspended(): void {}

  handleCopyInResponse(connection: WireConnection): void {
    connection.sendCopyFail("a pipeline sends no COPY data")
  }

  handleCopyData(): void {}
}
