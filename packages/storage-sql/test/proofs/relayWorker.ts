/**
 * A relay node in its own OS process, for the proofs: it opens the shared store, runs one workload through the
 * core's real operations and prints `RESULT <json>`. Started by ProofWorld.startWorker:
 *
 *   node --conditions=@custody-relay/source --import scripts/source-loader.mjs relayWorker.ts <mode> <target-json> <params-json>
 *
 * Modes:
 * - initiate: fires `count` initiations at once from one source account.
 * - decide: fires every approver's approve or reject at once, on one transaction and one pending account.
 * - start: opens the store (migrating it if needed) and stops.
 * - churn: writes forever (initiate, complete, fail, cancel, deposit) until it is killed; prints READY once the
 *   first write committed.
 */
import { Accounts, type Relay, Transactions } from "@custody-relay/core"
import { Cause, Effect, Exit, Option, Schema } from "effect"
import { principalOf, provideRelay, type ProofTarget } from "./ProofWorld.js"

const CredentialSchema = Schema.Struct({ keyId: Schema.String, secret: Schema.String })
const TargetSchema = Schema.Union([
  Schema.Struct({ engine: Schema.Literal("sqlite"), filename: Schema.String }),
  Schema.Struct({ engine: Schema.Literal("postgres"), url: Schema.String })
])
const InitiateParams = Schema.Struct({
  credential: CredentialSchema,
  sourceAccountId: Schema.String,
  destinationId: Schema.String,
  amount: Schema.String,
  count: Schema.Int
})
const DecideParams = Schema.Struct({
  approvers: Schema.Array(Schema.Struct({ credential: CredentialSchema, decision: Schema.Literals(["approve", "reject"]) })),
  transactionId: Schema.String,
  accountId: Schema.String
})
const ChurnParams = Schema.Struct({
  credential: CredentialSchema,
  accountIds: Schema.Array(Schema.String),
  destinationId: Schema.String
})

const errorTag = <A, E>(exit: Exit.Exit<A, E>): string => {
  if (Exit.isSuccess(exit)) return "success"
  const error = Cause.findErrorOption(exit.cause)
  if (Option.isSome(error) && typeof error.value === "object" && error.value !== null && "_tag" in error.value) {
    return String(error.value._tag)
  }
  return `defect: ${Cause.pretty(exit.cause)}`
}

const transfer = (sourceAccountId: string, destinationId: string, amount: string) => ({
  sourceAccountId,
  destinationId,
  destinationType: "external" as const,
  amount,
  assetType: "ETH"
})

const initiate = Effect.fnUntraced(function*(params: typeof InitiateParams.Type) {
  const principal = yield* principalOf(params.credential)
  const exits = yield* Effect.forEach(
    Array.from({ length: params.count }),
    () => Effect.exit(Transactions.initiate(principal, transfer(params.sourceAccountId, params.destinationId, params.amount))),
    { concurrency: "unbounded" }
  )
  return {
    accepted: exits.flatMap((exit) => (Exit.isSuccess(exit) ? [exit.value.id] : [])),
    refused: exits.filter((exit) => errorTag(exit) === "InsufficientFunds").length,
    other: exits.map(errorTag).filter((tag) => tag !== "success" && tag !== "InsufficientFunds")
  }
})

const tally = (exits: ReadonlyArray<{ readonly decision: string; readonly exit: Exit.Exit<unknown, unknown> }>) => ({
  won: exits.filter(({ exit }) => Exit.isSuccess(exit)).map(({ decision }) => decision),
  conflicts: exits.filter(({ exit }) => errorTag(exit) === "TransitionNotAllowed").length,
  other: exits.map(({ exit }) => errorTag(exit)).filter((tag) => tag !== "success" && tag !== "TransitionNotAllowed")
})

const decide = Effect.fnUntraced(function*(params: typeof DecideParams.Type) {
  const approvers = yield* Effect.forEach(params.approvers, ({ credential, decision }) =>
    Effect.map(principalOf(credential), (principal) => ({ principal, decision })))
  const onTransaction = Effect.forEach(
    approvers,
    ({ decision, principal }) =>
      Effect.map(
        Effect.exit(decision === "approve"
          ? Transactions.approve(principal, params.transactionId)
          : Transactions.reject(principal, params.transactionId)),
        (exit) => ({ decision, exit })
      ),
    { concurrency: "unbounded" }
  )
  const onAccount = Effect.forEach(
    approvers,
    ({ decision, principal }) =>
      Effect.map(
        Effect.exit(decision === "approve"
          ? Accounts.approve(principal, { accountId: params.accountId })
          : Accounts.reject(principal, { accountId: params.accountId })),
        (exit) => ({ decision, exit })
      ),
    { concurrency: "unbounded" }
  )
  const [transaction, account] = yield* Effect.all([onTransaction, onAccount], { concurrency: "unbounded" })
  return { transaction: tally(transaction), account: tally(account) }
})

const pick = <A>(items: ReadonlyArray<A>): A | undefined => items[Math.floor(Math.random() * items.length)]
const smallAmount = () => ((1 + Math.floor(Math.random() * 500_000)) / 1_000_000).toFixed(6)

/** Writes until killed, from four fibers at once so writes are in flight whenever the kill lands. */
const churn = Effect.fnUntraced(function*(params: typeof ChurnParams.Type) {
  const principal = yield* principalOf(params.credential)
  const open: Array<string> = []
  let announced = false
  const expected = new Set(["InsufficientFunds", "TransitionNotAllowed", "success"])
  const step: Effect.Effect<Exit.Exit<unknown, unknown>, never, Relay.RelayServices> = Effect.suspend((): Effect.Effect<Exit.Exit<unknown, unknown>, never, Relay.RelayServices> => {
    const roll = Math.random()
    const account = pick(params.accountIds) ?? ""
    const tx = pick(open)
    if (roll < 0.5 || tx === undefined) {
      return Effect.map(Effect.exit(Transactions.initiate(principal, transfer(account, params.destinationId, smallAmount()))), (exit) => {
        if (Exit.isSuccess(exit)) {
          open.push(exit.value.id)
          // Synchronous on a pipe: once written, the parent reads it even if a SIGKILL follows at once.
          process.stdout.write(`ACK ${exit.value.id}\n`)
        }
        return exit
      })
    }
    const ended = Effect.sync(() => {
      open.splice(open.indexOf(tx), 1)
    })
    if (roll < 0.75) return Effect.exit(Transactions.advanceTo(tx, Math.random() < 0.7 ? "completed" : "failed")).pipe(Effect.tap(() => ended))
    if (roll < 0.85) return Effect.exit(Transactions.cancel(tx)).pipe(Effect.tap(() => ended))
    return Effect.exit(Accounts.deposit(account, smallAmount()))
  }).pipe(
    Effect.tap((exit) =>
      Effect.sync(() => {
        const tag = errorTag(exit)
        if (!expected.has(tag)) process.stderr.write(`unexpected outcome: ${tag}\n`)
        if (!announced && Exit.isSuccess(exit)) {
          announced = true
          process.stdout.write("READY\n")
        }
      })
    )
  )
  yield* Effect.all(Array.from({ length: 4 }, () => Effect.forever(step)), { concurrency: "unbounded" })
  return { stopped: true }
})

const [mode = "", targetJson = "{}", paramsJson = "{}"] = process.argv.slice(2)
const target: ProofTarget = Schema.decodeUnknownSync(Schema.fromJsonString(TargetSchema))(targetJson)

const program: Effect.Effect<unknown, unknown, never> = mode === "initiate"
  ? provideRelay(target)(initiate(Schema.decodeUnknownSync(Schema.fromJsonString(InitiateParams))(paramsJson)))
  : mode === "decide"
  ? provideRelay(target)(decide(Schema.decodeUnknownSync(Schema.fromJsonString(DecideParams))(paramsJson)))
  : mode === "start"
  ? provideRelay(target)(Effect.succeed({ started: true }))
  : mode === "churn"
  ? provideRelay(target)(churn(Schema.decodeUnknownSync(Schema.fromJsonString(ChurnParams))(paramsJson)))
  : Effect.die(new Error(`unknown mode ${mode}`))

Effect.runPromise(program).then(
  (result) => {
    process.stdout.write(`RESULT ${JSON.stringify(result)}\n`)
    process.exit(0)
  },
  (error: unknown) => {
    process.stderr.write(`${String(error)}\n`)
    process.exit(1)
  }
)
