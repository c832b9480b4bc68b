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

const MARK = "\u0000"

const compileTemplate = <V extends object, R>(
  build: (values: V) => Compilable<R>,
  names: ReadonlyArray<string>
): Template<R> | null => {
  // The markers stand in for V's values only while kysely compiles; the check below proves where each one went.
  const markers = Object.fromEntries(names.map((name) => [name, MARK + name])) as V
  const compiled = build(markers).compile()
  const order = compiled.parameters.map((parameter) =>
    typeof parameter === "string" && parameter.startsWith(MARK) ? parameter.slice(MARK.length) : undefined
  )
  const exact = new Set(order).size === names.length && order.every((name) => name !== undefined && names.includes(name))
  return exact ? { compiled, order: order as ReadonlyArray<string> } : null
}

/**
 * `build` as a statement compiled once per set of value names. Values that are `undefined` are left out, as kysely
 * leaves them out of an insert or an update.
 */
export const byColumns = <V extends object, R = unknown>(build: (values: V) => Compilable<R>) => {
  const templates = new Map<string, Template<R> | null>()
  return (values: V): Compilable<R> => ({
    compile() {
      const record = values as Readonly<Record<string, unknown>>
      const names = Object.keys(record).filter((name) => record[name] !== undefined)
      const shape = names.join(",")
      let template = templates.get(shape)
      if (template === undefined) {
        template = compileTemplate(build, names)
        if (templates.size < MAX_SHAPES) templates.set(shape, template)
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
