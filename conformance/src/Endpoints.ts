/**
 * The interface's endpoints as the kit sees them: method, path template and the permission each requires
 * (AUTH-PERM-1). One table, read by the permission, scope, credential and fuzz matrices.
 */
export const permissions = {
  viewAccount: "View custody account",
  createAccount: "Initiate new custody account",
  approveAccount: "Approve new custody account",
  viewTransactionList: "View custody transaction list",
  viewTransactionDetail: "View custody transaction detail",
  viewTransactionStatus: "View custody transaction status",
  initiateTransaction: "Initiate account transactions",
  createWhitelist: "Initiate external wallet address",
  viewWhitelist: "View whitelisted address",
  approveTransaction: "Approve transaction"
} as const

export type Permission = (typeof permissions)[keyof typeof permissions]

export const allPermissions: ReadonlyArray<Permission> = Object.values(permissions)

export const apiPrefix = "/relay/v1"

export type EndpointKey =
  | "listAccounts"
  | "getAccount"
  | "createAccount"
  | "approveAccount"
  | "rejectAccount"
  | "listTransactions"
  | "getTransaction"
  | "getTransactionStatus"
  | "calculateFee"
  | "initiateTransaction"
  | "createWhitelist"
  | "listWhitelist"
  | "getWhitelist"

export interface Endpoint {
  readonly key: EndpointKey
  readonly method: "GET" | "POST"
  /** Path after the prefix; `{id}` marks the path parameter. */
  readonly path: string
  readonly permission: Permission
  readonly hasBody: boolean
  /** Which resource the `{id}` or the body's reference names, for the scope matrix. */
  readonly resource: "account" | "transaction" | "whitelist" | "none"
}

export const endpoints: ReadonlyArray<Endpoint> = [
  { key: "listAccounts", method: "GET", path: "/accounts", permission: permissions.viewAccount, hasBody: false, resource: "none" },
  { key: "getAccount", method: "GET", path: "/accounts/{id}", permission: permissions.viewAccount, hasBody: false, resource: "account" },
  { key: "createAccount", method: "POST", path: "/accounts", permission: permissions.createAccount, hasBody: true, resource: "none" },
  { key: "approveAccount", method: "POST", path: "/accounts/approve", permission: permissions.approveAccount, hasBody: true, resource: "account" },
  { key: "rejectAccount", method: "POST", path: "/accounts/reject", permission: permissions.approveAccount, hasBody: true, resource: "account" },
  { key: "listTransactions", method: "GET", path: "/transactions", permission: permissions.viewTransactionList, hasBody: false, resource: "none" },
  { key: "getTransaction", method: "GET", path: "/transactions/{id}", permission: permissions.viewTransactionDetail, hasBody: false, resource: "transaction" },
  { key: "getTransactionStatus", method: "GET", path: "/transactions/{id}/status", permission: permissions.viewTransactionStatus, hasBody: false, resource: "transaction" },
  { key: "calculateFee", method: "POST", path: "/transactions/calculate-fee", permission: permissions.initiateTransaction, hasBody: true, resource: "account" },
  { key: "initiateTransaction", method: "POST", path: "/transactions/initiate", permission: permissions.initiateTransaction, hasBody: true, resource: "account" },
  { key: "createWhitelist", method: "POST", path: "/whitelisted-addresses", permission: permissions.createWhitelist, hasBody: true, resource: "none" },
  { key: "listWhitelist", method: "GET", path: "/whitelisted-addresses", permission: permissions.viewWhitelist, hasBody: false, resource: "none" },
  { key: "getWhitelist", method: "GET", path: "/whitelisted-addresses/{id}", permission: permissions.viewWhitelist, hasBody: false, resource: "whitelist" }
]

export const endpointPath = (e: Endpoint, id = "00000000-0000-4000-8000-000000000000"): string =>
  apiPrefix + e.path.replace("{id}", encodeURIComponent(id))
