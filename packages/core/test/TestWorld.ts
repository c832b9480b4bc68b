/**
 * A small world for the core's tests: the in-memory relay with repeatable ids, and steps that set up clients,
 * API users, active funded accounts and approved whitelisted addresses through the real operations.
 */
import { Effect, Layer, Redacted } from "effect"
import {
  Accounts,
  Administration,
  Asset,
  Authentication,
  Ids,
  Permission,
  type Principal,
  Relay,
  RelayConfig,
  WhitelistedAddresses
} from "@custody-relay/core"

export const allPermissions = Permission.permissionNames

/** Ids are sequential unless given: `Ids.Ids.layer` mints real UUIDv7s, with hex letters in them. */
export const layer = (config: Partial<RelayConfig.RelayConfigShape> = {}, ids: Layer.Layer<Ids.Ids> = Ids.Ids.layerSequential) =>
  Relay.layerMemory({ ids }).pipe(
    Layer.provideMerge(Layer.succeed(RelayConfig.RelayConfig, { ...RelayConfig.RelayConfig.defaultValue(), ...config }))
  )

export const newClient = Effect.map(Administration.createClient(), (client) => client.id)

export const newPrincipal = Effect.fnUntraced(function*(
  clientId: string | null,
  permissions: ReadonlyArray<Permission.Permission> = allPermissions,
  name?: string
) {
  const issued = yield* Administration.createApiUser(name === undefined ? { clientId, permissions } : { clientId, permissions, name })
  const principal = yield* Authentication.authenticate(issued.keyId, Redacted.value(issued.secret))
  return { principal, issued }
})

export const principalOf = Effect.fnUntraced(function*(
  clientId: string | null,
  permissions: ReadonlyArray<Permission.Permission> = allPermissions,
  name?: string
) {
  return (yield* newPrincipal(clientId, permissions, name)).principal
})

let accountCounter = 0

/** Creates, approves, activates and funds an account. */
export const activeAccount = Effect.fnUntraced(function*(
  principal: Principal.Principal,
  assetId: string,
  balance?: string,
  requiredApprovals?: number
) {
  const created = yield* Accounts.create(principal, {
    name: `Account ${++accountCounter}`,
    workspace: "custody",
    assetId
  })
  yield* Accounts.approve(principal, { accountId: created.id })
  yield* Accounts.activate(created.id)
  if (requiredApprovals !== undefined) yield* Accounts.setApprovalPolicy(created.id, requiredApprovals)
  if (balance !== undefined) yield* Accounts.deposit(created.id, balance)
  return created.id
})

let seedCounter = 0

/** A fresh valid address of the asset's chain. */
export const validAddress = (assetId: string) => {
  const asset = Asset.builtInAssets.find((a) => a.assetId === assetId)
  if (asset === undefined) throw new Error(`no built-in asset ${assetId}`)
  return asset.chain.addressFromSeed(new TextEncoder().encode(`test-address-${++seedCounter}`))
}

export const approvedWhitelistEntry = Effect.fnUntraced(function*(principal: Principal.Principal, assetType: string) {
  const created = yield* WhitelistedAddresses.create(principal, {
    name: `Exchange ${++seedCounter}`,
    address: validAddress(assetType),
    assetType
  })
  yield* WhitelistedAddresses.approve(created.id)
  return created.id
})

export { capturedLogs } from "./CapturedLogs.js"
