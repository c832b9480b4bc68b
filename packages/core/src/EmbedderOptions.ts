/**
 * Options an embedder passes in code (a handler's `config`, `outbox`, `rateLimit`): an entry given as `undefined`
 * keeps its default, as if left out (`{ ttlSeconds: env.TTL ? Number(env.TTL) : undefined }` is the common shape),
 * and every number is checked where the options are taken, so a 0, a negative or a NaN stops the start with a
 * `RangeError` naming the setting instead of running on it: an idempotency key kept 0 seconds let a retried
 * transfer run twice, and a worker with 0 places never carried a transfer out. The server checks its environment
 * the same way before it gets here (ServerConfig).
 */

/** Options as an embedder gives them: each may be left out, or given as `undefined`. */
export type Given<T> = { readonly [K in keyof T]?: T[K] | undefined }

/** `given` without its `undefined` entries, over `defaults`. */
export const overDefaults = <T extends object>(defaults: T, given: Given<T> | undefined): T => {
  if (given === undefined) return defaults
  const defined = Object.fromEntries(Object.entries(given).filter(([, value]) => value !== undefined)) as Partial<T>
  return { ...defaults, ...defined }
}

/** `value` if it is a whole number from `least` to `most`; a RangeError naming `setting` otherwise. */
export const wholeNumber = (setting: string, value: number, least: number, most: number = Number.MAX_SAFE_INTEGER): number => {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < least || value > most) {
    const range = most === Number.MAX_SAFE_INTEGER ? `at least ${least}` : `from ${least} to ${most}`
    throw new RangeError(`${setting} must be a whole number ${range}, got ${typeof value === "number" ? String(value) : `${typeof value} ${JSON.stringify(value)}`}`)
  }
  return value
}
