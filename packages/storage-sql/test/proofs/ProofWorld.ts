/**
 * The world the proofs of issue 3 run in: a relay (the core's real operations) over a SQL store that several OS
 * processes share, a client with API users, funded ETH accounts and an approved external destination, and the
 * invariant every proof ends with. Parent tests and the worker processes (relayWorker.ts) both use it.
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import {
  Accounts,
  Administration,
  Asset,
  Authentication,
  Ids,
  Money,
  Permission,
  type Principal,
  type RateLimiter,
  Reconciliation,
  Relay,
  Storage,
  Transaction,
  WhitelistedAddresses
} from "@custody-relay/core"
import { Effect, type Layer, Option, Redacted } from "effect"
import { layerPostgres, layerSqlite } from "../../src/index.js"
import { admin } from "../Dialects.js"
import { sourceNodeArguments } from "../SourceNodeArguments.js"

export type ProofTarget =
  | { readonly engine: "sqlite"; readonly filename: string }
  | { readonly engine: "postgres"; readonly url: string }

/**
 * Resolves once no other session on `target`'s PostgreSQL database is running a statement or holding a transaction
 * open. A killed writer's backend still runs what it had received (a pipeline that ends with COMMIT commits after
 * its client died) and only then finds the socket closed; checks that read in several units must start after that,
 * or one of them sees the commit and another does not. SQLite: a killed writer writes nothing more. Dies if the
 * database is not quiet within 20 s.
 */
export const quiescent = (target: ProofTarget): Effect.Effect<void> =>
  target.engine === "sqlite" ? Effect.void : Effect.promise(() =>
    admin(target.url, async (client) => {
      const until = Date.now() + 20_000
      for (;;) {
        const { rows } = await client.query<{ busy: number }>(
          "select count(*)::int as busy from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend' and state <> 'idle'"
        )
        if ((rows[0]?.busy ?? 0) === 0) return
        if (Date.now() > until) throw new Error(`${rows[0]?.busy} sessions still busy on the proof's database after 20 s`)
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    }))

export const storeLayer = (target: ProofTarget): Layer.Layer<Storage.Storage | RateLimiter.RateLimiter, Storage.StorageError> =>
  target.engine === "sqlite"
    ? layerSqlite({ filename: target.filename })
    : layerPostgres({ connectionString: target.url, pool: { max: 10 } })

export const relayLayer = (target: ProofTarget): Layer.Layer<Relay.RelayServices, Storage.StorageError> =>
  Relay.layer(storeLayer(target))

/** What a step of the proofs' setup needs; its errors are only ever reported, so they stay `unknown`. */
type Step<A> = Effect.Effect<A, unknown, Relay.RelayServices>

export interface Credential {
  readonly keyId: string
  readonly secret: string
}

export const newCredential: (clientId: string, name: string) => Step<Credential> = Effect.fnUntraced(function*(clientId: string, name: string) {
  const issued = yield* Administration.createApiUser({ clientId, permissions: Permission.permissionNames, name })
  // The proof hands the secret to a worker process on purpose.
  return { keyId: issued.keyId, secret: Redacted.value(issued.secret) } satisfies Credential
})

export const principalOf = (credential: Credential): Effect.Effect<Principal.Principal, unknown, Storage.Storage> =>
  Authentication.authenticate(credential.keyId, credential.secret)

let seed = 0

/** An active ETH account of the credential's client holding `balance` (deposited, so the ledger explains it). */
export const fundedAccount: (credential: Credential, balance: string, requiredApprovals?: number) => Step<string> = Effect.fnUntraced(function*(credential: Credential, balance: string, requiredApprovals = 1) {
  const principal = yield* principalOf(credential)
  const created = yield* Accounts.create(principal, { name: `Source ${++seed}`, workspace: "custody", assetId: "ETH" })
  yield* Accounts.approve(principal, { accountId: created.id })
  yield* Accounts.activate(created.id)
  yield* Accounts.setApprovalPolicy(created.id, requiredApprovals)
  if (!Money.isZero(Money.canonical(balance))) yield* Accounts.deposit(created.id, balance)
  return created.id
})

/** An approved external ETH destination of the credential's client. */
export const approvedDestination: (credential: Credential) => Step<string> = Effect.fnUntraced(function*(credential: Credential) {
  const principal = yield* principalOf(credential)
  const ethereum = Asset.builtInAssets.find((a) => a.assetId === "ETH")
  if (ethereum === undefined) return yield* Effect.die(new Error("ETH is not a built-in asset"))
  const created = yield* WhitelistedAddresses.create(principal, {
    name: `Exchange ${++seed}`,
    address: ethereum.chain.addressFromSeed(new TextEncoder().encode(`proof-${Date.now()}-${seed}`)),
    assetType: "ETH"
  })
  yield* WhitelistedAddresses.approve(created.id)
  return created.id
})

export const newClient: Step<string> = Effect.map(Administration.createClient("Proof client"), (client) => client.id)

/**
 * The invariant of the crash proof, for every account given: its balance equals deposits and transfers in, minus
 * settled amounts, minus the reservations of its open transactions, and is not negative (Reconciliation); every
 * transaction's reservation is open exactly while it is pending: a completed one has exactly one settlement in
 * the ledger, any other none; and every list total agrees with the rows it counts.
 */
export const checkInvariants: (clientId: string, accountIds: ReadonlyArray<string>) => Step<ReadonlyArray<string>> = Effect.fnUntraced(function*(clientId: string, accountIds: ReadonlyArray<string>) {
  const problems: Array<string> = []
  for (const accountId of accountIds) {
    const reconciliation = yield* Reconciliation.reconcileAccount(accountId)
    if (!reconciliation.consistent) problems.push(`account ${accountId} does not reconcile: ${JSON.stringify(reconciliation)}`)
    const { entries, transactions } = yield* Storage.run("read", (unit) =>
      Effect.all({
        entries: unit.listLedgerEntries(Ids.AccountId.make(accountId)),
        transactions: allTransactions(unit, Ids.ClientId.make(clientId), accountId)
      }))
    // The list totals (kept as counters by the SQL stores) agree with the rows, for the account and each group.
    for (const group of [undefined, ...Transaction.statusGroups]) {
      const filter = group === undefined ? { accountId } : { accountId, group }
      const counted = transactions.filter((t) => group === undefined || Transaction.groupOf[t.status] === group).length
      const listed = yield* Storage.run("read", (unit) =>
        unit.listTransactions(Ids.ClientId.make(clientId), filter, { page: 1, limit: 1 }))
      if (listed.total !== counted) problems.push(`account ${accountId} ${group ?? "all"}: total ${listed.total}, rows ${counted}`)
    }
    for (const tx of transactions) {
      const settlements = entries.filter((e) => e.kind === "settlement" && e.transactionId === tx.id)
      const expected = tx.status === "COMPLETED" ? 1 : 0
      if (settlements.length !== expected) {
        problems.push(`transaction ${tx.id} (${tx.status}) has ${settlements.length} settlements, expected ${expected}`)
      }
      if (settlements.length === 1 && settlements[0]?.amount !== tx.reserved) {
        problems.push(`transaction ${tx.id} settled ${settlements[0]?.amount}, reserved ${tx.reserved}`)
      }
      // Events and outbox entries commit with the change that makes them: the log ends where the record stands,
      // and a transaction that reached its quorum has exactly one submission to the provider.
      const { events, outbox } = yield* Storage.run("read", (unit) =>
        Effect.all({ events: unit.listEvents({ entityId: tx.id }, 0, 1000), outbox: unit.listOutboxEntries(tx.id) }))
      if (events[0]?.type !== "transaction.initiated") problems.push(`transaction ${tx.id}: first event ${events[0]?.type}`)
      const lastStatus = events.findLast((e) => e.statusAfter !== null)?.statusAfter
      if (lastStatus !== tx.status) problems.push(`transaction ${tx.id} is ${tx.status}, its events end at ${lastStatus}`)
      const submissions = outbox.filter((e) => e.kind === "submitTransfer").length
      if (submissions !== (tx.approvedAt === null ? 0 : 1)) {
        problems.push(`transaction ${tx.id} (approved at ${tx.approvedAt}) has ${submissions} submissions`)
      }
    }
  }
  return problems
})

/** Every transaction from one account, whole, walking the pages. */
export const allTransactions = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  clientId: Ids.ClientId,
  accountId: string
) {
  const listed: Array<Transaction.TransactionSummary> = []
  for (let page = 1; ; page++) {
    const found = yield* unit.listTransactions(clientId, { accountId }, { page, limit: 100 })
    listed.push(...found.items)
    if (found.items.length < 100) break
  }
  // A list shows a summary of each; the invariants read the whole records.
  const all: Array<Transaction.Transaction> = []
  for (const { id } of listed) {
    const found = yield* unit.getTransaction(id)
    if (Option.isNone(found)) return yield* Effect.die(new Error(`transaction ${id} is listed but not found`))
    all.push(found.value)
  }
  return all
})

export const accountBalance = (accountId: string): Step<Money.DecimalString> =>
  Effect.map(Accounts.inspect(accountId), (account) => account.availableBalance)

const workerPath = fileURLToPath(new URL("./relayWorker.ts", import.meta.url))
const repositoryRoot = fileURLToPath(new URL("../../../../", import.meta.url))

export interface Worker {
  readonly pid: number
  /** Resolves with the worker's result line (parsed), or rejects when it exits without one. */
  readonly result: () => Promise<unknown>
  /** What the worker wrote to stderr so far. */
  readonly stderr: () => string
  /** Resolves when the worker prints its first "ready" line. */
  readonly ready: Promise<void>
  readonly kill: (signal: NodeJS.Signals) => void
  /** Resolves with the exit code once the worker has exited and all it wrote has been read. */
  readonly exited: Promise<number | null>
  /** The ids the worker printed as "ACK <id>": operations it was answered for as succeeded. */
  readonly acknowledged: () => ReadonlyArray<string>
}

/**
 * Starts relayWorker.ts in its own node process, running the TypeScript sources (the same way as the tests):
 * `node <sourceNodeArguments> relayWorker.ts <mode> <target> <params>`.
 */
export const startWorker = (mode: string, target: ProofTarget, params: unknown): Worker => {
  const child = spawn(
    process.execPath,
    [...sourceNodeArguments, workerPath, mode, JSON.stringify(target), JSON.stringify(params)],
    { cwd: repositoryRoot, stdio: ["ignore", "pipe", "pipe"] }
  )
  let stdout = ""
  let stderr = ""
  let markReady: () => void = () => undefined
  const ready = new Promise<void>((resolve) => {
    markReady = resolve
  })
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk
    if (stdout.includes("READY\n")) markReady()
  })
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk
  })
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
  const result = () => exited.then((code) => {
    const line = stdout.split("\n").find((l) => l.startsWith("RESULT "))
    if (line === undefined) throw new Error(`worker ${mode} exited with ${code} and no result:\n${stderr}\n${stdout}`)
    const parsed: unknown = JSON.parse(line.slice("RESULT ".length))
    return parsed
  })
  const acknowledged = () => stdout.split("\n").filter((line) => line.startsWith("ACK ")).map((line) => line.slice("ACK ".length))
  return { pid: child.pid ?? -1, result, stderr: () => stderr, ready, kill: (signal) => child.kill(signal), exited, acknowledged }
}

export const provideRelay = (target: ProofTarget) => <A, E>(effect: Effect.Effect<A, E, Relay.RelayServices>) =>
  Effect.provide(effect, relayLayer(target))
