/**
 * Statements whose SQL depends only on which columns they name (an insert of a row, an update of some columns, a
 * lookup by one key), compiled by kysely once per set of column names and then run with each call's values:
 * building and compiling a statement costs more than running it on SQLite.
 *
 * A template is compiled with a marker in place of every value and kept only if its parameters are all markers and
 * every value's marker is among them: each parameter is then bound to the value whose marker stood there, so a
 * value a statement names twice (a list's filter, in its page and in its total) is bound at both places. Should
 * kysely ever inline a value, that statement is compiled per call instead, so a template can never bind a value to
 * the wrong place.
 */
import type { Compilable, CompiledQuery } from "kysely"

interface Template<R> {
  readonly compiled: CompiledQuery<R>
  /** The value names in parameter order; a name is there twice where the statement binds its value twice. */
  readonly order: ReadonlyArray<string>
}

/** Distinct column sets kept per statement; beyond this a new shape is compiled per call (no unbounded growth). */
const MAX_SHAPES = 64

/**
 * A statement's templates, by shape: the number of rows and the names of the columns, in order. A shape is found
 * by comparing names one by one rather than by a key joined from them: a record's keys are the same interned
 * strings call after call, so each comparison is a pointer's, where a joined key is a new string to build and hash
 * at every call (about a third of an insert's compiling, measured in docs/benchmarks.md).
 */
class Shapes<T> {
  readonly #kept: Array<{ readonly rows: number; readonly names: ReadonlyArray<string>; readonly template: T }> = []

  find(rows: number, names: ReadonlyArray<string>): T | undefined {
    for (const shape of this.#kept) {
      if (shape.rows === rows && sameNames(shape.names, names)) return shape.template
    }
    return undefined
  }

  keep(rows: number, names: ReadonlyArray<string>, template: T): void {
    if (this.#kept.length < MAX_SHAPES) this.#kept.push({ rows, names, template })
  }
}

const sameNames = (kept: ReadonlyArray<string>, names: ReadonlyArray<string>): boolean => {
  if (kept.length !== names.length) return false
  for (let at = 0; at < names.length; at++) if (kept[at] !== names[at]) return false
  return true
}

const MARK = "\u0000"

/** What stands in for the value named `name` while kysely compiles a template. */
const marker = (name: string): string => MARK + name

/**
 * `compile` run on markers in place of the values `names` name (see `marker`), kept as a template only when every
 * parameter is a marker and every name's marker is among them.
 */
const compileTemplate = <R>(compile: () => CompiledQuery<R>, names: ReadonlyArray<string>): Template<R> | null => {
  // The markers stand in for the values only while kysely compiles; the check below proves where each one went.
  const compiled = compile()
  const order = compiled.parameters.map((parameter) =>
    typeof parameter === "string" && parameter.startsWith(MARK) ? parameter.slice(MARK.length) : undefined
  )
  const exact = new Set(order).size === names.length && order.every((name) => name !== undefined && names.includes(name))
  return exact ? { compiled, order: order as ReadonlyArray<string> } : null
}

/** The names of `record`'s values that are not `undefined`: the columns kysely writes for it. */
const definedNames = (record: object): Array<string> => {
  const values = record as Readonly<Record<string, unknown>>
  return Object.keys(values).filter((name) => values[name] !== undefined)
}

/**
 * `build` as a statement compiled once per set of value names. Values that are `undefined` are left out, as kysely
 * leaves them out of an insert or an update.
 */
export const byColumns = <V extends object, R = unknown>(build: (values: V) => Compilable<R>) => {
  const templates = new Shapes<Template<R> | null>()
  return (values: V): Compilable<R> => ({
    compile() {
      const record = values as Readonly<Record<string, unknown>>
      const names = definedNames(record)
      let template = templates.find(1, names)
      if (template === undefined) {
        template = compileTemplate(() => build(Object.fromEntries(names.map((name) => [name, marker(name)])) as V).compile(), names)
        templates.keep(1, names, template)
      }
      if (template === null) return build(values).compile()
      return { ...template.compiled, parameters: template.order.map((name) => record[name]) }
    }
  })
}

/**
 * A lookup by one key whose shape never changes, compiled once and then run with each call's key (the same check
 * as `byColumns`, without building a record of values for every call).
 */
export const byKey = <K extends string, R>(build: (key: K) => Compilable<R>) => {
  const placeholder = (MARK + "key") as K
  let template: CompiledQuery<R> | null | undefined
  return (key: K): Compilable<R> => ({
    compile() {
      if (template === undefined) {
        const compiled = build(placeholder).compile()
        template = compiled.parameters.length === 1 && compiled.parameters[0] === placeholder ? compiled : null
      }
      return template === null ? build(key).compile() : { ...template, parameters: [key] }
    }
  })
}

/** A template of an insert of several rows: for each parameter, the row and the column whose value it binds. */
interface RowsTemplate<R> {
  readonly compiled: CompiledQuery<R>
  readonly rows: ReadonlyArray<number>
  readonly columns: ReadonlyArray<string>
}

/** Whether `row`'s values that are not `undefined` are exactly those `names` name. */
const namesExactly = (row: object, names: ReadonlyArray<string>): boolean => {
  const values = row as Readonly<Record<string, unknown>>
  let defined = 0
  for (const name in values) if (values[name] !== undefined) defined++
  return defined === names.length && names.every((name) => values[name] !== undefined)
}

/**
 * An insert of several rows in one statement (`build` given them all), compiled once per number of rows and set of
 * columns, then run with each call's rows, read in place (no record of values is built per call). Rows that do not
 * all name the same columns, which kysely fills in with defaults, are compiled per call.
 */
export const byRows = <Row extends object, R = unknown>(build: (rows: ReadonlyArray<Row>) => Compilable<R>) => {
  const templates = new Shapes<RowsTemplate<R> | null>()
  const compileRows = (count: number, columns: ReadonlyArray<string>): RowsTemplate<R> | null => {
    // Each value's marker names its row and column: `<row>#<column>`.
    const named = Array.from({ length: count }, (_, row) => columns.map((column) => `${row}#${column}`))
    const template = compileTemplate(
      () => build(named.map((names) => Object.fromEntries(names.map((name, at) => [columns[at], marker(name)])) as Row)).compile(),
      named.flat()
    )
    if (template === null) return null
    return {
      compiled: template.compiled,
      rows: template.order.map((name) => Number(name.slice(0, name.indexOf("#")))),
      columns: template.order.map((name) => name.slice(name.indexOf("#") + 1))
    }
  }
  return (rows: ReadonlyArray<Row>): Compilable<R> => ({
    compile() {
      const first = rows[0]
      if (first === undefined) return build(rows).compile()
      const columns = definedNames(first)
      if (!rows.every((row) => namesExactly(row, columns))) return build(rows).compile()
      let template = templates.find(rows.length, columns)
      if (template === undefined) {
        template = compileRows(rows.length, columns)
        templates.keep(rows.length, columns, template)
      }
      if (template === null) return build(rows).compile()
      const parameters = new Array<unknown>(template.rows.length)
      for (let at = 0; at < parameters.length; at++) {
        parameters[at] = (rows[template.rows[at] as number] as Readonly<Record<string, unknown>>)[template.columns[at] as string]
      }
      return { ...template.compiled, parameters }
    }
  })
}
