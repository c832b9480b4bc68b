/**
 * Demo data for a newcomer's first start: one client, five API users (a viewer, an initiator, two approvers and
 * an admin with every permission), three accounts approved, activated and funded, and an approved whitelisted
 * address. The secrets are returned once, to be printed once; only their hashes are stored.
 */
import {
  Accounts,
  Administration,
  Authentication,
  Permission,
  type Relay,
  WhitelistedAddresses
} from "@custody-relay/core"
import { Effect, Redacted } from "effect"

export interface DemoUser {
  readonly role: string
  readonly keyId: string
  readonly secret: string
  readonly permissions: ReadonlyArray<Permission.Permission>
}

export interface DemoCredentials {
  readonly clientId: string
  readonly users: ReadonlyArray<DemoUser>
  readonly accounts: ReadonlyArray<{ readonly id: string; readonly name: string; readonly assetId: string; readonly balance: string }>
  readonly whitelistedAddressId: string
}

const view: ReadonlyArray<Permission.Permission> = [
  "View custody account",
  "View whitelisted address",
  "View custody transaction list",
  "View custody transaction detail",
  "View custody transaction status"
]

const roles: ReadonlyArray<{ readonly role: string; readonly permissions: ReadonlyArray<Permission.Permission> }> = [
  { role: "viewer", permissions: view },
  {
    role: "initiator",
    permissions: [...view, "Initiate account transactions", "Initiate new custody account", "Initiate external wallet address"]
  },
  { role: "approver-1", permissions: [...view, "Approve transaction", "Approve new custody account"] },
  { role: "approver-2", permissions: [...view, "Approve transaction", "Approve new custody account"] },
  { role: "admin", permissions: Permission.permissionNames }
]

const demoAccounts = [
  { name: "Treasury BTC", workspace: "custody", assetId: "BTC", balance: "12.5" },
  { name: "Settlement ETH", workspace: "transactional", assetId: "ETH", balance: "250" },
  { name: "Payments USDC", workspace: "transactional", assetId: "USDC", balance: "1000000" }
] as const

/** A valid mainnet BTC address (BIP-173 test vector) used as the demo's external destination. */
const DEMO_DESTINATION = "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"

export const seedDemo: Effect.Effect<DemoCredentials, unknown, Relay.RelayServices> = Effect.gen(function*() {
  const client = yield* Administration.createClient("Demo client")
  const users: Array<DemoUser> = []
  for (const { role, permissions } of roles) {
    const credential = yield* Administration.createApiUser({ clientId: client.id, permissions, name: `demo-${role}` })
    users.push({ role, keyId: credential.keyId, secret: Redacted.value(credential.secret), permissions })
  }
  const admin = users[users.length - 1]
  if (admin === undefined) return yield* Effect.die(new Error("no demo admin"))
  const principal = yield* Authentication.authenticate(admin.keyId, admin.secret)
  const accounts: Array<DemoCredentials["accounts"][number]> = []
  for (const account of demoAccounts) {
    const created = yield* Accounts.create(principal, { name: account.name, workspace: account.workspace, assetId: account.assetId })
    yield* Accounts.approve(principal, { accountId: created.id })
    yield* Accounts.activate(created.id)
    yield* Accounts.deposit(created.id, account.balance)
    accounts.push({ id: created.id, name: account.name, assetId: account.assetId, balance: account.balance })
  }
  const entry = yield* WhitelistedAddresses.create(principal, { name: "Demo exchange", address: DEMO_DESTINATION, assetType: "BTC" })
  yield* WhitelistedAddresses.approve(entry.id)
  return { clientId: client.id, users, accounts, whitelistedAddressId: entry.id }
})

/** What a first start prints: every demo credential (once), the demo's ids, and a curl line to try. */
export const demoText = (demo: DemoCredentials, url: string): string => {
  const lines = [
    "",
    "Demo data created. Each secret is shown only now; store the ones you need.",
    "",
    ...demo.users.map((u) => `  ${u.role.padEnd(11)} x-api-key: ${u.keyId}   x-api-secret: ${u.secret}`),
    "",
    ...demo.accounts.map((a) => `  account ${a.id}  ${a.name} (${a.balance} ${a.assetId})`),
    `  whitelisted address ${demo.whitelistedAddressId} (BTC, approved)`,
    ""
  ]
  const viewer = demo.users[0]
  if (viewer !== undefined) {
    lines.push("Try:", `  curl -s ${url}/relay/v1/accounts -H 'x-api-key: ${viewer.keyId}' -H 'x-api-secret: ${viewer.secret}'`, "")
  }
  lines.push(`API reference: ${url}/docs (OpenAPI document: ${url}/relay/v1/openapi.json)`, "")
  return lines.join("\n") + "\n"
}
