/**
 * Pagination on every list endpoint: the envelope (PAGE-1), defaults and echo (PAGE-2), invalid values (PAGE-3)
 * and walking the pages (PAGE-4), with property-generated page and limit values.
 */
import fc from "fast-check"
import { defineCheck, type CheckContext } from "../Check.js"
import { CapabilityMissing } from "../Control.js"
import type { Tenant } from "../Fixtures.js"
import type { Query } from "../RelayClient.js"
import type { HttpResult } from "../Transport.js"
import { envelopeOf, idsOf } from "./records.js"

type ListName = "accounts" | "transactions" | "whitelisted-addresses"
const lists: ReadonlyArray<ListName> = ["accounts", "transactions", "whitelisted-addresses"]

const list = (tenant: Tenant, name: ListName, query?: Query): Promise<HttpResult> =>
  name === "accounts" ? tenant.client.listAccounts(query) : name === "transactions" ? tenant.client.listTransactions(query) : tenant.client.listWhitelist(query)

/** A tenant with `count` accounts and `count` whitelisted addresses (transactions stay empty: cheap). */
const tenantWith = async (context: CheckContext, count: number): Promise<Tenant> => {
  const tenant = await context.fixtures.tenant()
  const assets = context.profile.assets
  for (let index = 0; index < count; index += 1) {
    await context.fixtures.pendingAccount(tenant)
    // Spread over the assets: an implementation may refuse the same address twice for one client.
    await context.fixtures.whitelist(tenant, assets[index % assets.length]?.assetId, "PENDING")
  }
  return tenant
}

export const envelope = defineCheck({
  id: "page.envelope",
  title: "Every list answers the envelope {items, total, page, limit, totalPages} with integers",
  requirements: ["PAGE-1", "PAGE-2"],
  tags: ["pagination"],
  needs: [],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    for (const name of lists) {
      const page = envelopeOf(context, await list(tenant, name), "PAGE-1", `GET /${name}`)
      context.expect(page.page === 1 && page.limit === 20, "PAGE-2", `GET /${name} without parameters should default to page 1, limit 20; got page ${page.page}, limit ${page.limit}`)
    }
  }
})

export const pageValues = defineCheck({
  id: "page.values",
  title: "Valid page and limit values are honoured and echoed; item counts follow",
  requirements: ["PAGE-2", "PAGE-4", "PAGE-1"],
  tags: ["pagination", "property"],
  needs: ["control"],
  async run(context) {
    await context.property(
      ["PAGE-2"],
      [fc.integer({ min: 0, max: 4 }), fc.constantFrom(...lists), fc.integer({ min: 1, max: 4 }), fc.oneof(fc.integer({ min: 1, max: 5 }), fc.constantFrom(20, 99, 100))],
      async (count, name, page, limit) => {
        const tenant = await tenantWith(context, name === "transactions" ? 0 : count)
        const total = name === "transactions" ? 0 : count
        const result = envelopeOf(context, await list(tenant, name, { page: String(page), limit: String(limit) }), "PAGE-2", `GET /${name}?page=${page}&limit=${limit}`)
        context.expect(result.page === page && result.limit === limit, "PAGE-2", `page ${page} and limit ${limit} should be echoed, got page ${result.page}, limit ${result.limit}`)
        context.expect(result.total === total, "PAGE-2", `total should be ${total}, got ${result.total}`)
        const expectedItems = Math.max(0, Math.min(limit, total - (page - 1) * limit))
        context.expect(result.items.length === expectedItems, "PAGE-2", `page ${page} of ${total} record(s) by ${limit} should hold ${expectedItems} item(s), got ${result.items.length}`)
        const totalPages = Math.ceil(total / limit)
        if (result.totalPages !== totalPages) context.note("PAGE-4", `totalPages should be ceil(${total}/${limit}) = ${totalPages}, got ${result.totalPages}`)
      },
      { numRuns: Math.max(4, Math.round(context.settings.numRuns / 2)) }
    )
  }
})

const invalidValue = fc.oneof(
  fc.integer({ min: -1000, max: 0 }).map(String),
  fc.constantFrom("1.5", "abc", "1e1", "0x10", "two", "-0", "1,2", "NaN", "Infinity"),
  fc.tuple(fc.integer({ min: 1, max: 99 }), fc.integer({ min: 1, max: 9 })).map(([whole, fraction]) => `${whole}.${fraction}`)
)

export const invalidPageValues = defineCheck({
  id: "page.invalid-values",
  title: "Non-integer, zero or negative page or limit is 400; limit above 100 is refused or capped",
  requirements: ["PAGE-3", "WL-LIST-1", "ERR-CODE-1"],
  tags: ["pagination", "property", "validation"],
  needs: [],
  async run(context) {
    await context.property(
      ["PAGE-3"],
      [fc.constantFrom(...lists), fc.constantFrom("page", "limit"), invalidValue],
      async (name, parameter, value) => {
        const tenant = await context.fixtures.tenant()
        const result = await list(tenant, name, { [parameter]: value })
        context.expectStatus(result, 400, name === "whitelisted-addresses" ? ["PAGE-3", "WL-LIST-1"] : "PAGE-3", `GET /${name}?${parameter}=${value}`)
      },
      { numRuns: context.settings.numRuns * 3 }
    )
    const tenant = await context.fixtures.tenant()
    for (const name of lists) {
      for (const limit of ["101", "1000"]) {
        const result = await list(tenant, name, { limit })
        if (result.status === 400) continue
        const page = envelopeOf(context, result, "PAGE-3", `GET /${name}?limit=${limit}`)
        context.expect(page.items.length <= 100 && page.limit <= 100, "PAGE-3", `GET /${name}?limit=${limit} answered a page with limit ${page.limit}`)
        context.warn(`GET /${name}?limit=${limit} was capped rather than refused (PAGE-3 prefers 400)`)
      }
    }
  }
})

export const pageWalk = defineCheck({
  id: "page.walk",
  title: "Walking every page of every list visits each record exactly once; totalPages = ceil(total/limit)",
  requirements: ["PAGE-4", "PAGE-2"],
  tags: ["pagination"],
  needs: ["control"],
  async run(context) {
    const tenant = await tenantWith(context, 5)
    // Transactions on a tenant of their own: each brings two accounts, which would change the accounts list's count.
    // They need active, funded accounts; a target whose control cannot make them has its transactions list unwalked.
    const trading = await context.fixtures.tenant()
    let walked: ReadonlyArray<ListName> = lists
    try {
      for (let index = 0; index < 5; index += 1) await context.fixtures.transaction(trading)
    } catch (error) {
      if (!(error instanceof CapabilityMissing)) throw error
      walked = ["accounts", "whitelisted-addresses"]
      context.warn(`the transactions list was not walked: ${error.message}`)
    }
    for (const name of walked) {
      const owner = name === "transactions" ? trading : tenant
      for (const limit of [1, 2, 3, 5, 7]) {
        const seen: Array<string> = []
        const first = envelopeOf(context, await list(owner, name, { page: "1", limit: String(limit) }), "PAGE-4", `GET /${name}`)
        context.expect(first.totalPages === Math.ceil(first.total / limit), "PAGE-4", `totalPages ${first.totalPages} != ceil(${first.total}/${limit})`)
        for (let page = 1; page <= Math.min(first.totalPages, 20); page += 1) {
          const next = envelopeOf(context, await list(owner, name, { page: String(page), limit: String(limit) }), "PAGE-4", `GET /${name}?page=${page}`)
          context.expect(next.items.length <= limit, "PAGE-4", `page ${page} holds ${next.items.length} items, more than limit ${limit}`)
          const repeated = idsOf(next).filter((id) => seen.includes(id))
          context.expect(repeated.length === 0, "PAGE-2", `GET /${name}?page=${page}&limit=${limit} repeats ${repeated.length} record(s) of an earlier page: the page asked for was not honoured`)
          seen.push(...idsOf(next))
        }
        context.expect(seen.length === 5 && new Set(seen).size === 5, "PAGE-4", `walking /${name} by ${limit} visited ${seen.length} record(s), ${new Set(seen).size} distinct, of 5`)
        const beyond = envelopeOf(context, await list(owner, name, { page: String(first.totalPages + 1), limit: String(limit) }), "PAGE-4", `GET /${name} past the last page`)
        context.expect(beyond.items.length === 0, "PAGE-4", "a page past the last one should be empty")
      }
    }
  }
})

export const paginationChecks = [envelope, pageValues, invalidPageValues, pageWalk]
