/**
 * An Effect-native backend that owns its wiring: the domain on its own storage layer (SQLite in a file through
 * `@custody-relay/storage-sql`, migrated at start), its own CAD prices, and the outbox worker forked in the same
 * scope, so the custody provider's steps run after each commit. It then drives one transfer to completion and
 * reads the audit trail. Swap `layerSqlite` for `layerPostgres({ connectionString })` to run several nodes.
 *
 *   pnpm --filter @custody-relay/examples run effect-backend [path/to/relay.db]
 */
import { hash } from "node:crypto"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Accounts, Administration, AuditTrail, Authentication, OutboxWorker, Permission, Rates, Relay, Transactions } from "@custody-relay/core"
import { layerSqlite } from "@custody-relay/storage-sql"
import { Effect, Redacted } from "effect"

const filename = process.argv[2] ?? join(mkdtempSync(join(tmpdir(), "relay-example-")), "relay.db")

// Storage and rate limiting on SQLite; everything else the domain's defaults, prices our own, and secrets hashed
// with node's SHA-256 rather than the core's portable one (the same text, faster).
const RelayLive = Relay.layer(layerSqlite({ filename }), {
  rates: Rates.layerStatic({ BTC: "90000", ETH: "3000", USDC: "1.35" }),
  secretDigest: (secret) => hash("sha256", secret)
})

const backend = Effect.gen(function*() {
  // The provider's work (transfer submission, progress) runs after commit, in this fiber's scope.
  yield* Effect.forkScoped(OutboxWorker.run())

  const client = yield* Administration.createClient("Acme Treasury")
  const issue = (name: string, permissions: ReadonlyArray<Permission.Permission>) =>
    Effect.flatMap(Administration.createApiUser({ clientId: client.id, name, permissions }), (key) => Authentication.authenticate(key.keyId, Redacted.value(key.secret)))
  const operator = yield* issue("operator", Permission.permissionNames)
  const approver = yield* issue("approver", ["Approve transaction"])

  const [cold, hot] = yield* Effect.forEach(["cold", "hot"], (name) => Accounts.create(operator, { name: `BTC ${name}`, workspace: "custody", assetId: "BTC" }))
  for (const account of [cold!, hot!]) {
    yield* Accounts.approve(operator, { accountId: account.id })
    yield* Accounts.activate(account.id)
  }
  yield* Accounts.deposit(cold!.id, "2")

  const initiated = yield* Transactions.initiate(operator, { sourceAccountId: cold!.id, destinationId: hot!.id, destinationType: "internal", amount: "0.5", assetType: "BTC" })
  yield* Transactions.approve(approver, initiated.id)
  yield* Transactions.advanceTo(initiated.id, "completed")
  const done = yield* Transactions.get(operator, initiated.id)
  const trail = yield* AuditTrail.ofRecord(operator, "transaction", initiated.id, { page: 1, limit: 100 })
  yield* Effect.log(`transaction ${done.status} on ${filename}; its events: ${trail.items.map((event) => event.type).reverse().join(" -> ")}`)
  const treasury = yield* Accounts.get(operator, cold!.id)
  yield* Effect.log(`cold account: ${treasury.availableBalance} BTC (${treasury.availableBalanceCad} CAD)`)
})

Effect.runPromise(backend.pipe(Effect.scoped, Effect.provide(RelayLive))).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
