/**
 * The core library from plain async code, no Effect in sight: the Promise facade (`@custody-relay/core/promise`)
 * through a whole transfer, with an idempotency key on the command that moves money and a refusal caught as the
 * tagged error it is.
 *
 *   pnpm --filter @custody-relay/examples run promise
 */
import { createRelay, RelayError } from "@custody-relay/core/promise"

const relay = createRelay()
try {
  // The back office: a client and two API users (an approver must be someone other than the initiator).
  const client = await relay.administration.createClient("Acme Treasury")
  const operatorKey = await relay.administration.createApiUser({
    clientId: client.id,
    name: "operator",
    permissions: ["View custody account", "Initiate new custody account", "Approve new custody account", "Initiate account transactions", "View custody transaction detail"]
  })
  const approverKey = await relay.administration.createApiUser({ clientId: client.id, name: "approver", permissions: ["Approve transaction"] })
  const operator = await relay.authenticate(operatorKey.keyId, operatorKey.secret)
  const approver = await relay.authenticate(approverKey.keyId, approverKey.secret)

  // Two BTC accounts: created, approved, activated by the custody provider's step, and one funded.
  const [cold, hot] = await Promise.all(["BTC cold", "BTC hot"].map((name) => relay.accounts.create(operator, { name, workspace: "custody", assetId: "BTC" })))
  for (const account of [cold!, hot!]) {
    await relay.accounts.approve(operator, { accountId: account.id })
    await relay.accounts.activate(account.id)
  }
  await relay.accounts.deposit(cold!.id, "1.5")

  // The command that moves money carries a key: the retry after a timeout answers the first result, never a second transfer.
  const transfer = { sourceAccountId: cold!.id, destinationId: hot!.id, destinationType: "internal", amount: "0.4", assetType: "BTC" } as const
  const first = await relay.transactions.initiate(operator, transfer, { idempotencyKey: "payout-0001" })
  const retried = await relay.transactions.initiate(operator, transfer, { idempotencyKey: "payout-0001" })
  console.log(`initiated ${first.id} (${first.status}); the retry answered ${retried.id === first.id ? "the same transaction" : "ANOTHER transaction"}`)

  // Amounts are decimal strings checked against the asset's precision: nine places for BTC is refused.
  try {
    await relay.transactions.initiate(operator, { ...transfer, amount: "0.000000001" })
  } catch (error) {
    if (!(error instanceof RelayError.InvalidAmount)) throw error
    console.log(`refused: ${error._tag}`)
  }

  // The quorum (one approver by default), then the custody provider's report of completion.
  await relay.transactions.approve(approver, first.id)
  await relay.transactions.advanceTo(first.id, "completed")
  const done = await relay.transactions.get(operator, first.id)
  const [source, destination] = await Promise.all([relay.accounts.get(operator, cold!.id), relay.accounts.get(operator, hot!.id)])
  console.log(`transaction ${done.status}; cold ${source.availableBalance} BTC, hot ${destination.availableBalance} BTC`)
} finally {
  await relay.dispose()
}
