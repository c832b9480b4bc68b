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

export interface Profile {
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
      capabilities
    }
  }
}

/** The capabilities a profile declares, or undefined when it names none the kit knows (then the kit probes). */
export const declaredCapabilities = (profile: Profile): ReadonlySet<Capability> | undefined => {
  const known = profile.capabilities.filter((name): name is Capability => (capabilityNames as ReadonlyArray<string>).includes(name))
  return known.length === 0 ? undefined : new Set(known)
}

export const groupOf = (profile: Profile, status: string): TransactionGroup | undefined =>
  profile.transactionStatuses.find((entry) => entry.status === status)?.group

export const assetOf = (profile: Profile, assetId: string): AssetProfile | undefined => profile.assets.find((asset) => asset.assetId === assetId)
