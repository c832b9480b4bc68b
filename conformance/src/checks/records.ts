/**
 * The interface's records as the checks see them: their shapes, the list envelope, transfer bodies and the
 * usual fixture combination (a funded pair of accounts). Shapes cite the requirement they come from.
 */
import type { CheckContext } from "../Check.js"
import type { AccountFixture, Tenant } from "../Fixtures.js"
import {
  anyValue,
  array,
  decimalString,
  integer,
  isRecord,
  jsonNumber,
  literal,
  nonEmptyString,
  nullableString,
  nullableTimestamp,
  object,
  oneOf,
  string,
  timestamp,
  uuid,
  type Validator
} from "../Shape.js"
import type { HttpResult } from "../Transport.js"

const nullableAddress: Validator = nullableString

/** ACC-SHAPE-1: list and get records. */
export const accountRecordShape: Validator = object({
  id: uuid,
  name: string,
  description: nullableString,
  workspace: oneOf(["custody", "transactional"]),
  role: oneOf(["custody", "staking"]),
  assetId: string,
  chainType: string,
  address: nullableAddress,
  status: string,
  availableBalance: decimalString,
  availableBalanceCad: decimalString,
  createdAt: timestamp,
  updatedAt: timestamp
})

/** ACC-SHAPE-2: the create response carries only these fields. */
export const accountCreateShape: Validator = object(
  {
    id: uuid,
    name: string,
    workspace: oneOf(["custody", "transactional"]),
    assetId: string,
    role: oneOf(["custody", "staking"]),
    address: nullableAddress,
    description: nullableString,
    status: string,
    createdAt: timestamp
  },
  { exact: true }
)

const upperCase: Validator = (value, path) =>
  typeof value === "string" && value === value.toUpperCase() && value.length > 0 ? [] : [`${path} should be an upper-case status, got ${JSON.stringify(value)}`]
const lowerCase: Validator = (value, path) =>
  typeof value === "string" && value === value.toLowerCase() && value.length > 0 ? [] : [`${path} should be a lower-case status, got ${JSON.stringify(value)}`]

/** TXN-SHAPE-1 */
export const transactionItemShape: Validator = object({
  id: string,
  sourceAccountId: uuid,
  destinationId: uuid,
  destinationType: oneOf(["internal_wallet", "external_wallet"]),
  amount: decimalString,
  assetType: string,
  networkFee: decimalString,
  status: upperCase,
  direction: literal("OUT"),
  createdAt: timestamp,
  updatedAt: timestamp
})

/** TXN-SHAPE-3 */
export const approvalsShape: Validator = object({
  createdBy: nullableString,
  createdAt: nullableTimestamp,
  signedBy: nullableString,
  signedAt: nullableTimestamp,
  approvedBy: nullableString,
  approvedAt: nullableTimestamp,
  providerApprovedAt: nullableTimestamp,
  rejectedBy: nullableString,
  rejectedAt: nullableTimestamp
})

/** TXN-SHAPE-2 */
export const transactionDetailShape: Validator = object({
  id: string,
  providerTransactionId: nullableString,
  sourceAccountId: uuid,
  destinationId: uuid,
  destinationType: oneOf(["internal_wallet", "external_wallet"]),
  amount: decimalString,
  assetType: string,
  status: upperCase,
  subStatus: nullableString,
  approvals: approvalsShape,
  direction: literal("OUT"),
  // "value seen: WITHDRAWAL"; the full list is not shown, so any non-empty string is an answer.
  transactionType: nonEmptyString,
  networkFee: decimalString,
  createdAt: timestamp,
  updatedAt: timestamp
})

/** TXN-SHAPE-4 */
export const transactionStatusShape: Validator = object({ id: string, status: upperCase, subStatus: nullableString, updatedAt: timestamp })

/** TXN-INIT-1 */
export const initiateShape: Validator = object({
  id: uuid,
  status: lowerCase,
  sourceAccountId: uuid,
  destinationId: uuid,
  destinationType: oneOf(["internal", "external"]),
  amount: decimalString,
  assetType: string,
  createdAt: timestamp
})

/** TXN-FEE-2 */
export const feeShape: Validator = object({ assetType: string, amount: decimalString, estimatedFee: jsonNumber, feeAssetType: string })

/**
 * A fee estimate's `estimatedFee` as the server wrote it, for decimal arithmetic: `JSON.parse` rounds a JSON number
 * to a double, and a fee of more than about 15 significant digits would lose its last ones (the reviver's
 * `context.source` keeps them). Anything that is not a number is given as `String` makes of it.
 */
export const estimatedFeeText = (result: HttpResult): string => {
  let source: string | undefined
  try {
    JSON.parse(result.text, (key, value: unknown, context?: { readonly source?: string }) => {
      if (key === "estimatedFee" && typeof value === "number") source = context?.source
      return value
    })
  } catch {
    // Not JSON: result.json is undefined, and so is the fee.
  }
  return source ?? String(isRecord(result.json) ? result.json["estimatedFee"] : undefined)
}

/** WL-CREATE-2: no providerId on create. */
export const whitelistCreateShape: Validator = object(
  { id: uuid, name: string, address: string, description: nullableString, status: literal("PENDING"), assetType: string },
  { forbidden: ["providerId"] }
)

/** WL-SHAPE-1 */
export const whitelistRecordShape: Validator = object({
  id: uuid,
  providerId: nullableString,
  name: string,
  address: string,
  description: nullableString,
  status: string,
  assetType: string
})

/** PAGE-1 */
export const envelopeShape = (item: Validator = anyValue): Validator =>
  object({ items: array(item), total: integer, page: integer, limit: integer, totalPages: integer })

export interface Envelope {
  readonly items: ReadonlyArray<Record<string, unknown>>
  readonly total: number
  readonly page: number
  readonly limit: number
  readonly totalPages: number
}

/** Reads a 200 list answer as an envelope, failing the given requirement ids otherwise. */
export const envelopeOf = (context: CheckContext, result: HttpResult, requirementIds: string | ReadonlyArray<string>, what: string): Envelope => {
  context.expectStatus(result, 200, requirementIds, what)
  const problems = envelopeShape()(result.json, what)
  context.expect(problems.length === 0, ["PAGE-1", ...(typeof requirementIds === "string" ? [requirementIds] : requirementIds)], problems.join("; "), result)
  const body = result.json as Record<string, unknown>
  return {
    items: (body["items"] as Array<unknown>).filter(isRecord),
    total: body["total"] as number,
    page: body["page"] as number,
    limit: body["limit"] as number,
    totalPages: body["totalPages"] as number
  }
}

export const idsOf = (envelope: Envelope): Array<string> => envelope.items.map((item) => String(item["id"]))

/** Fails with the problems of a shape validation. */
export const expectShape = (context: CheckContext, validator: Validator, result: HttpResult, requirementIds: ReadonlyArray<string>, what: string): Record<string, unknown> => {
  const problems = validator(result.json, what)
  if (problems.length > 0) context.fail(requirementIds, problems.join("; "), result)
  return result.json as Record<string, unknown>
}

/** Two active accounts of one asset, the first funded: the usual start of a transaction check. */
export const fundedPair = async (context: CheckContext, tenant: Tenant, assetId?: string, balance = "1000"): Promise<{ source: AccountFixture; destination: AccountFixture }> => {
  const source = await context.fixtures.activeAccount(tenant, assetId, balance)
  const destination = await context.fixtures.activeAccount(tenant, source.assetId)
  return { source, destination }
}

export const transfer = (source: AccountFixture, destinationId: string, amount: string, destinationType: "internal" | "external" = "internal") => ({
  sourceAccountId: source.id,
  destinationId,
  destinationType,
  amount,
  assetType: source.assetId
})

export const randomUuid = (): string => crypto.randomUUID()

/** The 400 answers with an error body used in several checks. */
export const isClientError = (status: number): boolean => status >= 400 && status < 500

/**
 * The encodings of a filter with several values the kit sends (WL-LIST-1, ACC-LIST-1: "several values accepted",
 * the encoding not shown). A profile that declares one is held to it ("both": each must work); a silent profile
 * passes when either encoding gives the right list.
 */
export const severalValues = (
  context: CheckContext,
  name: string,
  values: ReadonlyArray<string>
): { readonly queries: ReadonlyArray<Record<string, string | ReadonlyArray<string>>>; readonly each: boolean } => {
  const repeated = { [name]: values }
  const comma = { [name]: values.join(",") }
  switch (context.profile.multiValueFilters) {
    case "repeat":
      return { queries: [repeated], each: true }
    case "comma":
      return { queries: [comma], each: true }
    case "both":
      return { queries: [repeated, comma], each: true }
    default:
      return { queries: [repeated, comma], each: false }
  }
}
