/**
 * Custody accounts: shapes (ACC-SHAPE-1/2), creation and its validation with length limits and unicode
 * (ACC-CREATE-1/2/3, LIM-SIZE-1), the approval workflow (ACC-APPR-1/2/3), the deposit address (ACC-ADDR-1),
 * activation (ACC-ACTIVE-1), reads by id (ACC-GET-1) and list filters (ACC-LIST-1/2).
 */
import fc from "fast-check"
import { defineCheck, type CheckContext } from "../Check.js"
import type { Tenant } from "../Fixtures.js"
import type { RelayClient } from "../RelayClient.js"
import { isRecord } from "../Shape.js"
import type { HttpResult } from "../Transport.js"
import { accountCreateShape, accountRecordShape, envelopeOf, expectShape, idsOf, isClientError, randomUuid, severalValues, transfer } from "./records.js"

/** Characters whose UTF-16 length is one code point, so "characters" means the same under every reading. */
const bmpChar = fc.constantFrom("a", "Z", "7", "é", "ß", "Ω", "Ж", "中", "ع", "ñ", "ü", "€", "-", "_", "ø", "ア")
export const textOfLength = (length: number): fc.Arbitrary<string> =>
  fc.array(bmpChar, { minLength: length, maxLength: length }).map((chars) => chars.join(""))
export const lengthAround = (limits: ReadonlyArray<number>, max: number): fc.Arbitrary<number> =>
  fc.oneof(fc.constantFrom(...limits.flatMap((limit) => [limit - 1, limit, limit + 1]).filter((n) => n >= 0)), fc.integer({ min: 0, max }))

const statusOf = async (tenant: Tenant, id: string): Promise<{ result: HttpResult; status: unknown; address: unknown }> => {
  const result = await tenant.client.getAccount(id)
  const body = isRecord(result.json) ? result.json : {}
  return { result, status: body["status"], address: body["address"] }
}

export const createResponse = defineCheck({
  id: "acc.create.response",
  title: "Create answers 201 pending_approval with a null address and only the create fields; get and list carry the full record",
  requirements: ["ACC-CREATE-1", "ACC-SHAPE-1", "ACC-SHAPE-2", "GEN-TIME-1", "GEN-DEC-1"],
  tags: ["accounts", "shape"],
  needs: [],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const asset = context.fixtures.asset()
    const name = context.fixtures.uniqueName()
    const created = await tenant.client.createAccount({ name, workspace: "transactional", assetId: asset.assetId, description: "conformance" })
    context.expectStatus(created, 201, "ACC-CREATE-1", "POST /accounts")
    const body = expectShape(context, accountCreateShape, created, ["ACC-SHAPE-2", "GEN-TIME-1"], "create response")
    context.expect(body["status"] === "pending_approval", "ACC-CREATE-1", `a new account should be pending_approval, got ${String(body["status"])}`, created)
    context.expect(body["address"] === null, ["ACC-CREATE-1", "ACC-ADDR-1"], "a new account's address should be null", created)
    context.expect(body["role"] === "custody", "ACC-CREATE-2", `role should default to custody, got ${String(body["role"])}`, created)
    context.expect(body["name"] === name && body["assetId"] === asset.assetId && body["workspace"] === "transactional", "ACC-SHAPE-2", "the create response does not echo what was created", created)
    const id = String(body["id"])
    const read = await tenant.client.getAccount(id)
    context.expectStatus(read, 200, "ACC-SHAPE-1", "GET /accounts/{id}")
    const record = expectShape(context, accountRecordShape, read, ["ACC-SHAPE-1", "GEN-TIME-1", "GEN-DEC-1"], "account record")
    context.expect(record["chainType"] === asset.chainType, "ACC-SHAPE-1", `chainType should be the profile's ${asset.chainType}, got ${String(record["chainType"])}`, read)
    const listed = envelopeOf(context, await tenant.client.listAccounts(), "ACC-SHAPE-1", "GET /accounts")
    for (const item of listed.items) {
      const problems = accountRecordShape(item, "list item")
      context.expect(problems.length === 0, ["ACC-SHAPE-1", "GEN-DEC-1", "GEN-TIME-1"], problems.join("; "))
    }
  }
})

export const createValidation = defineCheck({
  id: "acc.create.validation",
  title: "Account name 3..50 and description up to 255 characters (unicode included); required fields and enumerations",
  requirements: ["ACC-CREATE-2", "LIM-SIZE-1", "ERR-CODE-1"],
  tags: ["accounts", "validation", "property"],
  needs: ["control"],
  expectsWork: true,
  async run(context) {
    const asset = context.fixtures.asset()
    await context.property(
      ["ACC-CREATE-2", "LIM-SIZE-1"],
      [lengthAround([3, 50], 60).chain((n) => textOfLength(n)), fc.option(lengthAround([255], 300).chain((n) => textOfLength(n)), { nil: undefined }), fc.constantFrom("custody", "transactional"), fc.constantFrom("custody", "staking", undefined)],
      async (name, description, workspace, role) => {
        const tenant = await context.fixtures.tenant()
        const body: Record<string, unknown> = { name, workspace, assetId: asset.assetId }
        if (description !== undefined) body["description"] = description
        if (role !== undefined) body["role"] = role
        const valid = name.length >= 3 && name.length <= 50 && (description === undefined || description.length <= 255)
        const result = await tenant.client.createAccount(body)
        context.expectStatus(result, valid ? 201 : 400, ["ACC-CREATE-2", "LIM-SIZE-1"], `create with a ${name.length}-character name and ${description === undefined ? "no" : `a ${description.length}-character`} description`)
        if (valid) {
          const created = result.json as Record<string, unknown>
          context.expect(created["name"] === name, "ACC-CREATE-2", "the stored name differs from the one sent", result)
          context.expect(created["role"] === (role ?? "custody"), "ACC-CREATE-2", `role should be ${role ?? "custody"}`, result)
        }
      }
    )
    const tenant = await context.fixtures.tenant()
    const good = { name: context.fixtures.uniqueName(), workspace: "custody", assetId: asset.assetId }
    const invalid: ReadonlyArray<[string, Record<string, unknown>]> = [
      ["no name", { workspace: "custody", assetId: asset.assetId }],
      ["no workspace", { name: good.name, assetId: asset.assetId }],
      ["no assetId", { name: good.name, workspace: "custody" }],
      ["workspace cold", { ...good, workspace: "cold" }],
      ["an unsupported asset", { ...good, assetId: "NOPE" }],
      ["role admin", { ...good, role: "admin" }],
      ["a numeric name", { ...good, name: 12345 }],
      ["a null workspace", { ...good, workspace: null }],
      ["a numeric description", { ...good, description: 7 }]
    ]
    for (const [what, body] of invalid) {
      context.expectStatus(await tenant.client.createAccount(body), 400, ["ACC-CREATE-2", "ERR-CODE-1"], `create with ${what}`)
    }
    const listed = envelopeOf(context, await tenant.client.listAccounts(), "ACC-CREATE-2", "GET /accounts")
    context.expect(listed.total === 0, "ACC-CREATE-2", `refused creations stored ${listed.total} account(s)`)
    // The boundaries themselves, whatever the run count: 2/3 and 50/51 name characters, 255/256 description.
    const text = (length: number, seed: string): string => (seed + "é中ßΩ-").repeat(length).slice(0, length)
    const boundaries: ReadonlyArray<[number, number | undefined, boolean]> = [
      [2, undefined, false],
      [3, undefined, true],
      [50, undefined, true],
      [51, undefined, false],
      [10, 255, true],
      [11, 256, false]
    ]
    for (const [nameLength, descriptionLength, valid] of boundaries) {
      const body: Record<string, unknown> = { name: text(nameLength, String(nameLength % 10)), workspace: "custody", assetId: asset.assetId }
      if (descriptionLength !== undefined) body["description"] = text(descriptionLength, "d")
      context.expectStatus(await tenant.client.createAccount(body), valid ? 201 : 400, ["ACC-CREATE-2", "LIM-SIZE-1"], `create with a ${nameLength}-character name${descriptionLength === undefined ? "" : ` and a ${descriptionLength}-character description`}`)
    }
  }
})

export const createDuplicate = defineCheck({
  id: "acc.create.duplicate",
  title: "Creating an account identical to an existing one is 409",
  requirements: ["ACC-CREATE-3", "ERR-CODE-1"],
  tags: ["accounts"],
  needs: [],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const body = { name: context.fixtures.uniqueName(), workspace: "custody", assetId: context.fixtures.asset().assetId, description: "twin", role: "custody" }
    context.expectStatus(await tenant.client.createAccount(body), 201, "ACC-CREATE-3", "the first creation")
    context.expectStatus(await tenant.client.createAccount(body), 409, ["ACC-CREATE-3", "ERR-CODE-1"], "an identical second creation")
    context.expectStatus(await tenant.client.createAccount({ ...body, name: context.fixtures.uniqueName() }), 201, "ACC-CREATE-3", "a creation differing by name")
  }
})

export const approveAndReject = defineCheck({
  id: "acc.approve.pending",
  title: "Approve answers {accountId, status: approved}; reject answers {accountId, status: rejected}",
  requirements: ["ACC-APPR-1", "ACC-ADDR-1"],
  tags: ["accounts", "workflow"],
  needs: ["control"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const first = await context.fixtures.pendingAccount(tenant)
    const approved = await tenant.client.approveAccount(first.id)
    context.expectStatus(approved, [200, 201], "ACC-APPR-1", "POST /accounts/approve")
    context.expect(isRecord(approved.json) && approved.json["accountId"] === first.id && approved.json["status"] === "approved", "ACC-APPR-1", "approve should answer {accountId, status: approved}", approved)
    const second = await context.fixtures.pendingAccount(tenant)
    const rejected = await tenant.client.rejectAccount(second.id)
    context.expectStatus(rejected, [200, 201], "ACC-APPR-1", "POST /accounts/reject")
    context.expect(isRecord(rejected.json) && rejected.json["accountId"] === second.id && rejected.json["status"] === "rejected", "ACC-APPR-1", "reject should answer {accountId, status: rejected}", rejected)
    const read = await statusOf(tenant, second.id)
    context.expect(read.status === "rejected", "ACC-APPR-1", `a rejected account reads as ${String(read.status)}`, read.result)
    context.expect(read.address === null, "ACC-ADDR-1", "a rejected account must not get an address", read.result)
  }
})

export const processedAccount = defineCheck({
  id: "acc.approve.processed",
  title: "Approving or rejecting an account already processed is 400 or 409 and changes nothing",
  requirements: ["ACC-APPR-2", "ERR-CODE-1"],
  tags: ["accounts", "workflow"],
  needs: [],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    for (const [first, label] of [["approve", "approved"], ["reject", "rejected"]] as const) {
      const account = await context.fixtures.pendingAccount(tenant)
      const done = first === "approve" ? await tenant.client.approveAccount(account.id) : await tenant.client.rejectAccount(account.id)
      context.expectStatus(done, [200, 201], "ACC-APPR-1", `the first ${first}`)
      const before = await statusOf(tenant, account.id)
      for (const again of ["approve", "reject"] as const) {
        const result = again === "approve" ? await tenant.client.approveAccount(account.id) : await tenant.client.rejectAccount(account.id)
        context.expectStatus(result, [400, 409], ["ACC-APPR-2", "ERR-CODE-1"], `${again} of an account already ${label}`)
        const after = await statusOf(tenant, account.id)
        context.expect(after.status === before.status && after.address === before.address, "ACC-APPR-2", `a refused ${again} changed the account from ${String(before.status)} to ${String(after.status)}`, after.result)
      }
    }
  }
})

export const foreignApproval = defineCheck({
  id: "acc.approve.foreign-or-unknown",
  title: "Approve or reject of another client's or an unknown account is refused (400 or 404) and changes nothing",
  requirements: ["ACC-APPR-3", "SCOPE-1"],
  tags: ["accounts", "scope", "workflow"],
  needs: ["control"],
  async run(context) {
    const owner = await context.fixtures.tenant()
    const account = await context.fixtures.pendingAccount(owner)
    const other = await context.fixtures.otherTenant()
    for (const id of [account.id, randomUuid(), "not-a-uuid"]) {
      for (const action of ["approve", "reject"] as const) {
        const result = action === "approve" ? await other.client.approveAccount(id) : await other.client.rejectAccount(id)
        context.expectStatus(result, [400, 404], "ACC-APPR-3", `${action} of ${id === account.id ? "another client's" : "an unknown"} account`)
      }
    }
    const after = await statusOf(owner, account.id)
    context.expect(after.status === "pending_approval", "ACC-APPR-3", `another client's refused approval changed the account to ${String(after.status)}`, after.result)
  }
})

export const activation = defineCheck({
  id: "acc.active.lifecycle",
  title: "An approved account becomes active as the profile says, gets its address then, and serves as source and destination",
  requirements: ["ACC-ACTIVE-1", "ACC-ADDR-1"],
  tags: ["accounts", "workflow"],
  needs: ["control", "accounts.activate", "accounts.credit"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const pending = await context.fixtures.pendingAccount(tenant)
    const pendingRead = await statusOf(tenant, pending.id)
    context.expect(pendingRead.address === null, "ACC-ADDR-1", "a pending account has an address", pendingRead.result)
    context.expectStatus(await tenant.client.approveAccount(pending.id), [200, 201], "ACC-APPR-1", "approve")
    const approvedRead = await statusOf(tenant, pending.id)
    context.expect(
      typeof approvedRead.status === "string" && context.profile.accountStatuses.includes(approvedRead.status),
      "ACC-ACTIVE-1",
      `status ${String(approvedRead.status)} is not in the profile's accountStatuses`,
      approvedRead.result
    )
    if (approvedRead.status !== "active") context.expect(approvedRead.address === null, "ACC-ADDR-1", "an approved account that is not active yet has an address", approvedRead.result)
    const activated = await context.control.activateAccount(pending.id)
    const activeRead = await statusOf(tenant, pending.id)
    context.expect(activeRead.status === "active", "ACC-ACTIVE-1", `after activation the account reads ${String(activeRead.status)}`, activeRead.result)
    context.expect(typeof activeRead.address === "string" && activeRead.address.length > 0, ["ACC-ACTIVE-1", "ACC-ADDR-1"], "an active account has no deposit address", activeRead.result)
    context.expect(activated.address === null || activated.address === activeRead.address, "ACC-ACTIVE-1", "the control's activation address differs from the account's")
    await context.control.creditAccount(pending.id, "10")
    const other = await context.fixtures.activeAccount(tenant, pending.assetId, "10")
    const out = await tenant.client.initiate(transfer({ ...pending }, other.id, "1"))
    context.expectStatus(out, 201, "ACC-ACTIVE-1", "an active account as the source")
    const back = await tenant.client.initiate(transfer(other, pending.id, "1"))
    context.expectStatus(back, 201, "ACC-ACTIVE-1", "an active account as the destination")
    const rejected = await context.fixtures.pendingAccount(tenant)
    await tenant.client.rejectAccount(rejected.id)
    try {
      await context.control.activateAccount(rejected.id)
    } catch {
      // Refusing to activate a rejected account is the expected answer.
    }
    const rejectedRead = await statusOf(tenant, rejected.id)
    context.expect(rejectedRead.address === null && rejectedRead.status === "rejected", "ACC-ADDR-1", "a rejected account got an address or changed status", rejectedRead.result)
  }
})

const malformedId = fc.oneof(
  fc.constantFrom("abc", "123", "not-a-uuid", "00000000-0000-0000-0000", "00000000-0000-4000-8000-0000000000000", "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz", "' OR '1'='1", "ü-ñ-中", "%00", "{id}"),
  fc.uuid().map((id) => id.slice(0, -1)),
  fc.uuid().map((id) => id + "a"),
  fc.uuid().map((id) => id.replace(/-/g, "_")),
  fc.string({ unit: fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789-_~"), minLength: 1, maxLength: 40 })
).filter((id) => !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id) && id !== "status")
export { malformedId }

/** A by-id read: 400 for malformed ids, 404 for well-formed ids unknown to the client; a fresh tenant per run. */
export const byIdCheck = async (context: CheckContext, requirementId: string, reads: ReadonlyArray<[string, (client: RelayClient, id: string) => Promise<HttpResult>]>): Promise<void> => {
  await context.property(
    [requirementId],
    [fc.constantFrom(...reads), malformedId],
    async ([what, read], id) => {
      const tenant = await context.fixtures.tenant()
      context.expectStatus(await read(tenant.client, id), 400, [requirementId, "ERR-CODE-1"], `${what} with the malformed id ${JSON.stringify(id)}`)
    },
    { numRuns: context.settings.numRuns * 3 }
  )
  await context.property(
    [requirementId],
    [fc.constantFrom(...reads), fc.uuid({ version: [4] })],
    async ([what, read], id) => {
      const tenant = await context.fixtures.tenant()
      context.expectStatus(await read(tenant.client, id), 404, [requirementId, "ERR-CODE-1"], `${what} with the unknown id ${id}`)
    }
  )
}

export const getById = defineCheck({
  id: "acc.get.ids",
  title: "GET /accounts/{id}: 400 for malformed ids, 404 for unknown ones",
  requirements: ["ACC-GET-1", "ERR-CODE-1"],
  tags: ["accounts", "property", "validation"],
  needs: [],
  async run(context) {
    await byIdCheck(context, "ACC-GET-1", [["GET /accounts/{id}", (client, id) => client.getAccount(id)]])
  }
})

export const listFilters = defineCheck({
  id: "acc.list.filters",
  title: "Account filters search, assetId, workspace, role (several values) and status return exactly the matching records",
  requirements: ["ACC-LIST-1"],
  tags: ["accounts", "filters"],
  needs: ["control", "accounts.activate"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const [first, second] = context.profile.assets
    const secondAsset = (second ?? first)?.assetId
    const a = await context.fixtures.activeAccount(tenant, first?.assetId)
    const b = await context.fixtures.pendingAccount(tenant, secondAsset, "transactional")
    const stakingName = context.fixtures.uniqueName("stake")
    const staking = await tenant.client.createAccount({ name: stakingName, workspace: "custody", assetId: first?.assetId, role: "staking" })
    context.expectStatus(staking, 201, "ACC-LIST-1", "create a staking account")
    const c = { id: String((staking.json as Record<string, unknown>)["id"]), name: stakingName, assetId: first?.assetId ?? "", workspace: "custody", role: "staking", status: "pending_approval", address: null }
    const records = [
      { ...a, role: "custody", status: "active" },
      { ...b, role: "custody", status: "pending_approval" },
      c
    ]
    const expectExactly = async (what: string, result: HttpResult, matching: ReadonlyArray<{ id: string }>): Promise<void> => {
      const page = envelopeOf(context, result, "ACC-LIST-1", what)
      const got = new Set(idsOf(page))
      const want = new Set(matching.map((record) => record.id))
      context.expect(got.size === want.size && [...want].every((id) => got.has(id)), "ACC-LIST-1", `${what} returned [${[...got].join(", ")}], expected [${[...want].join(", ")}]`, result)
    }
    await expectExactly("?assetId", await tenant.client.listAccounts({ assetId: a.assetId }), records.filter((r) => r.assetId === a.assetId))
    await expectExactly("?workspace=transactional", await tenant.client.listAccounts({ workspace: "transactional" }), records.filter((r) => r.workspace === "transactional"))
    await expectExactly("?role=staking", await tenant.client.listAccounts({ role: "staking" }), [c])
    await expectExactly("?status=pending_approval", await tenant.client.listAccounts({ status: "pending_approval" }), records.filter((r) => r.status === "pending_approval"))
    await expectExactly("?status=active", await tenant.client.listAccounts({ status: "active" }), records.filter((r) => r.status === "active"))
    await expectExactly("?search=<name>", await tenant.client.listAccounts({ search: b.name }), [b])
    await expectExactly("?search=<asset id>", await tenant.client.listAccounts({ search: c.assetId }), records.filter((r) => r.assetId === c.assetId || r.name.includes(c.assetId)))
    if (a.address !== null) await expectExactly("?search=<deposit address>", await tenant.client.listAccounts({ search: a.address }), [a])
    const full = new Set(records.map((record) => record.id))
    const answersAll = (result: HttpResult) => result.status === 200 && isRecord(result.json) && Array.isArray(result.json["items"]) &&
      (result.json["items"] as ReadonlyArray<unknown>).length === full.size
    const several = severalValues(context, "role", ["custody", "staking"])
    const answers: Array<HttpResult> = []
    for (const query of several.queries) answers.push(await tenant.client.listAccounts(query))
    for (const answer of several.each ? answers : [answers.find(answersAll) ?? answers[0]!]) {
      await expectExactly(`role with two values (${answer.exchange.path})`, answer, records)
    }
    await expectExactly("?assetId&workspace", await tenant.client.listAccounts({ assetId: a.assetId, workspace: "custody" }), records.filter((r) => r.assetId === a.assetId && r.workspace === "custody"))
  }
})

export const statusFilter = defineCheck({
  id: "acc.list.status-filter",
  title: "Each account status of the profile filters consistently; an unknown status is refused or matches nothing",
  requirements: ["ACC-LIST-2", "ACC-LIST-1"],
  tags: ["accounts", "filters", "profile"],
  needs: ["control"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    await context.fixtures.pendingAccount(tenant)
    const rejected = await context.fixtures.pendingAccount(tenant)
    await tenant.client.rejectAccount(rejected.id)
    await context.fixtures.approvedAccount(tenant)
    for (const status of context.profile.accountStatuses) {
      const page = envelopeOf(context, await tenant.client.listAccounts({ status }), "ACC-LIST-2", `GET /accounts?status=${status}`)
      for (const item of page.items) context.expect(item["status"] === status, "ACC-LIST-2", `status=${status} returned an account in ${String(item["status"])}`)
    }
    const unknown = await tenant.client.listAccounts({ status: "no_such_status" })
    if (unknown.status === 200) {
      const page = envelopeOf(context, unknown, "ACC-LIST-2", "GET /accounts?status=no_such_status")
      context.expect(page.items.length === 0, "ACC-LIST-2", "an unknown status filter matched records")
    } else context.expect(isClientError(unknown.status) && unknown.status !== 404, "ACC-LIST-2", `an unknown status filter answered ${unknown.status}`, unknown)
  }
})

export const accountChecks = [createResponse, createValidation, createDuplicate, approveAndReject, processedAccount, foreignApproval, activation, getById, listFilters, statusFilter]

