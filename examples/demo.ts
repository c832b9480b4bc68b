/**
 * A whole custody flow through the core library, in memory, printed step by step: a client and its API users,
 * two accounts through approval and activation, a deposit, a whitelisted address, a fee estimate, a transaction
 * through its quorum and the provider to completion, and the refusals a custody API must give.
 *
 *   pnpm demo
 */
import { Effect, Redacted } from "effect"
import {
  Accounts,
  Administration,
  Authentication,
  Permission,
  Reconciliation,
  Relay,
  type RelayError,
  Transactions,
  WhitelistedAddresses
} from "@custody-relay/core"

const show = (title: string, value: unknown) => Effect.sync(() => console.log(`\n# ${title}\n${JSON.stringify(value, null, 2)}`))

const apiUser = Effect.fnUntraced(function*(clientId: string, name: string, permissions: ReadonlyArray<Permission.Permission>) {
  const issued = yield* Administration.createApiUser({ clientId, name, permissions })
  // The secret exists only here; a real back office hands it to its owner once and never logs it.
  return yield* Authentication.authenticate(issued.keyId, Redacted.value(issued.secret))
})

const demo = Effect.gen(function*() {
  const client = yield* Administration.createClient("Acme Treasury")
  const operator = yield* apiUser(client.id, "operator", Permission.permissionNames)
  const approver = yield* apiUser(client.id, "approver", ["Approve transaction"])
  yield* show("client", client)

  const cold = yield* Accounts.create(operator, { name: "BTC cold storage", workspace: "custody", assetId: "BTC" })
  const hot = yield* Accounts.create(operator, { name: "BTC settlement", workspace: "transactional", assetId: "BTC" })
  yield* show("account created (pending approval, no address yet)", cold)
  for (const { id } of [cold, hot]) {
    yield* show("account approved", yield* Accounts.approve(operator, { accountId: id }))
    yield* Accounts.activate(id)
  }
  yield* Accounts.deposit(cold.id, "2.5")
  yield* show("cold account after activation and a 2.5 BTC deposit", yield* Accounts.get(operator, cold.id))

  const exchange = yield* WhitelistedAddresses.create(operator, {
    name: "Exchange deposit address",
    address: "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",
    assetType: "BTC"
  })
  yield* WhitelistedAddresses.approve(exchange.id)
  yield* show("whitelisted address (approved by the back office)", yield* WhitelistedAddresses.get(operator, exchange.id))

  const transfer = {
    sourceAccountId: cold.id,
    destinationId: hot.id,
    destinationType: "internal",
    amount: "0.75",
    assetType: "BTC"
  } as const
  yield* show("fee estimate", yield* Transactions.calculateFee(operator, transfer))
  const initiated = yield* Transactions.initiate(operator, transfer)
  yield* show("transaction initiated (awaits its quorum)", initiated)
  yield* show("approved by a second person", (yield* Transactions.approve(approver, initiated.id)).approvals)
  yield* Transactions.advanceTo(initiated.id, "completed")
  yield* show("status after the provider confirmed it", yield* Transactions.status(operator, initiated.id))
  yield* show("balances", {
    cold: (yield* Accounts.get(operator, cold.id)).availableBalance,
    hot: (yield* Accounts.get(operator, hot.id)).availableBalance,
    reconciled: (yield* Reconciliation.reconcileAccount(cold.id)).consistent
  })

  const refusals: Record<string, Effect.Effect<unknown, RelayError.RelayError, Relay.RelayServices>> = {
    "amount in scientific notation": Transactions.initiate(operator, { ...transfer, amount: "1e-8" }),
    "9 decimal places for BTC": Transactions.initiate(operator, { ...transfer, amount: "0.000000001" }),
    "more than the balance": Transactions.initiate(operator, { ...transfer, amount: "5" }),
    "a pending whitelisted address": Effect.flatMap(
      WhitelistedAddresses.create(operator, {
        name: "Unreviewed",
        address: "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy",
        assetType: "BTC"
      }),
      (pending) => Transactions.initiate(operator, { ...transfer, destinationType: "external", destinationId: pending.id })
    ),
    "the initiator approving its own transaction": Effect.flatMap(
      Transactions.initiate(operator, { ...transfer, amount: "0.1" }),
      (tx) => Transactions.approve(operator, tx.id)
    ),
    "approving an account twice": Accounts.approve(operator, { accountId: cold.id })
  }
  const answers: Record<string, string> = {}
  for (const [what, attempt] of Object.entries(refusals)) {
    answers[what] = yield* attempt.pipe(
      Effect.match({ onFailure: (error) => `${error._tag}: ${error.message}`, onSuccess: () => "accepted (unexpected)" })
    )
  }
  yield* show("refused, as a custody API must", answers)
})

await Effect.runPromise(demo.pipe(Effect.provide(Relay.layerMemory())))
