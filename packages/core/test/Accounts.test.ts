import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { Accounts, CustodyProvider, Ids, Reconciliation, Relay, RelayConfig } from "@custody-relay/core"
import { Assets, builtInAssets, makeAssets } from "../src/Asset.js"
import { failureTag } from "./Failure.js"
import { activeAccount, layer, newClient, principalOf } from "./TestWorld.js"

describe("Accounts", () => {
  it.effect("ACC-CREATE-1 ACC-SHAPE-2: create answers the nine fields, pending_approval, address null", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const created = yield* Accounts.create(p, { name: "Treasury", workspace: "custody", assetId: "BTC" })
      assert.deepStrictEqual(Object.keys(created).sort(), [
        "address", "assetId", "createdAt", "description", "id", "name", "role", "status", "workspace"
      ])
      assert.strictEqual(created.status, "pending_approval")
      assert.strictEqual(created.address, null)
      assert.strictEqual(created.role, "custody")
      assert.strictEqual(created.description, "")
    }).pipe(Effect.provide(layer())))

  it.effect("ACC-SHAPE-1: get and list show the full record with balances as decimal strings", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const id = yield* activeAccount(p, "BTC", "1.5")
      const view = yield* Accounts.get(p, id)
      assert.deepStrictEqual(Object.keys(view).sort(), [
        "address", "assetId", "availableBalance", "availableBalanceCad", "chainType", "createdAt", "description", "id",
        "name", "role", "status", "updatedAt", "workspace"
      ])
      assert.strictEqual(view.availableBalance, "1.5")
      assert.strictEqual(view.availableBalanceCad, "196875.83")
      assert.strictEqual(view.chainType, "BITCOIN")
      assert.strictEqual(view.status, "active")
      assert.isString(view.address)
      const page = yield* Accounts.list(p, {}, { page: 1, limit: 20 })
      assert.strictEqual(page.total, 1)
      assert.deepStrictEqual(page.items[0], view)
    }).pipe(Effect.provide(layer())))

  it.effect("ACC-CREATE-2: an unsupported asset is refused", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const exit = yield* Effect.exit(Accounts.create(p, { name: "Doge", workspace: "custody", assetId: "DOGE" }))
      assert.strictEqual(failureTag(exit), "UnsupportedAsset")
    }).pipe(Effect.provide(layer())))

  it.effect("ACC-CREATE-3: identical parameters are a conflict; a rejected account frees its identity", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const input = { name: "Ops", workspace: "transactional", assetId: "ETH", role: "staking" } as const
      const first = yield* Accounts.create(p, input)
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.create(p, input))), "DuplicateAccount")
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.create(p, { ...input, description: "other" }))), "DuplicateAccount")
      yield* Accounts.create(p, { ...input, role: "custody" })
      yield* Accounts.reject(p, { accountId: first.id })
      yield* Accounts.create(p, input)
      // Another client may use the same parameters.
      yield* Accounts.create(yield* principalOf(yield* newClient), input)
    }).pipe(Effect.provide(layer())))

  it.effect("ACC-APPR-1 ACC-APPR-2: approve then reject or approve again is refused and changes nothing", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const { id } = yield* Accounts.create(p, { name: "Cold", workspace: "custody", assetId: "USDC" })
      assert.deepStrictEqual(yield* Accounts.approve(p, { accountId: id }), { accountId: id, status: "approved" })
      const before = yield* Accounts.get(p, id)
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.approve(p, { accountId: id }))), "TransitionNotAllowed")
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.reject(p, { accountId: id }))), "TransitionNotAllowed")
      assert.deepStrictEqual(yield* Accounts.get(p, id), before)
    }).pipe(Effect.provide(layer())))

  it.effect("ACC-APPR-1 ACC-ADDR-1: a rejected account never gets an address and cannot be activated", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const { id } = yield* Accounts.create(p, { name: "Nope", workspace: "custody", assetId: "SOL" })
      assert.deepStrictEqual(yield* Accounts.reject(p, { accountId: id }), { accountId: id, status: "rejected" })
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.activate(id))), "TransitionNotAllowed")
      assert.strictEqual((yield* Accounts.get(p, id)).address, null)
    }).pipe(Effect.provide(layer())))

  it.effect("ACC-ADDR-1 ACC-ACTIVE-1: the address appears only on activation; activating again answers as it is", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const { id } = yield* Accounts.create(p, { name: "Hot", workspace: "transactional", assetId: "ETH" })
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.activate(id))), "TransitionNotAllowed")
      yield* Accounts.approve(p, { accountId: id })
      assert.strictEqual((yield* Accounts.get(p, id)).address, null)
      const active = yield* Accounts.activate(id)
      assert.strictEqual(active.status, "active")
      assert.match(active.address ?? "", /^0x[0-9a-fA-F]{40}$/)
      assert.deepStrictEqual(yield* Accounts.activate(id), active)
    }).pipe(Effect.provide(layer())))

  it.effect("ACC-ACTIVE-1: with activateOnApproval the approve answer still says approved, and the account is active", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const { id } = yield* Accounts.create(p, { name: "Auto", workspace: "custody", assetId: "LTC" })
      assert.deepStrictEqual(yield* Accounts.approve(p, { accountId: id }), { accountId: id, status: "approved" })
      assert.strictEqual((yield* Accounts.get(p, id)).status, "active")
    }).pipe(Effect.provide(layer({ activateOnApproval: true }))))

  it.effect("SCOPE-1 ACC-APPR-3 ACC-GET-1: another client's account is NotFound everywhere; a malformed id is invalid", () =>
    Effect.gen(function*() {
      const owner = yield* principalOf(yield* newClient)
      const stranger = yield* principalOf(yield* newClient)
      const { id } = yield* Accounts.create(owner, { name: "Mine", workspace: "custody", assetId: "BTC" })
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.get(stranger, id))), "NotFound")
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.approve(stranger, { accountId: id }))), "NotFound")
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.reject(stranger, { accountId: id }))), "NotFound")
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.get(owner, "not-a-uuid"))), "InvalidRequest")
      assert.strictEqual(
        failureTag(yield* Effect.exit(Accounts.get(owner, "00000000-0000-7000-8000-0000000fffff"))),
        "NotFound"
      )
      assert.strictEqual((yield* Accounts.get(owner, id)).status, "pending_approval")
      assert.strictEqual((yield* Accounts.list(stranger, {}, { page: 1, limit: 20 })).total, 0)
    }).pipe(Effect.provide(layer())))

  it.effect("ACC-LIST-1 PAGE-2 PAGE-4: filters hold for every record and pages partition the list", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      for (const [i, assetId] of ["BTC", "ETH", "USDC", "BTC", "SOL"].entries()) {
        yield* Accounts.create(p, {
          name: `Desk ${i} ${assetId}`,
          workspace: i % 2 === 0 ? "custody" : "transactional",
          assetId,
          role: i === 4 ? "staking" : "custody"
        })
      }
      const btc = yield* Accounts.list(p, { assetId: "BTC" }, { page: 1, limit: 20 })
      assert.strictEqual(btc.total, 2)
      assert.isTrue(btc.items.every((a) => a.assetId === "BTC"))
      const search = yield* Accounts.list(p, { search: "desk 2" }, { page: 1, limit: 20 })
      assert.deepStrictEqual(search.items.map((a) => a.name), ["Desk 2 USDC"])
      const staking = yield* Accounts.list(p, { roles: ["staking"] }, { page: 1, limit: 20 })
      assert.deepStrictEqual(staking.items.map((a) => a.assetId), ["SOL"])
      const both = yield* Accounts.list(p, { roles: ["staking", "custody"], workspace: "custody" }, { page: 1, limit: 20 })
      assert.strictEqual(both.total, 3)
      const pending = yield* Accounts.list(p, { status: "active" }, { page: 1, limit: 20 })
      assert.strictEqual(pending.total, 0)
      const pages = [1, 2, 3].map((page) => Accounts.list(p, {}, { page, limit: 2 }))
      const walked = (yield* Effect.all(pages)).flatMap((pg) => pg.items.map((a) => a.id))
      assert.strictEqual(new Set(walked).size, 5)
      const first = yield* Accounts.list(p, {}, { page: 1, limit: 2 })
      assert.deepStrictEqual([first.page, first.limit, first.total, first.totalPages], [1, 2, 5, 3])
    }).pipe(Effect.provide(layer())))

  it.effect("deposits need an active account and a valid amount; reconciliation explains the balance", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const { id } = yield* Accounts.create(p, { name: "Pending", workspace: "custody", assetId: "BTC" })
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.deposit(id, "1"))), "TransitionNotAllowed")
      const active = yield* activeAccount(p, "BTC")
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.deposit(active, "0.000000001"))), "InvalidAmount")
      yield* Accounts.deposit(active, "0.00000001")
      yield* Accounts.deposit(active, "2")
      const reconciliation = yield* Reconciliation.reconcileAccount(active)
      assert.strictEqual(reconciliation.availableBalance, "2.00000001")
      assert.isTrue(reconciliation.consistent)
    }).pipe(Effect.provide(layer())))

  it.effect("a deposit to an account whose asset left the registry is UnsupportedAsset and credits nothing", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const active = yield* activeAccount(p, "BTC", "1")
      const withoutBtc = makeAssets(builtInAssets.filter((asset) => asset.assetId !== "BTC"))
      const refused = yield* Effect.exit(Accounts.deposit(active, "0.5").pipe(Effect.provideService(Assets, withoutBtc)))
      assert.strictEqual(failureTag(refused), "UnsupportedAsset")
      assert.strictEqual((yield* Reconciliation.reconcileAccount(active)).availableBalance, "1")
    }).pipe(Effect.provide(layer())))

  it.effect("approval policy accepts 0 to 10 whole approvals", () =>
    Effect.gen(function*() {
      const p = yield* principalOf(yield* newClient)
      const id = yield* activeAccount(p, "ETH")
      assert.strictEqual((yield* Accounts.setApprovalPolicy(id, 3)).requiredApprovals, 3)
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.setApprovalPolicy(id, 11))), "InvalidRequest")
      assert.strictEqual(failureTag(yield* Effect.exit(Accounts.setApprovalPolicy(id, 1.5))), "InvalidRequest")
      assert.strictEqual((yield* Accounts.inspect(id)).requiredApprovals, 3)
    }).pipe(Effect.provide(layer())))
})

describe("a deposit address the provider never gives", () => {
  /** The simulated provider, but `createDepositAddress` never answers. */
  const silentOnAddresses = Relay.layerMemory({
    ids: Ids.Ids.layerSequential,
    provider: Layer.provideMerge(
      Layer.effect(CustodyProvider.CustodyProvider, Effect.map(Effect.service(CustodyProvider.CustodyProvider), (simulated) => CustodyProvider.CustodyProvider.of({ ...simulated, createDepositAddress: () => Effect.never }))),
      CustodyProvider.layerSimulated()
    )
  }).pipe(Layer.provideMerge(Layer.succeed(RelayConfig.RelayConfig, { ...RelayConfig.RelayConfig.defaultValue(), activateOnApproval: true, providerCallTimeoutMillis: 200 })))

  it.effect("ACC-ACTIVE-1: an approval that activates waits for the address no longer than providerCallTimeoutMillis, then fails as the provider's failure, changing nothing", () =>
    Effect.gen(function*() {
      const principal = yield* principalOf(yield* newClient)
      const created = yield* Accounts.create(principal, { name: "Hang", workspace: "custody", assetId: "BTC" })
      const approving = yield* Effect.forkChild(Effect.exit(Accounts.approve(principal, { accountId: created.id })))
      yield* TestClock.adjust("200 millis")
      const exit = yield* Fiber.join(approving)
      assert.strictEqual(failureTag(exit), "CustodyProviderFailed")
      assert.strictEqual((yield* Accounts.inspect(created.id)).status, "pending_approval")
    }).pipe(Effect.provide(silentOnAddresses)))
})
