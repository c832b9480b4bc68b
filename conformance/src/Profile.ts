/**
 * The implementation's profile: its answers to what the interface leaves "not shown" (status enumerations, groups,
 * rate-limit numbers, assets and their precision). Validated field by field so that `doctor` can say what is off.
 */
import { capabilityNames, type Capability } from "./Control.js"
import { array, integer, isRecord, object, oneOf, string, type Validator } from "./Shape.js"

export type TransactionGroup = "completed" | "pending" | "failed"

export interface AssetProfile {
  readonly assetId: string
  readonly precision: number
  readonly chainType: string
  readonly sampleAddresses: { readonly valid: ReadonlyArray<string>; readonly invalid: ReadonlyArray<string> }
  /** v1.1, optional: false when the provider cannot estimate fees for this asset (TXN-FEE-3). Default true. */
  readonly feeEstimation: boolean
}

/** How a transfer moves funds in `availableBalance` (docs/control-protocol.md, "funds"). */
export type FundsReading = "amount-and-fee" | "amount"
export const fundsReadings: ReadonlyArray<FundsReading> = ["amount-and-fee", "amount"]

/** The funds readings a check holds the target to: the declared one, or every one the interface allows. */
export const readingsOf = (profile: { readonly funds?: FundsReading | undefined }): ReadonlyArray<FundsReading> => (profile.funds === undefined ? fundsReadings : [profile.funds])

export type MultiValueEncoding = "repeat" | "comma" | "both"

/**
 * A relay call given by the profile as `METHOD /path` with an optional JSON body after it, `{id}` standing for the
 * transaction id in either: `POST /relay/v1/transactions/{id}/approve`, `POST /relay/v1/approvals {"transactionId":"{id}"}`.
 */
export interface CallTemplate {
  readonly method: string
  readonly path: string
  readonly body: string | undefined
}

export const fillTemplate = (template: CallTemplate, id: string): { readonly method: string; readonly path: string; readonly body: string | undefined } => ({
  method: template.method,
  path: template.path.replaceAll("{id}", encodeURIComponent(id)),
  body: template.body?.replaceAll("{id}", id)
})

/** The approval policy of a fresh account, and the calls that decide a transaction when the target offers them. */
export interface ApprovalPolicy {
  readonly required: number
  readonly approve: CallTemplate | undefined
  readonly reject: CallTemplate | undefined
}

/**
 * v1.2 declarations, each optional: where the profile is silent the kit accepts every reading the interface allows,
 * where it speaks the kit holds the target to it.
 */
export interface Declarations {
  /** A JSON pointer to the message string of error bodies other than the permission 403; null: bodies carry none. */
  readonly errorMessagePointer?: string | null
  readonly transactionTypes?: ReadonlyArray<string>
  readonly multiValueFilters?: MultiValueEncoding
  readonly calculateFeeChecksFunds?: boolean
  readonly funds?: FundsReading
  readonly approvals?: ApprovalPolicy
}

export interface Profile extends Declarations {
  readonly name: string
  readonly version: string
  readonly interfaceVersion: string
  readonly assets: ReadonlyArray<AssetProfile>
  readonly accountStatuses: ReadonlyArray<string>
  readonly transactionStatuses: ReadonlyArray<{ readonly status: string; readonly group: TransactionGroup }>
  readonly whitelistStatuses: ReadonlyArray<string>
  readonly rateLimit: { readonly limit: number; readonly windowSeconds: number }
  readonly capabilities: ReadonlyArray<string>
}

const profileShape: Validator = object({
  name: string,
  version: string,
  interfaceVersion: string,
  assets: array(
    object({
      assetId: string,
      precision: integer,
      chainType: string,
      sampleAddresses: object({ valid: array(string), invalid: array(string) })
    })
  ),
  accountStatuses: array(string),
  transactionStatuses: array(object({ status: string, group: oneOf(["completed", "pending", "failed"]) })),
  whitelistStatuses: array(string),
  rateLimit: object({ limit: integer, windowSeconds: integer }),
  capabilities: array(string)
})

export type ProfileParse = { readonly ok: true; readonly profile: Profile; readonly warnings: ReadonlyArray<string> } | { readonly ok: false; readonly problems: ReadonlyArray<string> }

const stringsOf = (value: unknown): Array<string> => (Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [])

/** Validates a profile as the control protocol describes it, and the consistency rules the kit relies on. */
export const parseProfile = (value: unknown): ProfileParse => {
  const problems = profileShape(value, "profile")
  if (problems.length > 0 || !isRecord(value)) return { ok: false, problems }
  const warnings: Array<string> = []
  const assets: Array<AssetProfile> = []
  for (const raw of Array.isArray(value["assets"]) ? value["assets"] : []) {
    if (!isRecord(raw) || !isRecord(raw["sampleAddresses"])) continue
    const asset: AssetProfile = {
      assetId: String(raw["assetId"]),
      precision: Number(raw["precision"]),
      chainType: String(raw["chainType"]),
      sampleAddresses: { valid: stringsOf(raw["sampleAddresses"]["valid"]), invalid: stringsOf(raw["sampleAddresses"]["invalid"]) },
      feeEstimation: raw["feeEstimation"] !== false
    }
    if (asset.precision < 0 || asset.precision > 30) problems.push(`profile asset ${asset.assetId}: precision ${asset.precision} out of 0..30`)
    if (asset.sampleAddresses.valid.length === 0) problems.push(`profile asset ${asset.assetId}: no valid sample address`)
    assets.push(asset)
  }
  if (assets.length === 0) problems.push("profile declares no asset")
  const transactionStatuses: Array<{ status: string; group: TransactionGroup }> = []
  for (const raw of Array.isArray(value["transactionStatuses"]) ? value["transactionStatuses"] : []) {
    if (isRecord(raw)) transactionStatuses.push({ status: String(raw["status"]), group: raw["group"] as TransactionGroup })
  }
  for (const group of ["completed", "pending", "failed"] as const) {
    if (!transactionStatuses.some((entry) => entry.group === group)) problems.push(`profile declares no transaction status in group ${group}`)
  }
  const accountStatuses = stringsOf(value["accountStatuses"])
  for (const status of ["pending_approval", "approved", "rejected", "active"]) {
    if (!accountStatuses.includes(status)) problems.push(`profile accountStatuses lacks ${status}, which the interface names`)
  }
  const whitelistStatuses = stringsOf(value["whitelistStatuses"])
  for (const status of ["PENDING", "APPROVED", "REJECTED", "ARCHIVED"]) {
    if (!whitelistStatuses.includes(status)) problems.push(`profile whitelistStatuses lacks ${status}, which the interface names`)
  }
  const capabilities = stringsOf(value["capabilities"])
  for (const capability of capabilities) {
    if (!(capabilityNames as ReadonlyArray<string>).includes(capability)) warnings.push(`profile capability ${capability} is unknown to this kit`)
  }
  const rate = value["rateLimit"] as { limit: number; windowSeconds: number }
  const declarations = parseDeclarations(value, problems)
  if (problems.length > 0) return { ok: false, problems }
  return {
    ok: true,
    warnings,
    profile: {
      name: String(value["name"]),
      version: String(value["version"]),
      interfaceVersion: String(value["interfaceVersion"]),
      assets,
      accountStatuses,
      transactionStatuses,
      whitelistStatuses,
      rateLimit: { limit: rate.limit, windowSeconds: rate.windowSeconds },
      capabilities,
      ...declarations
    }
  }
}

const callTemplate = (value: unknown, name: string, problems: Array<string>): CallTemplate | undefined => {
  if (value === undefined) return undefined
  const match = typeof value === "string" ? /^(GET|POST|PUT|PATCH|DELETE) (\/\S*)(?: (.+))?$/.exec(value) : null
  const template = match === null ? undefined : { method: match[1] ?? "POST", path: match[2] ?? "", body: match[3] }
  const bodyIsJson = (() => {
    try {
      return template?.body === undefined || (JSON.parse(template.body.replaceAll("{id}", "x")), true)
    } catch {
      return false
    }
  })()
  if (template === undefined || !bodyIsJson || !(template.path.includes("{id}") || (template.body ?? "").includes("{id}"))) {
    problems.push(`profile ${name} should be "METHOD /path" with {id} in the path or in a JSON body after it, got ${JSON.stringify(value)}`)
    return undefined
  }
  return template
}

/** The optional v1.2 declarations; a declaration that is present but malformed is a problem, never ignored. */
const parseDeclarations = (value: Record<string, unknown>, problems: Array<string>): Declarations => {
  const declarations: { -readonly [K in keyof Declarations]: Declarations[K] } = {}
  const errorBody = value["errorBody"]
  if (errorBody !== undefined) {
    const pointer = isRecord(errorBody) ? errorBody["messagePointer"] : undefined
    if (pointer === null || (typeof pointer === "string" && (pointer === "" || pointer.startsWith("/")))) declarations.errorMessagePointer = pointer
    else problems.push(`profile errorBody.messagePointer should be a JSON pointer ("/message") or null, got ${JSON.stringify(pointer)}`)
  }
  const types = value["transactionTypes"]
  if (types !== undefined) {
    if (Array.isArray(types) && types.length > 0 && types.every((type) => typeof type === "string" && type.length > 0)) declarations.transactionTypes = types as Array<string>
    else problems.push(`profile transactionTypes should be a non-empty array of strings, got ${JSON.stringify(types)}`)
  }
  const multi = value["multiValueFilters"]
  if (multi !== undefined) {
    if (multi === "repeat" || multi === "comma" || multi === "both") declarations.multiValueFilters = multi
    else problems.push(`profile multiValueFilters should be "repeat", "comma" or "both", got ${JSON.stringify(multi)}`)
  }
  const fee = value["calculateFee"]
  if (fee !== undefined) {
    const checksFunds = isRecord(fee) ? fee["checksFunds"] : undefined
    if (typeof checksFunds === "boolean") declarations.calculateFeeChecksFunds = checksFunds
    else problems.push(`profile calculateFee.checksFunds should be true or false, got ${JSON.stringify(checksFunds)}`)
  }
  const funds = value["funds"]
  if (funds !== undefined) {
    const reserve = isRecord(funds) ? funds["reserve"] : undefined
    if ((fundsReadings as ReadonlyArray<unknown>).includes(reserve)) declarations.funds = reserve as FundsReading
    else problems.push(`profile funds.reserve should be one of ${fundsReadings.join(", ")}, got ${JSON.stringify(reserve)}`)
  }
  const approvals = value["approvals"]
  if (approvals !== undefined) {
    const required = isRecord(approvals) ? approvals["required"] : undefined
    if (!isRecord(approvals) || typeof required !== "number" || !Number.isInteger(required) || required < 0 || required > 20) {
      problems.push(`profile approvals.required should be an integer from 0 to 20, got ${JSON.stringify(required)}`)
    } else {
      const approve = callTemplate(approvals["approve"], "approvals.approve", problems)
      const reject = callTemplate(approvals["reject"], "approvals.reject", problems)
      if ((approve === undefined) !== (reject === undefined)) problems.push("profile approvals should give both approve and reject, or neither")
      declarations.approvals = { required, approve, reject }
    }
  }
  return declarations
}

/** The value at a JSON pointer (RFC 6901), or undefined when the path does not exist. */
export const atPointer = (value: unknown, pointer: string): unknown => {
  if (pointer === "") return value
  let current = value
  for (const raw of pointer.slice(1).split("/")) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~")
    if (Array.isArray(current) && /^\d+$/.test(key)) current = current[Number(key)]
    else if (isRecord(current) && Object.hasOwn(current, key)) current = current[key]
    else return undefined
  }
  return current
}

/** The capabilities a profile declares, or undefined when it names none the kit knows (then the kit probes). */
export const declaredCapabilities = (profile: Profile): ReadonlySet<Capability> | undefined => {
  const known = profile.capabilities.filter((name): name is Capability => (capabilityNames as ReadonlyArray<string>).includes(name))
  return known.length === 0 ? undefined : new Set(known)
}

export const groupOf = (profile: Profile, status: string): TransactionGroup | undefined =>
  profile.transactionStatuses.find((entry) => entry.status === status)?.group

export const assetOf = (profile: Profile, assetId: string): AssetProfile | undefined => profile.assets.find((asset) => asset.assetId === assetId)
