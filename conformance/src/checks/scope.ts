/**
 * Client scope: another client's resources are 404 and indistinguishable from ids that do not exist (SCOPE-1),
 * lists and totals never show them (SCOPE-2), and a transaction filter on a foreign account is empty (SCOPE-3).
 */
import { defineCheck, type CheckContext } from "../Check.js"
import { isRecord } from "../Shape.js"
import type { HttpResult } from "../Transport.js"
import { envelopeOf, fundedPair, idsOf, randomUuid, transfer } from "./records.js"

/** The parts of a 404 body that must not tell a foreign id from an unknown one (ids that vary per request aside). */
const comparable = (result: HttpResult): string => {
  if (!isRecord(result.json)) return result.text
  const { requestId: _requestId, ...rest } = result.json
  return JSON.stringify(Object.keys(rest).sort()) + JSON.stringify(rest["code"] ?? null)
}

const populated = async (context: CheckContext) => {
  const tenant = await context.fixtures.tenant()
  const { source, destination } = await fundedPair(context, tenant)
  const initiate = await tenant.client.initiate(transfer(source, destination.id, "1"))
  context.expectStatus(initiate, 201, "SCOPE-1", "fixture: initiate a transaction")
  const transactionId = String((initiate.json as Record<string, unknown>)["id"])
  const whitelist = await context.fixtures.whitelist(tenant, source.assetId, "APPROVED")
  return { tenant, source, destination, transactionId, whitelist }
}

export const foreignIds = defineCheck({
  id: "scope.foreign-ids",
  title: "Another client's account, transaction and whitelisted address are 404, like unknown ids",
  requirements: ["SCOPE-1", "ERR-CODE-1"],
  tags: ["scope", "matrix"],
  needs: ["control", "accounts.activate", "accounts.credit", "whitelisted-addresses.status"],
  expectsWork: false,
  async run(context) {
    const owner = await populated(context)
    const other = await context.fixtures.otherTenant()
    type Probe = (client: typeof other.client, id: string) => Promise<HttpResult>
    const probes: ReadonlyArray<[string, Probe, string]> = [
      ["GET /accounts/{id}", (client, id) => client.getAccount(id), owner.source.id],
      ["GET /transactions/{id}", (client, id) => client.getTransaction(id), owner.transactionId],
      ["GET /transactions/{id}/status", (client, id) => client.getTransactionStatus(id), owner.transactionId],
      ["GET /whitelisted-addresses/{id}", (client, id) => client.getWhitelist(id), owner.whitelist.id]
    ]
    for (const [what, probe, id] of probes) {
      const foreign = await probe(other.client, id)
      context.expectStatus(foreign, 404, ["SCOPE-1", "ERR-CODE-1"], `${what} on another client's resource`)
      const unknown = await probe(other.client, randomUuid())
      context.expectStatus(unknown, 404, "SCOPE-1", `${what} on an unknown id`)
      context.expect(comparable(foreign) === comparable(unknown), "SCOPE-1", `${what}: a foreign id is distinguishable from an unknown one`, foreign, unknown)
      context.expectStatus(await probe(owner.tenant.client, id), 200, "SCOPE-1", `${what} by the owner`)
    }
  }
})

export const foreignLists = defineCheck({
  id: "scope.lists",
  title: "Lists and totals show only the caller's client's records, under every filter",
  requirements: ["SCOPE-2"],
  tags: ["scope", "pagination"],
  needs: ["control", "accounts.activate", "accounts.credit", "whitelisted-addresses.status"],
  async run(context) {
    const owner = await populated(context)
    const other = await context.fixtures.otherTenant()
    const mine = await context.fixtures.pendingAccount(other, owner.source.assetId)
    // A transaction of the caller's own (and its two accounts): a total read with a page's rows is then read for a
    // page that has some, where a count of every client's would show.
    const own = await context.fixtures.transaction(other, owner.source.assetId)
    const ownerIds = new Set([owner.source.id, owner.destination.id, owner.transactionId, owner.whitelist.id])
    const lists: ReadonlyArray<[string, Promise<HttpResult>, number]> = [
      ["GET /accounts", other.client.listAccounts(), 3],
      ["GET /accounts?assetId", other.client.listAccounts({ assetId: owner.source.assetId }), 3],
      ["GET /accounts?search=name", other.client.listAccounts({ search: owner.source.name }), 0],
      ["GET /transactions", other.client.listTransactions(), 1],
      ["GET /transactions?status=pending", other.client.listTransactions({ status: "pending" }), 1],
      ["GET /transactions?assetType", other.client.listTransactions({ assetType: owner.source.assetId }), 1],
      ["GET /whitelisted-addresses", other.client.listWhitelist(), 0],
      ["GET /whitelisted-addresses?status=APPROVED", other.client.listWhitelist({ status: "APPROVED" }), 0]
    ]
    for (const [what, pending, expectedTotal] of lists) {
      const envelope = envelopeOf(context, await pending, "SCOPE-2", what)
      const leaked = idsOf(envelope).filter((id) => ownerIds.has(id))
      context.expect(leaked.length === 0, "SCOPE-2", `${what} shows another client's records: ${leaked.join(", ")}`)
      context.expect(envelope.total === expectedTotal, "SCOPE-2", `${what}: total ${envelope.total} should count only the caller's ${expectedTotal} record(s)`)
    }
    const ownList = envelopeOf(context, await other.client.listAccounts(), "SCOPE-2", "GET /accounts")
    context.expect(idsOf(ownList).includes(mine.id), "SCOPE-2", "the caller's own account is missing from its list")
    const ownTransactions = envelopeOf(context, await other.client.listTransactions(), "SCOPE-2", "GET /transactions")
    context.expect(idsOf(ownTransactions).includes(own.id), "SCOPE-2", "the caller's own transaction is missing from its list")
  }
})

export const foreignAccountFilter = defineCheck({
  id: "scope.transactions.foreign-account-filter",
  title: "A transaction list filtered by a foreign or unknown accountId is 200 with no items",
  requirements: ["SCOPE-3", "SCOPE-2"],
  tags: ["scope"],
  needs: ["control", "accounts.activate", "accounts.credit", "whitelisted-addresses.status"],
  async run(context) {
    const owner = await populated(context)
    const other = await context.fixtures.otherTenant()
    for (const accountId of [owner.source.id, randomUuid()]) {
      const envelope = envelopeOf(context, await other.client.listTransactions({ accountId }), "SCOPE-3", "GET /transactions?accountId")
      context.expect(envelope.items.length === 0 && envelope.total === 0, "SCOPE-3", `a filter on account ${accountId} outside the client gave ${envelope.total} record(s)`)
    }
    const own = envelopeOf(context, await owner.tenant.client.listTransactions({ accountId: owner.source.id }), "SCOPE-3", "owner's GET /transactions?accountId")
    context.expect(idsOf(own).includes(owner.transactionId), "SCOPE-3", "the owner's filtered list lacks its transaction")
  }
})

export const scopeChecks = [foreignIds, foreignLists, foreignAccountFilter]
