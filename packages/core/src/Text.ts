/**
 * Free text a client writes (names, descriptions). Lengths count Unicode code points, so an emoji is one
 * character, as a person counts. The rules read Unicode's own character properties:
 * - refused anywhere: a lone surrogate (it cannot round-trip through UTF-8 storage), control characters (\p{Cc}:
 *   U+0000-U+001F, U+007F-U+009F, so U+0085 too; PostgreSQL cannot store U+0000 at all) and the bidirectional
 *   embedding, override and isolate controls (U+202A-U+202E, U+2066-U+2069), which make a name read otherwise
 *   than it is written (a spoofed "exchange");
 * - a required text must hold a visible character: a letter, number, punctuation or symbol (emoji included). Spaces
 *   (\p{Z}), format characters (\p{Cf}: U+200B zero width space, U+200D joiner, ...), combining marks on their own
 *   and other invisible code points do not count, so "\u200b\u200b\u200b" is blank.
 */
import { Schema } from "effect"

/** Refused anywhere in free text. */
export const REFUSED = /[\p{Cc}\u202a-\u202e\u2066-\u2069]/u

/** What counts as a visible character: anything but separators, other (control, format, unassigned, ...) and marks. */
export const VISIBLE = /[^\p{Z}\p{C}\p{M}]/u

const isPrintable = Schema.makeFilter<string>((s) =>
  s.isWellFormed() && !REFUSED.test(s) ? undefined : "must be well-formed text without control or bidirectional override characters"
)

const hasVisibleCharacter = Schema.makeFilter<string>((s) => (VISIBLE.test(s) ? undefined : "must hold a visible character"))

/** Text of `minimum` to `maximum` code points; when `minimum` > 0 it must also hold a non-blank character. */
export const Text = (minimum: number, maximum: number) =>
  minimum > 0
    ? Schema.String.check(Schema.isBetweenCodePoints(minimum, maximum), isPrintable, hasVisibleCharacter)
    : Schema.String.check(Schema.isMaxCodePoints(maximum), isPrintable)
