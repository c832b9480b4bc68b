/**
 * Free text a client writes (names, descriptions). Lengths count Unicode code points, so an emoji is one
 * character, as a person counts. Text must be well-formed Unicode with no control characters: a lone surrogate
 * cannot round-trip through UTF-8 storage, and PostgreSQL cannot store U+0000 at all.
 */
import { Schema } from "effect"

// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/

const isPrintable = Schema.makeFilter<string>((s) =>
  s.isWellFormed() && !CONTROL_CHARACTERS.test(s) ? undefined : "must be well-formed text without control characters"
)

const hasVisibleCharacter = Schema.makeFilter<string>((s) => (s.trim().length > 0 ? undefined : "must not be blank"))

/** Text of `minimum` to `maximum` code points; when `minimum` > 0 it must also hold a non-blank character. */
export const Text = (minimum: number, maximum: number) =>
  minimum > 0
    ? Schema.String.check(Schema.isBetweenCodePoints(minimum, maximum), isPrintable, hasVisibleCharacter)
    : Schema.String.check(Schema.isMaxCodePoints(maximum), isPrintable)
