/**
 * Pagination, the same for every list (PAGE-1..4): `page` from 1, `limit` from 1 to 100, defaults 1 and 20, and
 * the envelope `{items, total, page, limit, totalPages}`. Storage orders every list by creation, newest first,
 * with the id as tie-break, so walking the pages visits each record once while nothing changes.
 */
import { Schema } from "effect"

export const DEFAULT_PAGE = 1
export const DEFAULT_LIMIT = 20
export const MAX_LIMIT = 100

export interface PageRequest {
  readonly page: number
  readonly limit: number
}

export const PageRequest = Schema.Struct({
  page: Schema.Int.check(Schema.isGreaterThanOrEqualTo(1), Schema.isLessThanOrEqualTo(1_000_000_000)),
  limit: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_LIMIT }))
})

export interface Page<A> {
  readonly items: ReadonlyArray<A>
  readonly total: number
}

/** The wire envelope of a list. */
export const PageEnvelope = <S extends Schema.Top>(item: S) =>
  Schema.Struct({
    items: Schema.Array(item),
    total: Schema.Int,
    page: Schema.Int,
    limit: Schema.Int,
    totalPages: Schema.Int
  })

export const totalPages = (total: number, limit: number): number => Math.ceil(total / limit)

export const envelope = <A>(page: Page<A>, request: PageRequest) => ({
  items: page.items,
  total: page.total,
  page: request.page,
  limit: request.limit,
  totalPages: totalPages(page.total, request.limit)
})

/** Rows to skip for a page; storage adapters use it so every adapter pages the same way. */
export const offset = (request: PageRequest): number => (request.page - 1) * request.limit
