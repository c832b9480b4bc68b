/**
 * Permissions and the one table that says which operation needs which (AUTH-PERM-1). The HTTP adapter maps each
 * route to an operation and reads the permission from here; tests and docs read the same table.
 */
import { Schema } from "effect"

/**
 * The interface's ten permission names, exactly as it writes them (they appear verbatim in 403 bodies), then ours
 * for our extensions.
 */
export const permissionNames = [
  "Initiate new custody account",
  "View custody account",
  "View whitelisted address",
  "View custody transaction list",
  "View custody transaction detail",
  "Initiate account transactions",
  "View custody transaction status",
  "Approve transaction",
  "Approve new custody account",
  "Initiate external wallet address",
  "View audit trail",
  "Manage webhooks"
] as const

export const Permission = Schema.Literals(permissionNames)
export type Permission = typeof Permission.Type

const known: ReadonlySet<unknown> = new Set(permissionNames)
const listed = permissionNames.map((p) => `"${p}"`).join(", ")

/**
 * Why these names cannot be granted, or undefined when each is one of permissionNames. An operator who misspells a
 * permission hears so, rather than holding a credential short of what was meant (the operator CLI and
 * Administration both ask here).
 */
export const refusalOf = (names: unknown): string | undefined => {
  if (!Array.isArray(names)) return `must be a list of permission names; the permissions are: ${listed}`
  const unknown: unknown = names.find((name) => !known.has(name))
  return unknown === undefined ? undefined : `unknown permission ${JSON.stringify(unknown) ?? String(unknown)}; the permissions are: ${listed}`
}

/** Every operation a principal (an API user of a client) can run, and the permission it needs. */
export const requiredPermission = {
  "accounts.list": "View custody account",
  "accounts.get": "View custody account",
  "accounts.create": "Initiate new custody account",
  "accounts.approve": "Approve new custody account",
  "accounts.reject": "Approve new custody account",
  "transactions.list": "View custody transaction list",
  "transactions.get": "View custody transaction detail",
  "transactions.status": "View custody transaction status",
  "transactions.calculateFee": "Initiate account transactions",
  "transactions.initiate": "Initiate account transactions",
  "transactions.approve": "Approve transaction",
  "transactions.reject": "Approve transaction",
  "whitelistedAddresses.create": "Initiate external wallet address",
  "whitelistedAddresses.list": "View whitelisted address",
  "whitelistedAddresses.get": "View whitelisted address",
  "auditTrail.list": "View audit trail",
  "webhooks.manage": "Manage webhooks"
} as const satisfies Record<string, Permission>

export type Operation = keyof typeof requiredPermission
export const operations = Object.keys(requiredPermission) as ReadonlyArray<Operation>
