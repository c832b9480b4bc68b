/**
 * Whitelisted addresses: creation with its limits and address validation (WL-CREATE-1, LIM-SIZE-1), the create and
 * read shapes (WL-CREATE-2, WL-SHAPE-1), list filters (WL-LIST-1), reads by id (WL-GET-1), statuses (WL-STATE-1)
 * and the profile's transitions (WL-FLOW-1).
 */
import fc from "fast-check"
import { defineCheck } from "../Check.js"
import { isRecord } from "../Shape.js"
import type { HttpResult } from "../Transport.js"
import { byIdCheck, lengthAround, textOfLength } from "./accounts.js"
import { envelopeOf, expectShape, idsOf, severalValues, whitelistCreateShape, whitelistRecordShape } from "./records.js"

export const createResponse = defineCheck({
  id: "wl.create.response",
  title: "Create answers the record with status PENDING and no providerId; get and list add providerId",
  requirements: ["WL-CREATE-2", "WL-SHAPE-1", "WL-STATE-1"],
  tags: ["whitelist", "shape"],
  needs: [],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const asset = context.fixtures.asset()
    let body = { name: context.fixtures.uniqueName("wl"), address: asset.sampleAddresses.valid[0] ?? "", assetType: asset.assetId, description: "for review" }
    let created = await tenant.client.createWhitelist(body)
    // A black-box client is long-lived: its sample addresses may already be whitelisted (409); try the others.
    for (const address of asset.sampleAddresses.valid.slice(1)) {
      if (context.hasControl || created.status !== 409) break
      body = { ...body, address }
      created = await tenant.client.createWhitelist(body)
    }
    context.expectStatus(created, [200, 201], "WL-CREATE-2", "POST /whitelisted-addresses")
    const record = expectShape(context, whitelistCreateShape, created, ["WL-CREATE-2"], "create response")
    context.expect(record["name"] === body.name && record["address"] === body.address && record["assetType"] === body.assetType && record["description"] === body.description, "WL-CREATE-2", "the create response does not echo the request", created)
    const read = await tenant.client.getWhitelist(String(record["id"]))
    context.expectStatus(read, 200, "WL-SHAPE-1", "GET /whitelisted-addresses/{id}")
    expectShape(context, whitelistRecordShape, read, ["WL-SHAPE-1"], "whitelist record")
    const page = envelopeOf(context, await tenant.client.listWhitelist(), "WL-SHAPE-1", "GET /whitelisted-addresses")
    for (const item of page.items) {
      const problems = whitelistRecordShape(item, "list item")
      context.expect(problems.length === 0, "WL-SHAPE-1", problems.join("; "))
      context.expect(context.profile.whitelistStatuses.includes(String(item["status"])), "WL-STATE-1", `status ${String(item["status"])} is not declared`)
    }
  }
})

export const createValidation = defineCheck({
  id: "wl.create.validation",
  title: "Whitelist name up to 100 and description up to 500 characters (unicode included); address valid for the asset; required fields",
  requirements: ["WL-CREATE-1", "LIM-SIZE-1", "ERR-CODE-1"],
  tags: ["whitelist", "validation", "property"],
  needs: [],
  expectsWork: true,
  async run(context) {
    const assets = context.profile.assets
    await context.property(
      ["WL-CREATE-1", "LIM-SIZE-1"],
      [
        fc.constantFrom(...assets),
        lengthAround([100], 110).filter((n) => n > 0).chain((n) => textOfLength(n)),
        fc.option(lengthAround([500], 520).chain((n) => textOfLength(n)), { nil: undefined }),
        fc.boolean()
      ],
      async (asset, name, description, validAddress) => {
        const tenant = await context.fixtures.tenant()
        const addresses = validAddress ? asset.sampleAddresses.valid : asset.sampleAddresses.invalid
        const address = addresses[0] ?? asset.sampleAddresses.valid[0] ?? ""
        validAddress = validAddress || asset.sampleAddresses.invalid.length === 0
        const body: Record<string, unknown> = { name, address, assetType: asset.assetId }
        if (description !== undefined) body["description"] = description
        const valid = validAddress && name.length <= 100 && (description === undefined || description.length <= 500)
        const result = await tenant.client.createWhitelist(body)
        const what = `create ${asset.assetId} with a ${name.length}-character name, ${description === undefined ? "no" : `a ${description.length}-character`} description and ${validAddress ? "a valid" : "an invalid"} address`
        // Black-box runs share one long-lived client, where a valid address may already be whitelisted (409).
        const allowed = context.hasControl ? [200, 201] : [200, 201, 409]
        if (valid) context.expect(allowed.includes(result.status), ["WL-CREATE-1", "LIM-SIZE-1"], `${what}: expected ${allowed.join(" or ")}, got ${result.status}`, result)
        else context.expectStatus(result, 400, ["WL-CREATE-1", "LIM-SIZE-1"], what)
      },
      { numRuns: context.settings.numRuns * 2 }
    )
    const tenant = await context.fixtures.tenant()
    const asset = context.fixtures.asset()
    const good = { name: "ok", address: asset.sampleAddresses.valid[0] ?? "", assetType: asset.assetId }
    const invalid: ReadonlyArray<[string, Record<string, unknown>]> = [
      ["no name", { address: good.address, assetType: good.assetType }],
      ["no address", { name: "n", assetType: good.assetType }],
      ["no assetType", { name: "n", address: good.address }],
      ["an unsupported assetType", { ...good, assetType: "NOPE" }],
      ["a numeric address", { ...good, address: 42 }],
      ["a numeric description", { ...good, description: 1 }],
      ...assets
        .filter((other) => other.assetId !== asset.assetId && other.chainType !== asset.chainType)
        .slice(0, 2)
        .map((other): [string, Record<string, unknown>] => [`an address of ${other.assetId}`, { ...good, address: other.sampleAddresses.valid[0] ?? "" }])
    ]
    for (const [what, body] of invalid) {
      context.expectStatus(await tenant.client.createWhitelist(body), 400, ["WL-CREATE-1", "ERR-CODE-1"], `create with ${what}`)
    }
    // The boundaries themselves, whatever the run count: 100/101 name and 500/501 description characters.
    const text = (length: number): string => "aé中ßΩ".repeat(length).slice(0, length)
    const boundaries: ReadonlyArray<[number, number | undefined, boolean]> = [
      [100, undefined, true],
      [101, undefined, false],
      [5, 500, true],
      [5, 501, false]
    ]
    for (const [nameLength, descriptionLength, valid] of boundaries) {
      const owner = await context.fixtures.tenant()
      const body: Record<string, unknown> = { name: text(nameLength), address: asset.sampleAddresses.valid[1] ?? good.address, assetType: asset.assetId }
      if (descriptionLength !== undefined) body["description"] = text(descriptionLength)
      const result = await owner.client.createWhitelist(body)
      const what = `create with a ${nameLength}-character name${descriptionLength === undefined ? "" : ` and a ${descriptionLength}-character description`}`
      const allowed = valid ? (context.hasControl ? [200, 201] : [200, 201, 409]) : [400]
      context.expect(allowed.includes(result.status), ["WL-CREATE-1", "LIM-SIZE-1"], `${what}: expected ${allowed.join(" or ")}, got ${result.status}`, result)
    }
  }
})

export const listFilters = defineCheck({
  id: "wl.list.filters",
  title: "Whitelist filters assetType and status accept several values; an invalid status is 400",
  requirements: ["WL-LIST-1", "ERR-CODE-1"],
  tags: ["whitelist", "filters"],
  needs: ["control", "whitelisted-addresses.status"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const [first, second] = context.profile.assets
    const a = await context.fixtures.whitelist(tenant, first?.assetId, "PENDING")
    const b = await context.fixtures.whitelist(tenant, first?.assetId, "APPROVED")
    const c = await context.fixtures.whitelist(tenant, (second ?? first)?.assetId, "REJECTED")
    const records = [
      { ...a, status: "PENDING" },
      { ...b, status: "APPROVED" },
      { ...c, status: "REJECTED" }
    ]
    const exactly = async (what: string, queries: ReadonlyArray<Record<string, string | ReadonlyArray<string>>>, each: boolean, want: ReadonlyArray<{ id: string }>): Promise<void> => {
      const expected = want.map((record) => record.id)
      const matches = (candidate: HttpResult) => {
        if (candidate.status !== 200 || !isRecord(candidate.json) || !Array.isArray(candidate.json["items"])) return false
        const ids = (candidate.json["items"] as ReadonlyArray<unknown>).map((item) => (isRecord(item) ? item["id"] : undefined))
        return ids.length === expected.length && expected.every((id) => ids.includes(id))
      }
      const answers: Array<HttpResult> = []
      for (const query of queries) answers.push(await tenant.client.listWhitelist(query))
      for (const result of each ? answers : [answers.find(matches) ?? answers[0]!]) {
        const got = idsOf(envelopeOf(context, result, "WL-LIST-1", what))
        context.expect(got.length === expected.length && expected.every((id) => got.includes(id)), "WL-LIST-1", `${what} returned [${got.join(", ")}], expected [${expected.join(", ")}]`, result)
      }
    }
    const one = (name: string, value: string) => [{ [name]: value }]
    const two = (name: string, values: ReadonlyArray<string>) => severalValues(context, name, values)
    await exactly("status=PENDING", one("status", "PENDING"), true, [records[0]!])
    const statuses = two("status", ["PENDING", "APPROVED"])
    await exactly("status with two values", statuses.queries, statuses.each, [records[0]!, records[1]!])
    await exactly(`assetType=${a.assetType}`, one("assetType", a.assetType), true, records.filter((r) => r.assetType === a.assetType))
    const assetTypes = two("assetType", [a.assetType, c.assetType])
    await exactly("assetType with two values", assetTypes.queries, assetTypes.each, records)
    for (const status of ["NOPE", "pending_approval", "approvedd"]) {
      context.expectStatus(await tenant.client.listWhitelist({ status }), 400, ["WL-LIST-1", "ERR-CODE-1"], `GET /whitelisted-addresses?status=${status}`)
    }
    context.expectStatus(await tenant.client.listWhitelist({ page: "0" }), 400, "WL-LIST-1", "GET /whitelisted-addresses?page=0")
  }
})

export const getById = defineCheck({
  id: "wl.get.ids",
  title: "GET /whitelisted-addresses/{id}: 400 for malformed ids, 404 for unknown ones",
  requirements: ["WL-GET-1", "ERR-CODE-1"],
  tags: ["whitelist", "property", "validation"],
  needs: [],
  async run(context) {
    await byIdCheck(context, "WL-GET-1", [["GET /whitelisted-addresses/{id}", (client, id) => client.getWhitelist(id)]])
  }
})

export const stateFlow = defineCheck({
  id: "wl.state.flow",
  title: "Whitelist statuses move as the profile says and only APPROVED serves as a destination",
  requirements: ["WL-FLOW-1", "WL-STATE-1"],
  tags: ["whitelist", "workflow", "profile"],
  needs: ["control", "whitelisted-addresses.status", "accounts.activate", "accounts.credit"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const source = await context.fixtures.activeAccount(tenant, undefined, "100")
    const entry = await context.fixtures.whitelist(tenant, source.assetId, "PENDING")
    const read = async (): Promise<string> => {
      const result = await tenant.client.getWhitelist(entry.id)
      return isRecord(result.json) ? String(result.json["status"]) : ""
    }
    context.expect((await read()) === "PENDING", "WL-STATE-1", "a new whitelisted address is not PENDING")
    for (const status of ["APPROVED", "ARCHIVED"] as const) {
      await context.control.setWhitelistStatus(entry.id, status)
      const now = await read()
      context.expect(now === status && context.profile.whitelistStatuses.includes(now), "WL-FLOW-1", `after the control set ${status} the address reads ${now}`)
      const initiate = await tenant.client.initiate({ sourceAccountId: source.id, destinationId: entry.id, destinationType: "external", amount: "1", assetType: source.assetId })
      context.expectStatus(initiate, status === "APPROVED" ? 201 : 404, "WL-STATE-1", `initiate to an address in ${status}`)
    }
  }
})

export const whitelistChecks = [createResponse, createValidation, listFilters, getById, stateFlow]
