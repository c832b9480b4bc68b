/**
 * `Schema.TaggedError` for the domain's expected refusals (RelayError.ts) and the HTTP adapter's (HttpError.ts):
 * the same class, built without a stack trace. A refusal is a value the caller is answered with (a 4xx), never a
 * bug to trace, yet as an `Error` it captured a stack on every `new`: about 9 µs on our VM, a third of what a 401
 * costs in-process, paid in full by a flood of bad credentials (0.8 µs without). Infrastructure failures
 * (`StorageError`) and defects keep their stacks.
 */
import { Schema } from "effect"

type AnyClass = new(...args: ReadonlyArray<unknown>) => object
type ClassFactory = (identifier?: string) => (tag: string, schema: unknown, annotations?: unknown) => AnyClass

const stackTraceLimitIsWritable = (): boolean => {
  const descriptor = Object.getOwnPropertyDescriptor(Error, "stackTraceLimit")
  return descriptor === undefined ? Object.isExtensible(Error) : descriptor.writable === true || descriptor.set !== undefined
}

const canSilence = stackTraceLimitIsWritable()

const untyped: ClassFactory = (identifier) => (tag, schema, annotations) => {
  const Base = (Schema.TaggedError as unknown as ClassFactory)(identifier)(tag, schema, annotations)
  if (!canSilence) return Base
  return class extends Base {
    constructor(...args: ReadonlyArray<unknown>) {
      const limit = Error.stackTraceLimit
      Error.stackTraceLimit = 0
      try {
        super(...args)
      } catch (cause) {
        // Fields the class refuses are a bug at the call site: that error keeps a stack pointing at it.
        Error.stackTraceLimit = limit
        throw new TypeError(`${tag}: fields refused by its schema`, { cause })
      } finally {
        Error.stackTraceLimit = limit
      }
    }
  }
}

/** Use as `class NotFound extends TaggedRefusal<NotFound>()("NotFound", { ... }) {}`. */
export const TaggedRefusal = untyped as unknown as typeof Schema.TaggedError
