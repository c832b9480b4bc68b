/** Whitelisted addresses (core `Storage.WhitelistStore`) on SQL. */
import type { Storage } from "@custody-relay/core"
import { Effect, Option } from "effect"
import { sql } from "kysely"
import * as WhitelistedAddressRow from "../rows/WhitelistedAddressRow.js"
import { countOf, emptyPage, keepingRead, matchesNothing, optional, pageOf, type StoreArguments, updating } from "../SqlUnit.js"
import { whitelistListValues } from "../StoreStatements.js"

export const store = (
  { db, statements: { first, rows, writeLater }, mode, compiled: { lists, lookups, writes }, read, locking }: StoreArguments
): Storage.WhitelistStore => {
  const whitelistedAddressById = keepingRead(mode, read.whitelisted_addresses, WhitelistedAddressRow.decode)
  const update = updating(writeLater, locking)
  return {
    insertWhitelistedAddress(entry) {
      return writeLater(db.insertInto("whitelisted_addresses").values(WhitelistedAddressRow.encode(entry)), 1, `whitelisted_addresses ${entry.id}`, true)
    },
    getWhitelistedAddress(id) {
      return Effect.map(first(lookups.whitelistedAddress[locking](id)), whitelistedAddressById)
    },
    findWhitelistedAddress(clientId, assetType, addresses) {
      // No address matches an empty list (`in ()` is not SQL).
      if (addresses.length === 0) return Effect.succeed(Option.none())
      return Effect.map(
        first(
          db.selectFrom("whitelisted_addresses").selectAll()
            .where("client_id", "=", clientId)
            .where("asset_type", "=", assetType)
            .where("address", "in", addresses)
            .where("status", "<>", sql.lit("ARCHIVED"))
        ),
        optional(WhitelistedAddressRow.decode)
      )
    },
    updateWhitelistedAddress(entry) {
      const { client_id: _, created_at: __, ...next } = WhitelistedAddressRow.encode(entry)
      return update(read.whitelisted_addresses, next, writes.updateWhitelistedAddress, "whitelisted_addresses")
    },
    listWhitelistedAddresses(clientId, filter, request) {
      const values = whitelistListValues(clientId, filter)
      if (matchesNothing(values)) return Effect.succeed(emptyPage)
      return pageOf({
        first: (limit) => rows(lists.whitelistFirst({ ...values, limit })),
        rows: (limit, offset, fromOldest) => rows(lists.whitelistPage({ ...values, limit, offset }, fromOldest)),
        count: () => Effect.map(first(lists.whitelistTotal(values)), countOf)
      }, WhitelistedAddressRow.decode, request, mode)
    }
  }
}
