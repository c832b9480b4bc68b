/**
 * The permission table and client scope: every operation is refused without its permission with the exact
 * permission name (AUTH-PERM-1), and any operation on another client's record is NotFound, never a leak (SCOPE-1).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import { Accounts, AuditTrail, Permission, type Principal, type Relay, Transactions, Webhooks, WhitelistedAddresses } from "@custody-relay/core"
import { failureOf, failureTag } from "./Failure.js"
import { activeAccount, approvedWhitelistEntry, layer, newClient, principalOf } from "./TestWorld.js"

const uuid = "00000000-0000-7000-8000-000000000001"
const page = { page: 1, limit: 20 }
const transfer = { sourceAccountId: uuid, destinationId: uuid, destinationType: "internal", amount: "1", assetType: "BTC" } as const

/** One call per operation of the permission table. */
const callsByOperation: Record<Permission.Operation, (p: Principal.Principal) => Effect.Effect<unknown, { readonly _tag: string }, never>> = {
  "accounts.list": (p) => Accounts.list(p, {}, page).pipe(Effect.provide(layer())),
  "accounts.get": (p) => Accounts.get(p, uuid).pipe(Effect.provide(layer())),
  "accounts.create": (p) => Accounts.create(p, { name: "abc", workspace: "custody", assetId: "BTC" }).pipe(Effect.provide(layer())),
  "accounts.approve": (p) => Accounts.approve(p, { accountId: uuid }).pipe(Effect.provide(layer())),
  "accounts.reject": (p) => Accounts.reject(p, { accountId: uuid }).pipe(Effect.provide(layer())),
  "transactions.list": (p) => Transactions.list(p, {}, page).pipe(Effect.provide(layer())),
  "transactions.get": (p) => Transactions.get(p, uuid).pipe(Effect.provide(layer())),
  "transactions.status": (p) => Transactions.status(p, uuid).pipe(Effect.provide(layer())),
  "transactions.calculateFee": (p) => Transactions.calculateFee(p, transfer).pipe(Effect.provide(layer())),
  "transactions.initiate": (p) => Transactions.initiate(p, transfer).pipe(Effect.provide(layer())),
  "transactions.approve": (p) => Transactions.approve(p, uuid).pipe(Effect.provide(layer())),
  "transactions.reject": (p) => Transactions.reject(p, uuid).pipe(Effect.provide(layer())),
  "whitelistedAddresses.create": (p) =>
    WhitelistedAddresses.create(p, { name: "x", address: "x", assetType: "BTC" }).pipe(Effect.provide(layer())),
  "whitelistedAddresses.list": (p) => WhitelistedAddresses.list(p, {}, page).pipe(Effect.provide(layer())),
  "whitelistedAddresses.get": (p) => WhitelistedAddresses.get(p, uuid).pipe(Effect.provide(layer())),
  "auditTrail.list": (p) => AuditTrail.list(p, {}, page).pipe(Effect.provide(layer())),
  "webhooks.manage": (p) => Webhooks.list(p).pipe(Effect.provide(layer()))
}

describe("Permissions and scope", () => {
  it("AUTH-PERM-1: the table names the interface's ten permissions exactly as it writes them, and ours for the audit trail and webhooks", () => {
    assert.strictEqual(new Set(Object.values(Permission.requiredPermission)).size, 12)
    assert.deepStrictEqual([...new Set(Object.values(Permission.requiredPermission))].sort(), [...Permission.permissionNames].sort())
  })

  it.effect("AUTH-PERM-1: every operation without its permission is PermissionDenied naming that permission", () =>
    Effect.gen(function*() {
      for (const operation of Permission.operations) {
        const required = Permission.requiredPermission[operation]
        const p: Principal.Principal = {
          apiUserId: uuid as Principal.Principal["apiUserId"],
          clientId: uuid as Principal.Principal["clientId"],
          name: "n",
          keyId: "k",
          permissions: Permission.permissionNames.filter((n) => n !== required)
        }
        const error = failureOf(yield* Effect.exit(callsByOperation[operation](p)))
        assert.strictEqual(error?._tag, "PermissionDenied", operation)
        assert.strictEqual((error as { permission?: string } | undefined)?.permission, required)
      }
    }))

  it("SCOPE-1: any by-id operation on another client's record is NotFound, as for an id that does not exist", async () => {
    type Target = "account" | "transaction" | "whitelist"
    const op = fc.constantFrom<readonly [Target, string]>(
      ["account", "get"], ["account", "approve"], ["account", "reject"], ["transaction", "get"], ["transaction", "status"],
      ["transaction", "approve"], ["transaction", "reject"], ["whitelist", "get"], ["account", "as-source"],
      ["account", "as-destination"], ["whitelist", "as-destination"]
    )
    await fc.assert(
      fc.asyncProperty(op, fc.boolean(), async ([target, action], foreign) => {
        const program = Effect.gen(function*() {
          const owner = yield* principalOf(yield* newClient)
          const stranger = yield* principalOf(yield* newClient)
          const strangerSource = yield* activeAccount(stranger, "BTC", "1")
          const account = yield* activeAccount(owner, "BTC", "1")
          const other = yield* activeAccount(owner, "BTC")
          const whitelist = yield* approvedWhitelistEntry(owner, "BTC")
          const { id: tx } = yield* Transactions.initiate(owner, {
            sourceAccountId: account, destinationId: other, destinationType: "internal", amount: "0.1", assetType: "BTC"
          })
          const ids = { account, transaction: tx, whitelist }
          const id = foreign ? ids[target] : "00000000-0000-7000-8000-0000000fffff"
          const caller = stranger
          const run: Effect.Effect<unknown, { readonly _tag: string }, Relay.RelayServices> = (() => {
            switch (`${target}:${action}`) {
              case "account:get": return Accounts.get(caller, id)
              case "account:approve": return Accounts.approve(caller, { accountId: id })
              case "account:reject": return Accounts.reject(caller, { accountId: id })
              case "transaction:get": return Transactions.get(caller, id)
              case "transaction:status": return Transactions.status(caller, id)
              case "transaction:approve": return Transactions.approve(caller, id)
              case "transaction:reject": return Transactions.reject(caller, id)
              case "whitelist:get": return WhitelistedAddresses.get(caller, id)
              case "account:as-source":
                return Transactions.initiate(caller, { ...transfer, sourceAccountId: id, destinationId: strangerSource })
              case "account:as-destination":
                return Transactions.initiate(caller, { ...transfer, amount: "0.1", sourceAccountId: strangerSource, destinationId: id })
              default:
                return Transactions.initiate(caller, {
                  ...transfer, amount: "0.1", sourceAccountId: strangerSource, destinationId: id, destinationType: "external"
                })
            }
          })()
          const tag = failureTag(yield* Effect.exit(run))
          const expected = action === "as-source" ? "SourceAccountInaccessible" : action === "as-destination" ? "DestinationNotFound" : "NotFound"
          assert.strictEqual(tag, expected, `${target} ${action} foreign=${foreign}`)
        })
        await Effect.runPromise(program.pipe(Effect.provide(layer())))
      }),
      { numRuns: 60 }
    )
  })
})
