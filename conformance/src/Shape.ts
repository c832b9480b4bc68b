/**
 * Small structural validators for wire records. Each returns a list of problems (empty when the value fits), so a
 * check can report every field that is off at once instead of stopping at the first.
 */
export type Validator = (value: unknown, path: string) => Array<string>

export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
export const isUuid = (value: unknown): value is string => typeof value === "string" && uuidPattern.test(value)

/** ISO 8601 date-time in UTC (GEN-TIME-1): `Z` or a zero offset. */
const isoUtcPattern = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]00:?00)$/
export const isIsoUtc = (value: unknown): value is string =>
  typeof value === "string" && isoUtcPattern.test(value) && !Number.isNaN(Date.parse(value))

/** A plain decimal string (GEN-DEC-1): digits, an optional fraction, no exponent. */
const decimalPattern = /^-?\d+(\.\d+)?$/
export const isDecimalString = (value: unknown): value is string => typeof value === "string" && decimalPattern.test(value)

export const string: Validator = (value, path) => (typeof value === "string" ? [] : [`${path} should be a string, got ${describe(value)}`])
export const nonEmptyString: Validator = (value, path) =>
  typeof value === "string" && value.length > 0 ? [] : [`${path} should be a non-empty string, got ${describe(value)}`]
export const nullableString: Validator = (value, path) =>
  value === null || typeof value === "string" ? [] : [`${path} should be a string or null, got ${describe(value)}`]
export const uuid: Validator = (value, path) => (isUuid(value) ? [] : [`${path} should be a uuid, got ${describe(value)}`])
export const timestamp: Validator = (value, path) =>
  isIsoUtc(value) ? [] : [`${path} should be an ISO 8601 UTC timestamp (GEN-TIME-1), got ${describe(value)}`]
export const nullableTimestamp: Validator = (value, path) => (value === null ? [] : timestamp(value, path))
export const decimalString: Validator = (value, path) =>
  isDecimalString(value) ? [] : [`${path} should be a decimal string (GEN-DEC-1), got ${describe(value)}`]
export const integer: Validator = (value, path) =>
  typeof value === "number" && Number.isInteger(value) ? [] : [`${path} should be an integer, got ${describe(value)}`]
export const jsonNumber: Validator = (value, path) =>
  typeof value === "number" && Number.isFinite(value) ? [] : [`${path} should be a JSON number, got ${describe(value)}`]
export const oneOf =
  (values: ReadonlyArray<string>): Validator =>
  (value, path) =>
    typeof value === "string" && values.includes(value) ? [] : [`${path} should be one of ${values.join(", ")}, got ${describe(value)}`]
export const literal =
  (expected: unknown): Validator =>
  (value, path) =>
    value === expected ? [] : [`${path} should be ${JSON.stringify(expected)}, got ${describe(value)}`]
export const anyValue: Validator = () => []
export const array =
  (item: Validator): Validator =>
  (value, path) =>
    Array.isArray(value) ? value.flatMap((element, index) => item(element, `${path}[${index}]`)) : [`${path} should be an array, got ${describe(value)}`]

/**
 * An object with exactly (`exact`) or at least these fields. Exactness is used where the interface lists what a
 * response carries "only" (ACC-SHAPE-2).
 */
export const object =
  (fields: Readonly<Record<string, Validator>>, options: { readonly exact?: boolean; readonly forbidden?: ReadonlyArray<string> } = {}): Validator =>
  (value, path) => {
    if (!isRecord(value)) return [`${path} should be an object, got ${describe(value)}`]
    const problems: Array<string> = []
    for (const [key, validator] of Object.entries(fields)) {
      if (!(key in value)) problems.push(`${path}.${key} is missing`)
      else problems.push(...validator(value[key], `${path}.${key}`))
    }
    if (options.exact === true) {
      for (const key of Object.keys(value)) if (!(key in fields)) problems.push(`${path}.${key} is not expected here`)
    }
    for (const key of options.forbidden ?? []) if (key in value) problems.push(`${path}.${key} must not be present`)
    return problems
  }

export const describe = (value: unknown): string => {
  if (value === undefined) return "undefined"
  const text = JSON.stringify(value)
  return text.length > 80 ? text.slice(0, 80) + "…" : text
}
