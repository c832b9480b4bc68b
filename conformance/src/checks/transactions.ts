/**
 * Custody transactions: initiation (TXN-INIT-1/2), record shapes (TXN-SHAPE-1..4), validation of the five fields
 * (TXN-VAL-1/2/3), destinations (TXN-DEST-1/2), amounts and precision at and across the boundary (TXN-PREC-1/2),
 * the fee estimate (TXN-FEE-1/2/3), list filters and status groups (TXN-LIST-1/2), reads by id (TXN-GET-1) and the
 * profile's state machine (TXN-FLOW-1).
 */
import { Decimal } from "decimal.js"
import fc from "fast-check"
import { defineCheck, type CheckContext } from "../Check.js"
import type { AccountFixture, Tenant } from "../Fixtures.js"
import { groupOf, type AssetProfile } from "../Profile.js"
import { isRecord } from "../Shape.js"
import type { HttpResult } from "../Transport.js"
import { byIdCheck } from "./accounts.js"
import {
  envelopeOf,
  expectShape,
  feeShape,
  fundedPair,
  idsOf,
  initiateShape,
  isClientError,
  randomUuid,
  transactionDetailShape,
  transactionItemShape,
  transactionStatusShape,
  transfer
} from "./records.js"

const transactionCount = async (context: CheckContext, tenant: Tenant, requirementId: string): Promise<number> =>
  envelopeOf(context, await tenant.client.listTransactions(), requirementId, "GET /transactions").total

const balanceOf = async (context: CheckContext, tenant: Tenant, accountId: string, requirementId: string): Promise<Decimal> => {
  const result = await tenant.client.getAccount(accountId)
  context.expectStatus(result, 200, requirementId, "GET /accounts/{id}")
  const value = isRecord(result.json) ? result.json["availableBalance"] : undefined
  context.expect(typeof value === "string" && /^-?\d+(\.\d+)?$/.test(value), "GEN-DEC-1", "availableBalance is not a decimal string", result)
  return new Decimal(String(value))
}

export const initiateResponse = defineCheck({
  id: "txn.initiate.response",
  title: "Initiate answers 201 with a pending lower-case state that reads upper-case",
  requirements: ["TXN-INIT-1", "TXN-INIT-2", "TXN-FLOW-1", "GEN-TIME-1"],
  tags: ["transactions", "shape", "workflow"],
  needs: ["control", "accounts.activate", "accounts.credit", "whitelisted-addresses.status"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const { source, destination } = await fundedPair(context, tenant)
    const whitelist = await context.fixtures.whitelist(tenant, source.assetId, "APPROVED")
    for (const [destinationId, destinationType] of [[destination.id, "internal"], [whitelist.id, "external"]] as const) {
      const amount = "1.5"
      const result = await tenant.client.initiate(transfer(source, destinationId, amount, destinationType))
      context.expectStatus(result, 201, "TXN-INIT-1", `initiate ${destinationType}`)
      const body = expectShape(context, initiateShape, result, ["TXN-INIT-1", "GEN-TIME-1"], "initiate response")
      context.expect(body["destinationType"] === destinationType, "TXN-INIT-1", `destinationType should be ${destinationType} as sent`, result)
      context.expect(body["sourceAccountId"] === source.id && body["destinationId"] === destinationId && body["assetType"] === source.assetId, "TXN-INIT-1", "the initiate response does not echo the request", result)
      context.expect(new Decimal(String(body["amount"])).eq(amount), "TXN-INIT-1", `amount ${String(body["amount"])} differs from ${amount}`, result)
      const status = String(body["status"])
      const declared = context.profile.transactionStatuses.map((entry) => entry.status)
      context.expect(declared.includes(status.toUpperCase()), "TXN-FLOW-1", `initiate status ${status} is not in the profile (upper-cased)`, result)
      // Whether this transfer needs an approval is the implementation's policy (awaiting_signature is the
      // interface's example "when an additional approval is required"): every pending status is an answer.
      context.expect(groupOf(context.profile, status.toUpperCase()) === "pending", "TXN-INIT-2", `a new transaction should be pending, got ${status}`, result)
      const read = await tenant.client.getTransaction(String(body["id"]))
      context.expectStatus(read, 200, "TXN-FLOW-1", "GET /transactions/{id}")
      const readStatus = isRecord(read.json) ? read.json["status"] : undefined
      context.expect(readStatus === status.toUpperCase(), "TXN-FLOW-1", `initiate said ${status} but the record reads ${String(readStatus)}`, result, read)
    }
  }
})

export const recordShapes = defineCheck({
  id: "txn.shape.records",
  title: "List items, detail, approvals and status records carry their fields",
  requirements: ["TXN-SHAPE-1", "TXN-SHAPE-2", "TXN-SHAPE-3", "TXN-SHAPE-4", "GEN-TIME-1", "GEN-DEC-1", "TXN-FLOW-1"],
  tags: ["transactions", "shape"],
  needs: ["control", "accounts.activate", "accounts.credit", "whitelisted-addresses.status"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const { source, destination } = await fundedPair(context, tenant)
    const whitelist = await context.fixtures.whitelist(tenant, source.assetId, "APPROVED")
    const ids: Array<[string, string]> = []
    for (const [destinationId, type] of [[destination.id, "internal"], [whitelist.id, "external"]] as const) {
      const result = await tenant.client.initiate(transfer(source, destinationId, "2", type))
      context.expectStatus(result, 201, "TXN-INIT-1", "initiate")
      ids.push([String((result.json as Record<string, unknown>)["id"]), type === "internal" ? "internal_wallet" : "external_wallet"])
    }
    const page = envelopeOf(context, await tenant.client.listTransactions(), "TXN-SHAPE-1", "GET /transactions")
    context.expect(page.total === 2, "TXN-SHAPE-1", `the list should hold the 2 transactions, total ${page.total}`)
    const declared = context.profile.transactionStatuses.map((entry) => entry.status)
    for (const item of page.items) {
      const problems = transactionItemShape(item, "list item")
      context.expect(problems.length === 0, ["TXN-SHAPE-1", "GEN-TIME-1", "GEN-DEC-1"], problems.join("; "))
      context.expect(declared.includes(String(item["status"])), "TXN-FLOW-1", `list status ${String(item["status"])} is not in the profile`)
    }
    for (const [id, wireType] of ids) {
      const detail = await tenant.client.getTransaction(id)
      context.expectStatus(detail, 200, "TXN-SHAPE-2", "GET /transactions/{id}")
      const body = expectShape(context, transactionDetailShape, detail, ["TXN-SHAPE-2", "TXN-SHAPE-3", "GEN-TIME-1", "GEN-DEC-1"], "detail")
      context.expect(body["destinationType"] === wireType, "TXN-SHAPE-2", `destinationType should read ${wireType}`, detail)
      const types = context.profile.transactionTypes
      if (types !== undefined) context.expect(types.includes(String(body["transactionType"])), "TXN-SHAPE-2", `transactionType ${String(body["transactionType"])} is not one the profile declares (${types.join(", ")})`, detail)
      const status = await tenant.client.getTransactionStatus(id)
      context.expectStatus(status, 200, "TXN-SHAPE-4", "GET /transactions/{id}/status")
      const statusBody = expectShape(context, transactionStatusShape, status, ["TXN-SHAPE-4", "GEN-TIME-1"], "status record")
      context.expect(Object.keys(statusBody).sort().join(",") === "id,status,subStatus,updatedAt", "TXN-SHAPE-4", `the status record should be {id, status, subStatus, updatedAt}, got {${Object.keys(statusBody).join(", ")}}`, status)
      context.expect(statusBody["status"] === body["status"] && statusBody["id"] === id, "TXN-SHAPE-4", "status record and detail disagree", status, detail)
    }
  }
})

const fieldBreakers: ReadonlyArray<[string, (body: Record<string, unknown>) => Record<string, unknown>]> = [
  ...["sourceAccountId", "destinationId", "destinationType", "amount", "assetType"].flatMap((field): Array<[string, (body: Record<string, unknown>) => Record<string, unknown>]> => [
    [`without ${field}`, (body) => Object.fromEntries(Object.entries(body).filter(([key]) => key !== field))],
    [`${field} null`, (body) => ({ ...body, [field]: null })],
    [`${field} a number`, (body) => ({ ...body, [field]: 1 })],
    [`${field} an object`, (body) => ({ ...body, [field]: { value: "x" } })],
    [`${field} empty`, (body) => ({ ...body, [field]: "" })]
  ]),
  ["destinationType sideways", (body) => ({ ...body, destinationType: "sideways" })],
  ["destinationType internal_wallet", (body) => ({ ...body, destinationType: "internal_wallet" })],
  ["sourceAccountId not a uuid", (body) => ({ ...body, sourceAccountId: "not-a-uuid" })],
  ["destinationId not a uuid", (body) => ({ ...body, destinationId: "not-a-uuid" })]
]

export const fieldValidation = defineCheck({
  id: "txn.validation.fields",
  title: "A missing or malformed one of the five fields is 400 on initiate and calculate-fee, and stores nothing",
  requirements: ["TXN-VAL-1", "TXN-FEE-1", "ERR-CODE-1"],
  tags: ["transactions", "validation", "property"],
  needs: ["control", "accounts.activate", "accounts.credit"],
  expectsWork: false,
  async run(context) {
    // Every breaker alone once, so no single malformed field is left to chance; then random combinations.
    const tenant = await context.fixtures.tenant()
    const { source, destination } = await fundedPair(context, tenant)
    for (const [what, breaker] of fieldBreakers) {
      const body = breaker(transfer(source, destination.id, "1"))
      context.expectStatus(await tenant.client.calculateFee(body), 400, ["TXN-VAL-1", "TXN-FEE-1"], `calculate-fee ${what}`)
      context.expectStatus(await tenant.client.initiate(body), 400, ["TXN-VAL-1", "ERR-CODE-1"], `initiate ${what}`)
    }
    context.expect((await transactionCount(context, tenant, "TXN-VAL-1")) === 0, "TXN-VAL-1", "a refused initiation stored a transaction")
    await context.property(
      ["TXN-VAL-1"],
      [fc.subarray([...fieldBreakers], { minLength: 2, maxLength: 3 })],
      async (breakers) => {
        const tenant = await context.fixtures.tenant()
        const { source, destination } = await fundedPair(context, tenant)
        let body: Record<string, unknown> = transfer(source, destination.id, "1")
        for (const [, breaker] of breakers) body = breaker(body)
        const what = breakers.map(([label]) => label).join(", ")
        context.expectStatus(await tenant.client.calculateFee(body), 400, ["TXN-VAL-1", "TXN-FEE-1"], `calculate-fee ${what}`)
        context.expectStatus(await tenant.client.initiate(body), 400, ["TXN-VAL-1", "ERR-CODE-1"], `initiate ${what}`)
        context.expect((await transactionCount(context, tenant, "TXN-VAL-1")) === 0, "TXN-VAL-1", "a refused initiation stored a transaction")
      },
      { numRuns: Math.max(4, Math.round(context.settings.numRuns / 2)) }
    )
  }
})

export const assetMismatch = defineCheck({
  id: "txn.validation.asset-mismatch",
  title: "assetType differing from the source account's asset is 400",
  requirements: ["TXN-VAL-2", "TXN-FEE-1"],
  tags: ["transactions", "validation"],
  needs: ["control", "accounts.activate", "accounts.credit"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const { source, destination } = await fundedPair(context, tenant)
    for (const other of context.profile.assets.filter((asset) => asset.assetId !== source.assetId)) {
      const body = { ...transfer(source, destination.id, "1"), assetType: other.assetId }
      context.expectStatus(await tenant.client.calculateFee(body), 400, ["TXN-VAL-2", "TXN-FEE-1"], `calculate-fee ${source.assetId} source with assetType ${other.assetId}`)
      context.expectStatus(await tenant.client.initiate(body), 400, "TXN-VAL-2", `initiate ${source.assetId} source with assetType ${other.assetId}`)
    }
  }
})

export const sourceValidation = defineCheck({
  id: "txn.validation.source",
  title: "A foreign source is 403 (calculate-fee) or 403/404 (initiate); an inactive own source is a 4xx",
  requirements: ["TXN-VAL-3", "SCOPE-1"],
  tags: ["transactions", "validation", "scope"],
  needs: ["control", "accounts.activate", "accounts.credit"],
  async run(context) {
    const owner = await context.fixtures.tenant()
    const { source } = await fundedPair(context, owner)
    const other = await context.fixtures.otherTenant()
    const destination = await context.fixtures.activeAccount(other, source.assetId)
    const foreign = transfer(source, destination.id, "1")
    context.expectStatus(await other.client.calculateFee(foreign), 403, "TXN-VAL-3", "calculate-fee from another client's source")
    context.expectStatus(await other.client.initiate(foreign), [403, 404], "TXN-VAL-3", "initiate from another client's source")
    const unknownSource = { ...foreign, sourceAccountId: randomUuid() }
    context.expectStatus(await other.client.initiate(unknownSource), [403, 404], "TXN-VAL-3", "initiate from an unknown source")
    const pending = await context.fixtures.pendingAccount(other, source.assetId)
    const approved = await context.fixtures.approvedAccount(other, source.assetId)
    const rejected = await context.fixtures.pendingAccount(other, source.assetId)
    await other.client.rejectAccount(rejected.id)
    for (const [what, account] of [["pending", pending], ["rejected", rejected], ["approved but not active", approved]] as const) {
      const read = await other.client.getAccount(account.id)
      if (isRecord(read.json) && read.json["status"] === "active") continue
      for (const [endpoint, result] of [["calculate-fee", await other.client.calculateFee(transfer(account, destination.id, "1"))], ["initiate", await other.client.initiate(transfer(account, destination.id, "1"))]] as const) {
        context.expect(isClientError(result.status) && result.status !== 401, "TXN-VAL-3", `${endpoint} from a ${what} source answered ${result.status}`, result)
      }
    }
    context.expect((await transactionCount(context, other, "TXN-VAL-3")) === 0, "TXN-VAL-3", "a refused initiation stored a transaction")
  }
})

export const externalDestination = defineCheck({
  id: "txn.destination.external",
  title: "Only an APPROVED whitelisted address of the client is an external destination; others are 404",
  requirements: ["TXN-DEST-1", "WL-STATE-1", "TXN-FEE-1"],
  tags: ["transactions", "whitelist", "validation"],
  needs: ["control", "accounts.activate", "accounts.credit", "whitelisted-addresses.status"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const source = await context.fixtures.activeAccount(tenant, undefined, "100")
    const other = await context.fixtures.otherTenant()
    const refused = async (what: string, id: string): Promise<void> => {
      context.expectStatus(await tenant.client.calculateFee(transfer(source, id, "1", "external")), 404, ["TXN-DEST-1", "TXN-FEE-1"], `calculate-fee to ${what}`)
      context.expectStatus(await tenant.client.initiate(transfer(source, id, "1", "external")), 404, ["TXN-DEST-1", "WL-STATE-1"], `initiate to ${what}`)
    }
    // Two entries walk through every state, since an implementation may refuse the same address twice.
    const first = await context.fixtures.whitelist(tenant, source.assetId, "PENDING")
    await refused("a PENDING address", first.id)
    await context.control.setWhitelistStatus(first.id, "REJECTED")
    await refused("a REJECTED address", first.id)
    await refused("another client's APPROVED address", (await context.fixtures.whitelist(other, source.assetId, "APPROVED")).id)
    await refused("an unknown id", randomUuid())
    await refused("an account id", (await context.fixtures.activeAccount(tenant, source.assetId)).id)
    context.expect((await transactionCount(context, tenant, "TXN-DEST-1")) === 0, "TXN-DEST-1", "a refused external initiation stored a transaction")
    const approved = await context.fixtures.whitelist(tenant, source.assetId, "APPROVED")
    context.expectStatus(await tenant.client.initiate(transfer(source, approved.id, "1", "external")), 201, ["TXN-DEST-1", "WL-STATE-1"], "initiate to an APPROVED address")
    await context.control.setWhitelistStatus(approved.id, "ARCHIVED")
    await refused("an ARCHIVED address", approved.id)
    // An APPROVED address of another asset: a transfer of this asset cannot go there. Whether that is 400 (the
    // asset does not match) or 404 (no usable destination) is not shown; it is refused and stores nothing.
    const otherAsset = context.profile.assets.find((asset) => asset.assetId !== source.assetId && asset.sampleAddresses.valid.length > 0)
    if (otherAsset !== undefined) {
      const foreignAsset = await context.fixtures.whitelist(tenant, otherAsset.assetId, "APPROVED")
      for (const [what, result] of [["calculate-fee", await tenant.client.calculateFee(transfer(source, foreignAsset.id, "1", "external"))], ["initiate", await tenant.client.initiate(transfer(source, foreignAsset.id, "1", "external"))]] as const) {
        context.expect(refusedAsInvalid(result), "TXN-DEST-1", `${what} of ${source.assetId} to an APPROVED ${otherAsset.assetId} address answered ${result.status}; it should be refused (400 or 404)`, result)
      }
    }
    context.expect((await transactionCount(context, tenant, "TXN-DEST-1")) === 1, "TXN-DEST-1", "a refused external initiation stored a transaction")
  }
})

/** A refusal of an unusable destination: 400 or 404, the two answers the interface gives for bad transfers. */
const refusedAsInvalid = (result: HttpResult): boolean => result.status === 400 || result.status === 404

export const internalDestination = defineCheck({
  id: "txn.destination.internal",
  title: "Only an active account of the client is an internal destination; others are 404",
  requirements: ["TXN-DEST-2", "TXN-FEE-1"],
  tags: ["transactions", "validation"],
  needs: ["control", "accounts.activate", "accounts.credit", "whitelisted-addresses.status"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const source = await context.fixtures.activeAccount(tenant, undefined, "100")
    const other = await context.fixtures.otherTenant()
    const rejected = await context.fixtures.pendingAccount(tenant, source.assetId)
    await tenant.client.rejectAccount(rejected.id)
    const candidates: ReadonlyArray<[string, string]> = [
      ["a pending account", (await context.fixtures.pendingAccount(tenant, source.assetId)).id],
      ["a rejected account", rejected.id],
      ["another client's active account", (await context.fixtures.activeAccount(other, source.assetId)).id],
      ["an unknown id", randomUuid()],
      ["a whitelisted address id", (await context.fixtures.whitelist(tenant, source.assetId, "APPROVED")).id]
    ]
    for (const [what, id] of candidates) {
      context.expectStatus(await tenant.client.calculateFee(transfer(source, id, "1")), 404, ["TXN-DEST-2", "TXN-FEE-1"], `calculate-fee to ${what}`)
      context.expectStatus(await tenant.client.initiate(transfer(source, id, "1")), 404, "TXN-DEST-2", `initiate to ${what}`)
    }
    // The source itself, and an active account of another asset, are no destination for this transfer.
    const otherAsset = context.profile.assets.find((asset) => asset.assetId !== source.assetId)
    const unusable: Array<[string, string]> = [["the source account itself", source.id]]
    if (otherAsset !== undefined) unusable.push([`an active ${otherAsset.assetId} account`, (await context.fixtures.activeAccount(tenant, otherAsset.assetId)).id])
    for (const [what, id] of unusable) {
      for (const [call, result] of [["calculate-fee", await tenant.client.calculateFee(transfer(source, id, "1"))], ["initiate", await tenant.client.initiate(transfer(source, id, "1"))]] as const) {
        context.expect(refusedAsInvalid(result), "TXN-DEST-2", `${call} of ${source.assetId} to ${what} answered ${result.status}; it should be refused (400 or 404)`, result)
      }
    }
    context.expect((await transactionCount(context, tenant, "TXN-DEST-2")) === 0, "TXN-DEST-2", "a refused internal initiation stored a transaction")
    const active = await context.fixtures.activeAccount(tenant, source.assetId)
    context.expectStatus(await tenant.client.initiate(transfer(source, active.id, "1")), 201, "TXN-DEST-2", "initiate to an active account of the client")
  }
})

/** Amounts that are not plain positive decimals (TXN-PREC-1). */
export const malformedAmount = fc.oneof(
  fc.constantFrom("0", "0.0", "0.00000000", "-1", "-0.5", "1e-8", "1E8", "1.5e2", "2e0", "abc", "1.2.3", "1,5", "NaN", "Infinity", "0x10", "--1", "1-", "١٢", "+1", " 1", "1 ", ".5", "1.", "１", "1_000", "0b1", "1/2"),
  fc.tuple(fc.integer({ min: 1, max: 999 }), fc.integer({ min: -20, max: 20 }), fc.constantFrom("e", "E")).map(([mantissa, exponent, e]) => `${mantissa}${e}${exponent}`),
  fc.tuple(fc.integer({ min: 0, max: 99 }), fc.integer({ min: 1, max: 99 }), fc.integer({ min: 1, max: 9 })).map(([whole, fraction, exponent]) => `${whole}.${fraction}e-${exponent}`),
  fc.tuple(fc.integer({ min: 0, max: 9999 }), fc.nat({ max: 9999 })).map(([whole, fraction]) => `-${whole}.${fraction}`)
)

const amountFixture = async (context: CheckContext, assetId: string): Promise<{ tenant: Tenant; source: AccountFixture; destination: AccountFixture }> => {
  const tenant = await context.fixtures.tenant()
  const pair = await fundedPair(context, tenant, assetId, "1000000")
  return { tenant, ...pair }
}

export const malformedAmounts = defineCheck({
  id: "txn.amount.malformed",
  title: "Zero, negative, exponent and non-decimal amounts are 400 on initiate and calculate-fee",
  requirements: ["TXN-PREC-1", "TXN-FEE-1", "ERR-CODE-1"],
  tags: ["transactions", "validation", "property", "precision"],
  needs: ["control", "accounts.activate", "accounts.credit"],
  async run(context) {
    const assets = context.profile.assets
    await context.property(
      ["TXN-PREC-1"],
      [fc.constantFrom(...assets), fc.array(malformedAmount, { minLength: 1, maxLength: 4 })],
      async (asset, amounts) => {
        const { tenant, source, destination } = await amountFixture(context, asset.assetId)
        for (const amount of amounts) {
          context.expectStatus(await tenant.client.calculateFee(transfer(source, destination.id, amount)), 400, ["TXN-PREC-1", "TXN-FEE-1"], `calculate-fee with amount ${JSON.stringify(amount)}`)
          context.expectStatus(await tenant.client.initiate(transfer(source, destination.id, amount)), 400, ["TXN-PREC-1", "ERR-CODE-1"], `initiate with amount ${JSON.stringify(amount)}`)
        }
        context.expect((await transactionCount(context, tenant, "TXN-PREC-1")) === 0, "TXN-PREC-1", "a refused amount stored a transaction")
      }
    )
  }
})

/** An amount with exactly `places` decimal places, the last one non-zero, so no trailing-zero reading is involved. */
const amountWithPlaces = (places: number): fc.Arbitrary<string> =>
  fc
    .tuple(fc.integer({ min: 0, max: 99 }), fc.array(fc.integer({ min: 0, max: 9 }), { minLength: Math.max(0, places - 1), maxLength: Math.max(0, places - 1) }), fc.integer({ min: 1, max: 9 }))
    .map(([whole, digits, last]) => (places === 0 ? String(whole + 1) : `${whole}.${digits.join("")}${last}`))

const precisionCase = (assets: ReadonlyArray<AssetProfile>) =>
  fc.constantFrom(...assets).chain((asset) =>
    fc.integer({ min: Math.max(0, asset.precision - 2), max: asset.precision + 3 }).chain((places) => amountWithPlaces(places).map((amount) => ({ asset, places, amount })))
  )

export const precisionBoundary = defineCheck({
  id: "txn.precision.boundary",
  title: "Amounts up to the asset's precision pass; one place more is 400 (per asset of the profile)",
  requirements: ["TXN-PREC-2", "TXN-FEE-1", "GEN-DEC-1"],
  tags: ["transactions", "validation", "property", "precision"],
  needs: ["control", "accounts.activate", "accounts.credit"],
  expectsWork: true,
  async run(context) {
    await context.property(
      ["TXN-PREC-2"],
      // calculate-fee and initiate price the fee: an asset declared without fee estimation answers 400 whatever
      // the amount (txn.fee.provider checks that), so it tells nothing about precision.
      [precisionCase(context.profile.assets.filter((asset) => asset.feeEstimation))],
      async ({ asset, places, amount }) => {
        const { tenant, source, destination } = await amountFixture(context, asset.assetId)
        const valid = places <= asset.precision
        const what = `${asset.assetId} (precision ${asset.precision}) amount ${amount} with ${places} place(s)`
        const fee = await tenant.client.calculateFee(transfer(source, destination.id, amount))
        context.expectStatus(fee, valid ? 200 : 400, ["TXN-PREC-2", "TXN-FEE-1"], `calculate-fee ${what}`)
        if (valid) {
          const body = fee.json as Record<string, unknown>
          context.expect(typeof body["amount"] === "string" && new Decimal(body["amount"]).eq(amount), ["TXN-PREC-2", "GEN-DEC-1"], `the estimate's amount ${String(body["amount"])} is not ${amount}`, fee)
        }
        const initiate = await tenant.client.initiate(transfer(source, destination.id, amount))
        context.expectStatus(initiate, valid ? 201 : 400, "TXN-PREC-2", `initiate ${what}`)
        if (valid) {
          const body = initiate.json as Record<string, unknown>
          context.expect(typeof body["amount"] === "string" && new Decimal(body["amount"]).eq(amount), ["TXN-PREC-2", "GEN-DEC-1"], `the stored amount ${String(body["amount"])} is not ${amount}`, initiate)
        } else context.expect((await transactionCount(context, tenant, "TXN-PREC-2")) === 0, "TXN-PREC-2", "an over-precise amount stored a transaction")
      },
      { numRuns: context.settings.numRuns * 2 }
    )
    // The boundary of every asset whose fees can be estimated, whatever the run count: exactly the precision
    // passes, one place more is 400.
    for (const asset of context.profile.assets.filter((candidate) => candidate.feeEstimation)) {
      const { tenant, source, destination } = await amountFixture(context, asset.assetId)
      for (const places of [asset.precision, asset.precision + 1]) {
        const amount = places === 0 ? "1" : `0.${"0".repeat(places - 1)}7`
        const valid = places <= asset.precision
        context.expectStatus(await tenant.client.calculateFee(transfer(source, destination.id, amount)), valid ? 200 : 400, ["TXN-PREC-2", "TXN-FEE-1"], `calculate-fee ${asset.assetId} amount ${amount}`)
        context.expectStatus(await tenant.client.initiate(transfer(source, destination.id, amount)), valid ? 201 : 400, "TXN-PREC-2", `initiate ${asset.assetId} amount ${amount}`)
      }
    }
  }
})

export const feeNoSideEffect = defineCheck({
  id: "txn.fee.no-side-effect",
  title: "calculate-fee validates like initiate and creates no transaction, reserves nothing",
  requirements: ["TXN-FEE-1"],
  tags: ["transactions", "fee"],
  needs: ["control", "accounts.activate", "accounts.credit", "whitelisted-addresses.status"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    const { source, destination } = await fundedPair(context, tenant, undefined, "50")
    const before = await balanceOf(context, tenant, source.id, "TXN-FEE-1")
    for (let index = 0; index < 3; index += 1) {
      const fee = await tenant.client.calculateFee(transfer(source, destination.id, "10"))
      context.expectStatus(fee, 200, "TXN-FEE-1", "calculate-fee of a valid transfer")
    }
    context.expect((await transactionCount(context, tenant, "TXN-FEE-1")) === 0, "TXN-FEE-1", "calculate-fee stored a transaction")
    const after = await balanceOf(context, tenant, source.id, "TXN-FEE-1")
    context.expect(after.eq(before), "TXN-FEE-1", `calculate-fee changed the available balance from ${before.toString()} to ${after.toString()}`)
    // Whether calculate-fee checks funds is not shown: the profile may say, else either answer passes.
    const beyond = await tenant.client.calculateFee(transfer(source, destination.id, before.plus(1000).toFixed()))
    const checksFunds = context.profile.calculateFeeChecksFunds
    const allowed = checksFunds === true ? [400, 409, 422] : checksFunds === false ? [200] : [200, 400, 409, 422]
    context.expectStatus(beyond, allowed, "TXN-FEE-1", `calculate-fee beyond the available balance (profile: checksFunds ${String(checksFunds ?? "not declared")})`)
    const pendingWhitelist = await context.fixtures.whitelist(tenant, source.assetId, "PENDING")
    const bodies: ReadonlyArray<[string, Record<string, unknown>]> = [
      ["an unknown destination", transfer(source, randomUuid(), "1")],
      ["a pending whitelisted address", transfer(source, pendingWhitelist.id, "1", "external")],
      ["a zero amount", transfer(source, destination.id, "0")],
      ["a missing amount", { ...transfer(source, destination.id, "1"), amount: undefined }],
      ["a wrong assetType", { ...transfer(source, destination.id, "1"), assetType: "NOPE" }]
    ]
    for (const [what, body] of bodies) {
      const fee = await tenant.client.calculateFee(body)
      const initiate = await tenant.client.initiate(body)
      context.expect(fee.status === initiate.status, "TXN-FEE-1", `with ${what} calculate-fee answered ${fee.status} but initiate ${initiate.status}`, fee, initiate)
    }
  }
})

export const feeShapeCheck = defineCheck({
  id: "txn.fee.shape",
  title: "The estimate is {assetType, amount, estimatedFee (JSON number), feeAssetType}",
  requirements: ["TXN-FEE-2", "GEN-DEC-1"],
  tags: ["transactions", "fee", "shape"],
  needs: ["control", "accounts.activate", "accounts.credit"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    for (const asset of context.profile.assets.filter((candidate) => candidate.feeEstimation)) {
      const { source, destination } = await fundedPair(context, tenant, asset.assetId)
      const fee = await tenant.client.calculateFee(transfer(source, destination.id, "1"))
      context.expectStatus(fee, 200, "TXN-FEE-2", `calculate-fee for ${asset.assetId}`)
      const body = expectShape(context, feeShape, fee, ["TXN-FEE-2", "GEN-DEC-1"], "fee estimate")
      context.expect(body["assetType"] === asset.assetId, "TXN-FEE-2", `the estimate's assetType should be ${asset.assetId}`, fee)
      context.expect(typeof body["estimatedFee"] === "number" && body["estimatedFee"] >= 0, "TXN-FEE-2", "estimatedFee should be a non-negative JSON number", fee)
      context.expect(context.profile.assets.some((candidate) => candidate.assetId === body["feeAssetType"]), "TXN-FEE-2", `feeAssetType ${String(body["feeAssetType"])} is not an asset of the profile`, fee)
    }
  }
})

export const feeProvider = defineCheck({
  id: "txn.fee.provider",
  title: "A provider that cannot estimate is 400; a provider fault is 500; neither stores anything",
  requirements: ["TXN-FEE-3", "ERR-CODE-1"],
  tags: ["transactions", "fee"],
  needs: ["control", "accounts.activate", "accounts.credit", "provider-fault"],
  async run(context) {
    const tenant = await context.fixtures.tenant()
    for (const asset of context.profile.assets.filter((candidate) => !candidate.feeEstimation)) {
      const { source, destination } = await fundedPair(context, tenant, asset.assetId)
      context.expectStatus(await tenant.client.calculateFee(transfer(source, destination.id, "1")), 400, "TXN-FEE-3", `calculate-fee for ${asset.assetId}, declared without fee estimation`)
    }
    const { source, destination } = await fundedPair(context, tenant)
    const clientId = tenant.clientId ?? ""
    await context.control.setProviderFault(clientId, "unsupported")
    context.expectStatus(await tenant.client.calculateFee(transfer(source, destination.id, "1")), 400, "TXN-FEE-3", "calculate-fee while the provider cannot estimate")
    await context.control.setProviderFault(clientId, "error")
    context.expectStatus(await tenant.client.calculateFee(transfer(source, destination.id, "1")), 500, ["TXN-FEE-3", "ERR-CODE-1"], "calculate-fee while the provider fails")
    await context.control.setProviderFault(clientId, "none")
    context.expectStatus(await tenant.client.calculateFee(transfer(source, destination.id, "1")), 200, "TXN-FEE-3", "calculate-fee once the provider is back")
    context.expect((await transactionCount(context, tenant, "TXN-FEE-3")) === 0, "TXN-FEE-3", "fee estimation stored a transaction")
  }
})

/** A tenant with one pending, one completed and one failed transaction on two assets. */
const transactionsInEveryGroup = async (context: CheckContext) => {
  const tenant = await context.fixtures.tenant()
  const [firstAsset, secondAsset] = context.profile.assets.filter((asset) => asset.feeEstimation)
  const a = await fundedPair(context, tenant, firstAsset?.assetId)
  const b = await fundedPair(context, tenant, (secondAsset ?? firstAsset)?.assetId)
  const ids: Record<"pending" | "completed" | "failed", string> = { pending: "", completed: "", failed: "" }
  for (const [group, pair] of [["pending", a], ["completed", a], ["failed", b]] as const) {
    const result = await tenant.client.initiate(transfer(pair.source, pair.destination.id, "1"))
    context.expectStatus(result, 201, "TXN-INIT-1", "initiate")
    ids[group] = String((result.json as Record<string, unknown>)["id"])
    if (group !== "pending") await context.control.advanceTransaction(ids[group], group)
  }
  return { tenant, a, b, ids }
}

export const listFilters = defineCheck({
  id: "txn.list.filters",
  title: "Transaction filters accountId, assetType and status groups (case-insensitive, default all); other status values are 400",
  requirements: ["TXN-LIST-1", "ERR-CODE-1"],
  tags: ["transactions", "filters"],
  needs: ["control", "accounts.activate", "accounts.credit", "transactions.advance"],
  async run(context) {
    const { tenant, a, b, ids } = await transactionsInEveryGroup(context)
    const all = [ids.pending, ids.completed, ids.failed]
    const exactly = async (what: string, query: Record<string, string>, want: ReadonlyArray<string>): Promise<void> => {
      const result = await tenant.client.listTransactions(query)
      const page = envelopeOf(context, result, "TXN-LIST-1", what)
      const got = idsOf(page)
      context.expect(got.length === want.length && want.every((id) => got.includes(id)), "TXN-LIST-1", `${what} returned [${got.join(", ")}], expected [${want.join(", ")}]`, result)
      context.expect(page.total === want.length, "TXN-LIST-1", `${what} answered total ${page.total} for its ${want.length} matching transaction(s): a filtered total counts what the filter matches`, result)
    }
    await exactly("no filter", {}, all)
    await exactly("status=all", { status: "all" }, all)
    await exactly("status=ALL", { status: "ALL" }, all)
    await exactly("status=pending", { status: "pending" }, [ids.pending])
    await exactly("status=Completed", { status: "Completed" }, [ids.completed])
    await exactly("status=FAILED", { status: "FAILED" }, [ids.failed])
    await exactly("accountId of the first source", { accountId: a.source.id }, [ids.pending, ids.completed])
    if (a.source.assetId !== b.source.assetId) await exactly(`assetType=${b.source.assetId}`, { assetType: b.source.assetId }, [ids.failed])
    await exactly("accountId and status", { accountId: a.source.id, status: "completed" }, [ids.completed])
    for (const status of ["done", "AWAITING_SIGNATURE", "cancelled", "1"]) {
      context.expectStatus(await tenant.client.listTransactions({ status }), 400, ["TXN-LIST-1", "ERR-CODE-1"], `GET /transactions?status=${status}`)
    }
  }
})

export const statusGroups = defineCheck({
  id: "txn.list.groups",
  title: "Status groups follow the profile, do not overlap, and all is their union; every status is declared",
  requirements: ["TXN-LIST-2", "TXN-FLOW-1"],
  tags: ["transactions", "filters", "profile", "workflow"],
  needs: ["control", "accounts.activate", "accounts.credit", "transactions.advance"],
  async run(context) {
    const { tenant, ids } = await transactionsInEveryGroup(context)
    const pages: Record<string, Array<Record<string, unknown>>> = {}
    for (const group of ["all", "pending", "completed", "failed"]) {
      pages[group] = [...envelopeOf(context, await tenant.client.listTransactions({ status: group }), "TXN-LIST-2", `status=${group}`).items]
    }
    const idSet = (group: string): Array<string> => (pages[group] ?? []).map((item) => String(item["id"]))
    const union = [...idSet("pending"), ...idSet("completed"), ...idSet("failed")]
    context.expect(new Set(union).size === union.length, "TXN-LIST-2", `the groups overlap: ${union.join(", ")}`)
    context.expect(union.length === idSet("all").length && idSet("all").every((id) => union.includes(id)), "TXN-LIST-2", "all is not the union of the three groups")
    for (const group of ["pending", "completed", "failed"] as const) {
      for (const item of pages[group] ?? []) {
        const status = String(item["status"])
        context.expect(groupOf(context.profile, status) === group, ["TXN-LIST-2", "TXN-FLOW-1"], `status ${status} listed under ${group}, the profile puts it in ${groupOf(context.profile, status) ?? "no group"}`)
      }
      context.expect(idSet(group).includes(ids[group]), "TXN-LIST-2", `the ${group} transaction is missing from status=${group}`)
    }
    for (const [group, id] of Object.entries(ids)) {
      const read = await tenant.client.getTransactionStatus(id)
      const status = isRecord(read.json) ? String(read.json["status"]) : ""
      context.expect(groupOf(context.profile, status) === group, "TXN-FLOW-1", `a transaction advanced to ${group} reads ${status}`, read)
    }
  }
})

export const getByIds = defineCheck({
  id: "txn.get.ids",
  title: "GET transaction detail and status: 400 for ids that are not uuids, 404 for unknown ones",
  requirements: ["TXN-GET-1", "ERR-CODE-1"],
  tags: ["transactions", "property", "validation"],
  needs: [],
  async run(context) {
    await byIdCheck(context, "TXN-GET-1", [
      ["GET /transactions/{id}", (client, id) => client.getTransaction(id)],
      ["GET /transactions/{id}/status", (client, id) => client.getTransactionStatus(id)]
    ])
  }
})

export const transactionChecks = [
  initiateResponse,
  recordShapes,
  fieldValidation,
  assetMismatch,
  sourceValidation,
  externalDestination,
  internalDestination,
  malformedAmounts,
  precisionBoundary,
  feeNoSideEffect,
  feeShapeCheck,
  feeProvider,
  listFilters,
  statusGroups,
  getByIds
]

