/**
 * The Promise facade: every operation of the core as a plain async function, for backends that do not use
 * Effect. Inputs are decoded exactly as the HTTP adapter decodes them; a refusal rejects with the core's tagged
 * error (an `Error` whose `_tag` names it, e.g. `NotFound`), and a secret is handed out only by `createApiUser`.
 *
 *   const relay = createRelay()                    // in memory; pass Relay.layer(storage) for SQL
 *   const client = await relay.administration.createClient("Acme")
 *   const key = await relay.administration.createApiUser({ clientId: client.id, permissions: [...] })
 *   const me = await relay.authenticate(key.keyId, key.secret)
 *   await relay.accounts.create(me, { name: "Treasury", workspace: "custody", assetId: "BTC" })
 */
import { Effect, Fiber, type Layer, ManagedRuntime, Redacted } from "effect"
import * as Account from "./Account.js"
import * as Accounts from "./Accounts.js"
import * as Administration from "./Administration.js"
import * as AuditTrail from "./AuditTrail.js"
import * as Authentication from "./Authentication.js"
import type * as DomainEvent from "./DomainEvent.js"
import * as Idempotency from "./Idempotency.js"
import { decoder } from "./Input.js"
import { InvalidRequest } from "./RelayError.js"
import * as OutboxWorker from "./OutboxWorker.js"
import * as Page from "./Page.js"
import type { Permission } from "./Permission.js"
import type { Principal } from "./Principal.js"
import type { RateLimitPolicy } from "./RateLimiter.js"
import * as Relay from "./Relay.js"
import * as Transaction from "./Transaction.js"
import * as Transactions from "./Transactions.js"
import * as Webhook from "./Webhook.js"
import * as Webhooks from "./Webhooks.js"
import * as WhitelistedAddress from "./WhitelistedAddress.js"
import * as WhitelistedAddresses from "./WhitelistedAddresses.js"

const decodeCreateAccount = decoder(Account.CreateAccountInput)
const decodeAccountDecision = decoder(Account.AccountDecisionInput)
const decodeTransfer = decoder(Transaction.TransferInput)
const decodeCreateWhitelisted = decoder(WhitelistedAddress.CreateWhitelistedAddressInput)
const decodePage = decoder(Page.PageRequest)
const decodeAccountFilter = decoder(Account.AccountFilterInput)
const decodeTransactionFilter = decoder(Transaction.TransactionFilterInput)
const decodeWhitelistFilter = decoder(WhitelistedAddress.WhitelistFilterInput)
const decodeNewSubscription = decoder(Webhook.NewSubscriptionInput)
const decodeRedeliver = decoder(Webhook.RedeliverInput)

/**
 * The inputs of the commands as a caller writes them (each Schema's encoded side), so a misspelt or missing field
 * is a compile error; they are still decoded at run time, since JavaScript callers and `as` casts skip the types.
 */
export type CreateAccountInput = typeof Account.CreateAccountInput.Encoded
export type AccountDecisionInput = typeof Account.AccountDecisionInput.Encoded
export type TransferInput = typeof Transaction.TransferInput.Encoded
export type CreateWhitelistedAddressInput = typeof WhitelistedAddress.CreateWhitelistedAddressInput.Encoded
export type NewSubscriptionInput = typeof Webhook.NewSubscriptionInput.Encoded
export type RedeliverInput = typeof Webhook.RedeliverInput.Encoded

/**
 * Options of a command. `idempotencyKey`: the command runs at most once per key and caller (the principal's key
 * id); a retry with the same key and input gets the first result, the same key with other input is refused with
 * `IdempotencyKeyReused` (see core Idempotency).
 */
export interface CommandOptions {
  readonly idempotencyKey?: string
}

/** `command` under the caller's idempotency key, if one is given; the fingerprint is the operation and its input. */
const keyed = <A, E, R>(
  operationName: string,
  principal: Principal,
  input: unknown,
  options: CommandOptions | undefined,
  command: Effect.Effect<A, E, R>
): Effect.Effect<A, E | InvalidRequest, R> =>
  options?.idempotencyKey === undefined
    ? command
    : !Idempotency.isValidKey(options.idempotencyKey)
    ? Effect.fail(InvalidRequest.field("idempotencyKey", Idempotency.KEY_RULE))
    : Idempotency.withKey(
      command,
      new Idempotency.CommandKey(principal.keyId, options.idempotencyKey, `${operationName}\n${JSON.stringify(input)}`)
    )

const firstPage: Page.PageRequest = { page: Page.DEFAULT_PAGE, limit: Page.DEFAULT_LIMIT }

export type { Principal }
export type { RateLimitPolicy } from "./RateLimiter.js"
/** The refusals a call may reject with, as classes: `error instanceof RelayError.NotFound` works. */
export * as RelayError from "./RelayError.js"
export type { AccountFilter } from "./Account.js"
export type { TrailFilter } from "./DomainEvent.js"
export type { WorkerOptions } from "./OutboxWorker.js"
export type { NewApiUser } from "./Administration.js"
export type { PageRequest } from "./Page.js"
export type { Permission } from "./Permission.js"
export type { RelayServices } from "./Relay.js"
export type { TransactionFilter } from "./Transaction.js"
export type { ProviderEvent } from "./Transactions.js"
export type { WhitelistFilter } from "./WhitelistedAddress.js"

export const createRelay = <E>(layer: Layer.Layer<Relay.RelayServices, E> = Relay.layerMemory() as Layer.Layer<Relay.RelayServices, E>) => {
  const runtime = ManagedRuntime.make(layer)
  const run = <A, Err>(effect: Effect.Effect<A, Err, Relay.RelayServices>): Promise<A> => runtime.runPromise(effect)
  const withPage = <A, Err>(page: unknown, f: (page: Page.PageRequest) => Effect.Effect<A, Err, Relay.RelayServices>) =>
    run(Effect.flatMap(page === undefined ? Effect.succeed(firstPage) : decodePage(page), f))

  return {
    authenticate: (keyId: string, secret: string) => run(Authentication.authenticate(keyId, secret)),
    accounts: {
      list: (principal: Principal, filter: Account.AccountFilter = {}, page?: Page.PageRequest) =>
        withPage(page, (p) => Effect.flatMap(decodeAccountFilter(filter), (f) => Accounts.list(principal, f, p))),
      get: (principal: Principal, id: string) => run(Accounts.get(principal, id)),
      create: (principal: Principal, input: CreateAccountInput, options?: CommandOptions) =>
        run(keyed("accounts.create", principal, input, options, Effect.flatMap(decodeCreateAccount(input), (i) => Accounts.create(principal, i)))),
      approve: (principal: Principal, input: AccountDecisionInput, options?: CommandOptions) =>
        run(keyed("accounts.approve", principal, input, options, Effect.flatMap(decodeAccountDecision(input), (i) => Accounts.approve(principal, i)))),
      reject: (principal: Principal, input: AccountDecisionInput, options?: CommandOptions) =>
        run(keyed("accounts.reject", principal, input, options, Effect.flatMap(decodeAccountDecision(input), (i) => Accounts.reject(principal, i)))),
      activate: (accountId: string) => run(Accounts.activate(accountId)),
      deposit: (accountId: string, amount: string) => run(Accounts.deposit(accountId, amount)),
      setApprovalPolicy: (accountId: string, requiredApprovals: number) =>
        run(Accounts.setApprovalPolicy(accountId, requiredApprovals))
    },
    transactions: {
      list: (principal: Principal, filter: Transaction.TransactionFilter = {}, page?: Page.PageRequest) =>
        withPage(page, (p) => Effect.flatMap(decodeTransactionFilter(filter), (f) => Transactions.list(principal, f, p))),
      get: (principal: Principal, id: string) => run(Transactions.get(principal, id)),
      status: (principal: Principal, id: string) => run(Transactions.status(principal, id)),
      calculateFee: (principal: Principal, input: TransferInput, options?: CommandOptions) =>
        run(keyed("transactions.calculateFee", principal, input, options, Effect.flatMap(decodeTransfer(input), (i) => Transactions.calculateFee(principal, i)))),
      /** The same estimate with the fee exact, a decimal string (see Transactions.quoteFee). */
      quoteFee: (principal: Principal, input: TransferInput, options?: CommandOptions) =>
        run(keyed("transactions.calculateFee", principal, input, options, Effect.flatMap(decodeTransfer(input), (i) => Transactions.quoteFee(principal, i)))),
      initiate: (principal: Principal, input: TransferInput, options?: CommandOptions) =>
        run(keyed("transactions.initiate", principal, input, options, Effect.flatMap(decodeTransfer(input), (i) => Transactions.initiate(principal, i)))),
      approve: (principal: Principal, id: string, options?: CommandOptions) =>
        run(keyed("transactions.approve", principal, id, options, Transactions.approve(principal, id))),
      reject: (principal: Principal, id: string, options?: CommandOptions) =>
        run(keyed("transactions.reject", principal, id, options, Transactions.reject(principal, id))),
      cancel: (id: string) => run(Transactions.cancel(id)),
      advanceTo: (id: string, target: Transaction.AdvanceTarget) => run(Transactions.advanceTo(id, target)),
      applyProviderEvent: (id: string, event: Transactions.ProviderEvent, subStatus?: string) =>
        run(Transactions.applyProviderEvent(id, event, subStatus))
    },
    whitelistedAddresses: {
      list: (principal: Principal, filter: WhitelistedAddress.WhitelistFilter = {}, page?: Page.PageRequest) =>
        withPage(page, (p) => Effect.flatMap(decodeWhitelistFilter(filter), (f) => WhitelistedAddresses.list(principal, f, p))),
      get: (principal: Principal, id: string) => run(WhitelistedAddresses.get(principal, id)),
      create: (principal: Principal, input: CreateWhitelistedAddressInput, options?: CommandOptions) =>
        run(keyed("whitelistedAddresses.create", principal, input, options, Effect.flatMap(decodeCreateWhitelisted(input), (i) => WhitelistedAddresses.create(principal, i)))),
      approve: (id: string) => run(WhitelistedAddresses.approve(id)),
      reject: (id: string) => run(WhitelistedAddresses.reject(id)),
      archive: (id: string) => run(WhitelistedAddresses.archive(id))
    },
    administration: {
      createClient: (name?: string) => run(Administration.createClient(name)),
      /** The returned secret is the only copy: hand it to its owner and do not log it. */
      createApiUser: (input: Administration.NewApiUser) =>
        run(Effect.map(Administration.createApiUser(input), (issued) => ({
          apiUserId: issued.apiUserId,
          keyId: issued.keyId,
          secret: Redacted.value(issued.secret)
        }))),
      revokeApiUser: (apiUserId: string) => run(Effect.asVoid(Administration.revokeApiUser(apiUserId))),
      setPermissions: (apiUserId: string, permissions: ReadonlyArray<Permission>) =>
        run(Effect.asVoid(Administration.setPermissions(apiUserId, permissions))),
      /** The API user's own request budget from its next request on, or with null the one users without their own get. */
      setRateLimit: (apiUserId: string, rateLimit: RateLimitPolicy | null) =>
        run(Effect.asVoid(Administration.setRateLimit(apiUserId, rateLimit))),
      /** A new secret for the same key id; the old one is refused from the next request on. Returned once. */
      rotateSecret: (apiUserId: string) =>
        run(Effect.map(Administration.rotateSecret(apiUserId), (issued) => ({
          apiUserId: issued.apiUserId,
          keyId: issued.keyId,
          secret: Redacted.value(issued.secret)
        }))),
      listClients: () => run(Administration.listClients()),
      /** A client's webhook subscriptions, never a signing secret. */
      listWebhooks: (clientId: string) => run(Webhooks.listOfClient(clientId)),
      /** Turns any client's webhook subscription on or off. */
      setWebhookEnabled: (id: string, enabled: boolean) => run(Webhooks.setEnabledByOperator(id, enabled)),
      listApiUsers: (clientId?: string) => run(Administration.listApiUsers(clientId)),
      findApiUser: (idOrKeyId: string) => run(Administration.findApiUser(idOrKeyId)),
      /** The audit trail across every client, newest first: the operator's view. */
      auditTrail: (filter: DomainEvent.TrailFilter = {}, page?: Page.PageRequest) =>
        withPage(page, (p) => AuditTrail.acrossClients(filter, p))
    },
    /** The audit trail of the caller's client, newest first (needs "View audit trail"). */
    auditTrail: (principal: Principal, filter: DomainEvent.TrailFilter = {}, page?: Page.PageRequest) =>
      withPage(page, (p) => AuditTrail.list(principal, filter, p)),
    /**
     * Webhook subscriptions of the caller's client (needs "Manage webhooks"; docs/webhooks.md). Deliveries go out
     * from the outbox worker (`outbox.start`), signed with the Standard Webhooks scheme.
     */
    webhooks: {
      /** The answer carries the signing secret, the only time it is shown. */
      subscribe: (principal: Principal, input: NewSubscriptionInput, options?: CommandOptions) =>
        run(keyed("webhooks.subscribe", principal, input, options, Effect.flatMap(decodeNewSubscription(input), (i) => Webhooks.subscribe(principal, i)))),
      /** Oldest first, never a signing secret. */
      list: (principal: Principal) => run(Webhooks.list(principal)),
      get: (principal: Principal, id: string) => run(Webhooks.get(principal, id)),
      /** A new signing secret, shown once; the old one keeps signing beside it for the grace period. */
      rotateSecret: (principal: Principal, id: string, options?: CommandOptions) =>
        run(keyed("webhooks.rotateSecret", principal, id, options, Webhooks.rotateSecret(principal, id))),
      setEnabled: (principal: Principal, id: string, enabled: boolean, options?: CommandOptions) =>
        run(keyed(enabled ? "webhooks.enable" : "webhooks.disable", principal, id, options, Webhooks.setEnabled(principal, id, enabled))),
      /** The newest `limit` deliveries (1 to 100), newest first, without their payloads. */
      deliveries: (principal: Principal, id: string, limit: number = Page.DEFAULT_LIMIT) =>
        run(Effect.flatMap(decodePage({ page: 1, limit }), (page) => Webhooks.deliveries(principal, id, page.limit))),
      /** Delivers again one event (`eventId`) or every event of a stretch (`since`, `until`), to this subscription. */
      redeliver: (principal: Principal, id: string, input: RedeliverInput, options?: CommandOptions) =>
        run(keyed("webhooks.redeliver", principal, { id, input }, options, Effect.flatMap(decodeRedeliver(input), (i) => Webhooks.redeliver(principal, id, i))))
    },
    outbox: {
      /**
       * Starts the outbox worker (provider calls after commit: submissions, registrations, progress); answers a
       * function that stops it. Run one per process that should carry out provider effects.
       */
      start: (options: Partial<OutboxWorker.WorkerOptions> = {}) => {
        const worker = runtime.runFork(OutboxWorker.run(options))
        return () => runtime.runPromise(Fiber.interrupt(worker)).then(() => undefined)
      },
      /**
       * One round of the worker: what is due now is carried out; answers how many entries. Options as `start`'s, over
       * the defaults; a number that would break the worker rejects with a RangeError naming it.
       */
      runDue: (options: Partial<OutboxWorker.WorkerOptions> = {}) =>
        Promise.resolve(options).then(OutboxWorker.optionsOf).then((settings) => run(OutboxWorker.runDue(settings)))
    },
    /** Releases the runtime and the resources its layer holds (e.g. database connections). */
    dispose: () => runtime.dispose()
  }
}

export type RelayClient = ReturnType<typeof createRelay>
