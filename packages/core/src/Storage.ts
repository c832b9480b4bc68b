/**
 * The Storage port: where the custody domain keeps its records, and the unit of work that makes each operation
 * atomic. An operation runs its reads and writes inside `transaction`; either all of its writes happen or none
 * do, and two write units never interleave on the same records (a unit that would be caught racing another is
 * re-run from the start, so a unit must have no effects outside storage that are not safe to repeat).
 *
 * Lookups by id are not scoped to a client: the core checks ownership in one place (`Scope`). Lists are always
 * for one client and ordered newest first (createdAt, then id, descending) so pages are stable.
 *
 * `layerMemory` sits here with the port: the embedded default for tests, demos and the Promise facade.
 */
import { type Cause, Context, Effect, Layer, Option, Schema, Semaphore } from "effect"
import type { Account, AccountFilter, AccountIdentity } from "./Account.js"
import type { ApiUser } from "./ApiUser.js"
import type { Client } from "./Client.js"
import { type EventStore, type LoggedEvent, trailMatches } from "./DomainEvent.js"
import type { IdempotencyRecord, IdempotencyStore } from "./Idempotency.js"
import type { AccountId, ApiUserId, ClientId, TransactionId, WhitelistedAddressId } from "./Ids.js"
import type { LedgerEntry } from "./Ledger.js"
import { deletedOnceSettled, HELD, kindsOf, type OutboxEntry, type OutboxStore } from "./Outbox.js"
import * as Page from "./Page.js"
import type { SettingsStore } from "./Settings.js"
import type { WebhookDelivery, WebhookStore, WebhookSubscription } from "./Webhook.js"
import * as Transaction from "./Transaction.js"
import type { WhitelistedAddress, WhitelistFilter } from "./WhitelistedAddress.js"

/**
 * The engine could not be reached, or the connection was lost. Before a commit nothing of the unit happened and it
 * may be run again on a fresh connection; a connection lost while committing leaves the outcome unknown
 * (`outcomeUnknown`), and only the caller can retry (safely, with an idempotency key). An engine that did not answer
 * within a bound (`timedOut`: a connection that did not open, a round trip that got no answer) is not asked again
 * either: a re-run would wait as long again, and the caller is better answered at once.
 */
export class StorageUnavailable extends Schema.TaggedError<StorageUnavailable>()("StorageUnavailable", {
  message: Schema.String,
  cause: Schema.Defect(),
  outcomeUnknown: Schema.optional(Schema.Boolean),
  timedOut: Schema.optional(Schema.Boolean)
}) {}

/** The unit lost a race with another (serialization failure, deadlock, busy): running it again may succeed. */
export class StorageConflict extends Schema.TaggedError<StorageConflict>()("StorageConflict", {
  message: Schema.String,
  cause: Schema.Defect()
}) {}

/** A uniqueness or integrity rule of the schema refused a write. */
export class StorageConstraintViolated extends Schema.TaggedError<StorageConstraintViolated>()(
  "StorageConstraintViolated",
  { constraint: Schema.String, message: Schema.String, cause: Schema.Defect() }
) {}

export class StorageFault extends Schema.TaggedError<StorageFault>()("StorageFault", {
  message: Schema.String,
  cause: Schema.Defect()
}) {}

/**
 * The kept API user a request ran on no longer matches its row (see `KeptCredentials`): the unit that found out was
 * stopped before it committed, and the request is authenticated afresh and run again (Authentication.authenticated).
 */
export class CredentialChanged extends Schema.TaggedError<CredentialChanged>()("CredentialChanged", {
  message: Schema.String
}) {}

/** The one error of the Storage port; `reason` says which kind, `isRetryable` whether re-running the unit may help. */
export class StorageError extends Schema.TaggedError<StorageError>()("StorageError", {
  reason: Schema.Union([StorageUnavailable, StorageConflict, StorageConstraintViolated, StorageFault, CredentialChanged])
}) {
  get isRetryable(): boolean {
    // A unique constraint that fires is a race the core's own check lost: the re-run sees the winner. A lost
    // connection rolled the unit back with it: a re-run on a fresh one is safe, unless the commit itself was lost,
    // and useful, unless the engine had already been waited for as long as it may be.
    switch (this.reason._tag) {
      case "StorageConflict":
      case "StorageConstraintViolated":
        return true
      case "StorageUnavailable":
        return !this.isOutcomeUnknown && this.reason.timedOut !== true
      default:
        return false
    }
  }
  /** The database may or may not have done what was asked (a commit or a statement whose answer never came). */
  get isOutcomeUnknown(): boolean {
    return this.reason._tag === "StorageUnavailable" && this.reason.outcomeUnknown === true
  }
  /** The engine or the way to it failed (not the query): the caller may try again later. */
  get isUnavailable(): boolean {
    return this.reason._tag === "StorageUnavailable"
  }
  /**
   * What a later try may not meet: the database unavailable, or a race (a lock wait past its timeout, a deadlock)
   * still lost after every re-run. Neither is a fault of the request or of the code.
   */
  get isTransient(): boolean {
    return this.reason._tag === "StorageUnavailable" || this.reason._tag === "StorageConflict"
  }
  override get message() {
    return `${this.reason._tag}: ${this.reason.message}`
  }
}

/**
 * The StorageError a program failed or died with (`run` makes a unit's storage failure a defect), if it did: what the
 * adapters and the workers ask of a cause before they answer or log it.
 */
export const errorIn = (cause: Cause.Cause<unknown>): StorageError | undefined => {
  for (const reason of cause.reasons) {
    const error = reason._tag === "Fail" ? reason.error : reason._tag === "Die" ? reason.defect : undefined
    if (error instanceof StorageError) return error
  }
  return undefined
}

/**
 * The StorageError of a cause that is the storage unavailable or busy (a lost or refused connection, a race lost past
 * every re-run): an outage to answer 503 to or to wait out, not a bug. Undefined for any other cause.
 */
export const transientErrorIn = (cause: Cause.Cause<unknown>): StorageError | undefined => {
  const error = errorIn(cause)
  return error?.isTransient === true ? error : undefined
}

type Op<A> = Effect.Effect<A, StorageError>

/** Clients and their API users (credentials). */
export interface ClientStore {
  readonly insertClient: (client: Client) => Op<void>
  readonly getClient: (id: ClientId) => Op<Option.Option<Client>>
  readonly insertApiUser: (user: ApiUser) => Op<void>
  readonly getApiUser: (id: ApiUserId) => Op<Option.Option<ApiUser>>
  readonly findApiUserByKeyId: (keyId: string) => Op<Option.Option<ApiUser>>
  readonly updateApiUser: (user: ApiUser) => Op<void>
  /** Every client in id order (the core's ids are UUIDv7, so oldest first): the operator's listing. */
  readonly listClients: () => Op<ReadonlyArray<Client>>
  /** API users in id order; of one client when `clientId` is given (null: the ones that are not client-scoped). */
  readonly listApiUsers: (clientId?: ClientId | null) => Op<ReadonlyArray<ApiUser>>
}

export interface AccountStore {
  readonly insertAccount: (account: Account) => Op<void>
  readonly getAccount: (id: AccountId) => Op<Option.Option<Account>>
  /** The client's account with this identity that was not rejected, if any (ACC-CREATE-3). */
  readonly findAccountByIdentity: (clientId: ClientId, identity: AccountIdentity) => Op<Option.Option<Account>>
  readonly updateAccount: (account: Account) => Op<void>
  readonly listAccounts: (clientId: ClientId, filter: AccountFilter, page: Page.PageRequest) => Op<Page.Page<Account>>
}

export interface WhitelistStore {
  readonly insertWhitelistedAddress: (entry: WhitelistedAddress) => Op<void>
  readonly getWhitelistedAddress: (id: WhitelistedAddressId) => Op<Option.Option<WhitelistedAddress>>
  /** The client's entry for this asset that is not archived and whose address is one of `addresses`, if any. */
  readonly findWhitelistedAddress: (
    clientId: ClientId,
    assetType: string,
    addresses: ReadonlyArray<string>
  ) => Op<Option.Option<WhitelistedAddress>>
  readonly updateWhitelistedAddress: (entry: WhitelistedAddress) => Op<void>
  readonly listWhitelistedAddresses: (
    clientId: ClientId,
    filter: WhitelistFilter,
    page: Page.PageRequest
  ) => Op<Page.Page<WhitelistedAddress>>
}

export interface TransactionStore {
  readonly insertTransaction: (tx: Transaction.Transaction) => Op<void>
  readonly getTransaction: (id: TransactionId) => Op<Option.Option<Transaction.Transaction>>
  readonly updateTransaction: (tx: Transaction.Transaction) => Op<void>
  /**
   * A page of the client's transactions, each as a list shows it (`Transaction.summaryOf`): a list's rows are most of
   * what it costs, so a store reads no more of them. `getTransaction` reads one whole.
   */
  readonly listTransactions: (
    clientId: ClientId,
    filter: Transaction.TransactionFilter,
    page: Page.PageRequest
  ) => Op<Page.Page<Transaction.TransactionSummary>>
  /** Every transaction from this account whose reservation is open (status in the pending group). */
  readonly listOpenTransactionsFrom: (accountId: AccountId) => Op<ReadonlyArray<Transaction.Transaction>>
}

export interface LedgerStore {
  readonly insertLedgerEntry: (entry: LedgerEntry) => Op<void>
  readonly listLedgerEntries: (accountId: AccountId) => Op<ReadonlyArray<LedgerEntry>>
}

/**
 * What one unit of work can read and write: one small store per record kind, joined so that every store's
 * writes commit or roll back together. A new kind of record is a new store here, not new methods on another's.
 */
export interface StorageUnit
  extends
    ClientStore,
    AccountStore,
    WhitelistStore,
    TransactionStore,
    LedgerStore,
    IdempotencyStore,
    EventStore,
    OutboxStore,
    SettingsStore,
    WebhookStore
{}

/**
 * How a unit of work may touch storage:
 * - "write": reads and writes, atomic and isolated from other write units (see `transaction`);
 * - "read": reads only, all from one snapshot, so a page and its total agree;
 * - "lookup": reads only, each seeing what is committed when it runs, with no snapshot between them. An adapter
 *   opens no transaction for it: one round trip per statement, or one for reads issued together where the adapter
 *   sends them together (PostgreSQL). For reads whose answer stands alone (a record by id, a credential, a list's
 *   first page with its total, see `unitForPage`) or is checked again under a write unit's locks (the validation
 *   before a fee quote).
 */
export type UnitMode = "lookup" | "read" | "write"

/**
 * The unit a page of a list needs. A store reads a list's first page and its total together, at one moment (the
 * SQL stores in one statement), so a lookup is enough, and on SQL engines it opens no transaction. A later page
 * counts the list and then reads its rows: a read unit's snapshot keeps the two in agreement.
 */
export const unitForPage = (request: Page.PageRequest): UnitMode => (Page.offset(request) === 0 ? "lookup" : "read")

export class Storage extends Context.Service<Storage, {
  /**
   * Runs `work` as one unit: atomic, isolated from other write units, committed when it succeeds and rolled back
   * when it fails or is interrupted. A "read" or "lookup" unit must not write (see `UnitMode`).
   */
  readonly transaction: <A, E, R>(
    mode: UnitMode,
    work: (unit: StorageUnit) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | StorageError, R>
  /** API users kept between requests, where the store can confirm one in a request's own round trip. */
  readonly keptCredentials?: KeptCredentials
}>()("@custody-relay/core/Storage") {
  static readonly layerMemory: Layer.Layer<Storage> = Layer.effect(Storage, Effect.suspend(() => makeMemory()))
}

/** An API user a store kept from an earlier lookup by key id, with the store's stamp of the row it read. */
export interface KeptApiUser {
  readonly user: ApiUser
  readonly stamp: string
}

/**
 * API users a store keeps between requests (PostgreSQL, see storage-sql's KeptApiUsers), so a request need not wait
 * for its credential before its first statement. A request may run on a kept API user only if the store confirms
 * it: while `CurrentCredential` is pending, each unit the request opens re-reads the API user's row in the same
 * round trip as its first statement and compares it with the stamp. A row that differs fails that unit with
 * `CredentialChanged` before anything of it is committed; one that matches confirms the credential, and the
 * request's later units read nothing more for it. A change made on any node therefore applies to the next request
 * (AUTH-PERM-2).
 */
export interface KeptCredentials {
  readonly get: (keyId: string) => KeptApiUser | undefined
}

/** A kept API user a request runs on, and whether a unit of the request has confirmed it yet. */
export interface PendingCredential {
  readonly keyId: string
  readonly stamp: string
  confirmed: boolean
}

/** The kept credential the current request runs on, until confirmed (see `KeptCredentials`). */
export const CurrentCredential = Context.Reference<PendingCredential | undefined>("@custody-relay/core/Storage/CurrentCredential", {
  defaultValue: () => undefined
})

/** Newest first, id as tie-break: the one order every adapter uses for lists. */
export const compareNewestFirst = (
  a: { readonly createdAt: string; readonly id: string },
  b: { readonly createdAt: string; readonly id: string }
): number => (a.createdAt === b.createdAt ? (a.id < b.id ? 1 : a.id > b.id ? -1 : 0) : a.createdAt < b.createdAt ? 1 : -1)

const pageOf = <A extends { readonly createdAt: string; readonly id: string }>(
  rows: ReadonlyArray<A>,
  request: Page.PageRequest
): Page.Page<A> => {
  const sorted = [...rows].sort(compareNewestFirst)
  const start = Page.offset(request)
  return { items: sorted.slice(start, start + request.limit), total: sorted.length }
}

const includesFolded = (haystack: string | null, needle: string): boolean =>
  haystack !== null && haystack.toLowerCase().includes(needle.toLowerCase())

/** Whether an account satisfies every given filter; the memory store uses it, and SQL adapters mirror it. */
export const accountMatches = (account: Account, filter: AccountFilter): boolean =>
  (filter.search === undefined ||
    includesFolded(account.name, filter.search) ||
    includesFolded(account.assetId, filter.search) ||
    includesFolded(account.address, filter.search)) &&
  (filter.assetId === undefined || account.assetId === filter.assetId) &&
  (filter.workspace === undefined || account.workspace === filter.workspace) &&
  (filter.roles === undefined || filter.roles.length === 0 || filter.roles.includes(account.role)) &&
  (filter.status === undefined || account.status === filter.status)

export const whitelistMatches = (entry: WhitelistedAddress, filter: WhitelistFilter): boolean =>
  (filter.assetTypes === undefined || filter.assetTypes.length === 0 || filter.assetTypes.includes(entry.assetType)) &&
  (filter.statuses === undefined || filter.statuses.length === 0 || filter.statuses.includes(entry.status))

export const transactionMatches = (tx: Transaction.Transaction, filter: Transaction.TransactionFilter): boolean =>
  (filter.accountId === undefined || tx.sourceAccountId === filter.accountId) &&
  (filter.assetType === undefined || tx.assetType === filter.assetType) &&
  (filter.group === undefined || Transaction.groupOf[tx.status] === filter.group)

/** A table of immutable records whose writes a unit stages and commits in one step. */
class MemoryTable<V> {
  readonly committed = new Map<string, V>()
}

class StagedTable<V> {
  readonly writes = new Map<string, V>()
  readonly deletes = new Set<string>()
  constructor(readonly table: MemoryTable<V>) {}
  get(key: string): V | undefined {
    if (this.deletes.has(key)) return undefined
    return this.writes.get(key) ?? this.table.committed.get(key)
  }
  set(key: string, value: V): void {
    this.deletes.delete(key)
    this.writes.set(key, value)
  }
  delete(key: string): void {
    this.writes.delete(key)
    this.deletes.add(key)
  }
  *values(): Iterable<V> {
    for (const [key, value] of this.table.committed) {
      if (!this.writes.has(key) && !this.deletes.has(key)) yield value
    }
    yield* this.writes.values()
  }
  commit(): void {
    for (const key of this.deletes) this.table.committed.delete(key)
    for (const [key, value] of this.writes) this.table.committed.set(key, value)
  }
}

const read = <A>(f: () => A): Op<A> => Effect.sync(f)
const unique = (constraint: string) =>
  new StorageError({
    reason: new StorageConstraintViolated({ constraint, message: `duplicate key for ${constraint}`, cause: null })
  })
const idempotencyKey = (scope: string, key: string) => `${scope}\u0000${key}`
// The same refusals as the SQL stores, so code tested on memory behaves the same on a database.
const missing = (what: string, id: string) =>
  Effect.fail(
    new StorageError({ reason: new StorageFault({ message: `no ${what} ${id} to update`, cause: null }) })
  )

// A unit is opened for every unit of work, so what it needs is made by these factories and its methods are
// method shorthand: under tsx (how `pnpm start` runs) esbuild's keepNames wraps each arrow function assigned to a
// name or a property in a `__name` call, an `Object.defineProperty` per function per unit.
const memoryWriteIn = (mode: UnitMode) => <A>(f: () => A): Op<A> =>
  mode === "write" ? Effect.sync(f) : Effect.die(new Error(`a ${mode} unit of work attempted a write`))
/**
 * Deletes from `table` up to `limit` of the values `old` takes, those earliest by `at` first (Retention's
 * housekeeping); answers how many.
 */
const memoryDeleteOldest = (write: <A>(f: () => A) => Op<A>) =>
<V>(table: StagedTable<V>, keyOf: (value: V) => string, old: (value: V) => boolean, at: (value: V) => string, limit: number): Op<number> =>
  write(() => {
    const oldest = [...table.values()].filter(old).sort((a, b) => (at(a) < at(b) ? -1 : at(a) > at(b) ? 1 : 0)).slice(0, limit)
    for (const value of oldest) table.delete(keyOf(value))
    return oldest.length
  })
const memoryUpdateWith = (write: <A>(f: () => A) => Op<A>) => <V>(table: StagedTable<V>, what: string, id: string, value: V): Op<void> =>
  Effect.flatMap(write(() => table.get(id)), (existing) =>
    existing === undefined ? missing(what, id) : Effect.sync(() => table.set(id, value)))

const makeMemory = Effect.fnUntraced(function*() {
  const clients = new MemoryTable<Client>()
  const apiUsers = new MemoryTable<ApiUser>()
  const apiUserIdByKeyId = new MemoryTable<ApiUserId>()
  const accounts = new MemoryTable<Account>()
  const whitelist = new MemoryTable<WhitelistedAddress>()
  const transactions = new MemoryTable<Transaction.Transaction>()
  const ledger = new MemoryTable<LedgerEntry>()
  const idempotency = new MemoryTable<IdempotencyRecord>()
  const events = new MemoryTable<LoggedEvent>()
  const outbox = new MemoryTable<OutboxEntry>()
  const settings = new MemoryTable<string>()
  const webhookSubscriptions = new MemoryTable<WebhookSubscription>()
  const webhookDeliveries = new MemoryTable<WebhookDelivery>()
  let lastPosition = 0
  const writeLock = yield* Semaphore.make(1)

  const openUnit = (mode: UnitMode) => {
    const staged = {
      clients: new StagedTable(clients),
      apiUsers: new StagedTable(apiUsers),
      apiUserIdByKeyId: new StagedTable(apiUserIdByKeyId),
      accounts: new StagedTable(accounts),
      whitelist: new StagedTable(whitelist),
      transactions: new StagedTable(transactions),
      ledger: new StagedTable(ledger),
      idempotency: new StagedTable(idempotency),
      events: new StagedTable(events),
      outbox: new StagedTable(outbox),
      settings: new StagedTable(settings),
      webhookSubscriptions: new StagedTable(webhookSubscriptions),
      webhookDeliveries: new StagedTable(webhookDeliveries)
    }
    const write = memoryWriteIn(mode)
    const update = memoryUpdateWith(write)
    const deleteOldest = memoryDeleteOldest(write)
    /** Every pending outbox entry `matches` takes, due at `at` (held, resumed); answers how many. */
    const retimePending = (at: OutboxEntry["nextAttemptAt"], now: OutboxEntry["updatedAt"], matches: (entry: OutboxEntry) => boolean) =>
      write(() => {
        let retimed = 0
        for (const entry of [...staged.outbox.values()]) {
          if (entry.state === "pending" && matches(entry)) {
            staged.outbox.set(entry.id, { ...entry, nextAttemptAt: at, updatedAt: now })
            retimed++
          }
        }
        return retimed
      })

    const unit: StorageUnit = {
      insertClient(client) {
        return staged.clients.get(client.id) ? Effect.fail(unique("clients_pkey")) : write(() => staged.clients.set(client.id, client))
      },
      getClient(id) {
        return read(() => Option.fromNullishOr(staged.clients.get(id)))
      },

      insertApiUser(user) {
        return staged.apiUsers.get(user.id) || staged.apiUserIdByKeyId.get(user.keyId)
          ? Effect.fail(unique("api_users_key_id"))
          : write(() => {
            staged.apiUsers.set(user.id, user)
            staged.apiUserIdByKeyId.set(user.keyId, user.id)
          })
      },
      getApiUser(id) {
        return read(() => Option.fromNullishOr(staged.apiUsers.get(id)))
      },
      findApiUserByKeyId(keyId) {
        return read(() => {
          const id = staged.apiUserIdByKeyId.get(keyId)
          return Option.fromNullishOr(id === undefined ? undefined : staged.apiUsers.get(id))
        })
      },
      updateApiUser(user) {
        return update(staged.apiUsers, "api user", user.id, user)
      },
      listClients() {
        return read(() => [...staged.clients.values()].sort((a, b) => (a.id < b.id ? -1 : 1)))
      },
      listApiUsers(clientId) {
        return read(() =>
          [...staged.apiUsers.values()].filter((user) => clientId === undefined || user.clientId === clientId).sort((a, b) => (a.id < b.id ? -1 : 1))
        )
      },

      insertAccount(account) {
        return staged.accounts.get(account.id) ? Effect.fail(unique("accounts_pkey")) : write(() => staged.accounts.set(account.id, account))
      },
      getAccount(id) {
        return read(() => Option.fromNullishOr(staged.accounts.get(id)))
      },
      findAccountByIdentity(clientId, identity) {
        return read(() => {
          for (const a of staged.accounts.values()) {
            if (
              a.clientId === clientId && a.status !== "rejected" && a.name === identity.name &&
              a.workspace === identity.workspace && a.assetId === identity.assetId && a.role === identity.role
            ) return Option.some(a)
          }
          return Option.none()
        })
      },
      updateAccount(account) {
        return update(staged.accounts, "account", account.id, account)
      },
      listAccounts(clientId, filter, page) {
        return read(() => pageOf([...staged.accounts.values()].filter((a) => a.clientId === clientId && accountMatches(a, filter)), page))
      },

      insertWhitelistedAddress(entry) {
        return staged.whitelist.get(entry.id) ? Effect.fail(unique("whitelisted_addresses_pkey")) : write(() => staged.whitelist.set(entry.id, entry))
      },
      getWhitelistedAddress(id) {
        return read(() => Option.fromNullishOr(staged.whitelist.get(id)))
      },
      findWhitelistedAddress(clientId, assetType, addresses) {
        return read(() => {
          for (const e of staged.whitelist.values()) {
            if (e.clientId === clientId && e.assetType === assetType && addresses.includes(e.address) && e.status !== "ARCHIVED") {
              return Option.some(e)
            }
          }
          return Option.none()
        })
      },
      updateWhitelistedAddress(entry) {
        return update(staged.whitelist, "whitelisted address", entry.id, entry)
      },
      listWhitelistedAddresses(clientId, filter, page) {
        return read(() => pageOf([...staged.whitelist.values()].filter((e) => e.clientId === clientId && whitelistMatches(e, filter)), page))
      },

      insertTransaction(tx) {
        return staged.transactions.get(tx.id) ? Effect.fail(unique("transactions_pkey")) : write(() => staged.transactions.set(tx.id, tx))
      },
      getTransaction(id) {
        return read(() => Option.fromNullishOr(staged.transactions.get(id)))
      },
      updateTransaction(tx) {
        return update(staged.transactions, "transaction", tx.id, tx)
      },
      listTransactions(clientId, filter, page) {
        return read(() => {
          const found = pageOf([...staged.transactions.values()].filter((t) => t.clientId === clientId && transactionMatches(t, filter)), page)
          return { items: found.items.map(Transaction.summaryOf), total: found.total }
        })
      },
      listOpenTransactionsFrom(accountId) {
        return read(() =>
          [...staged.transactions.values()].filter((t) => t.sourceAccountId === accountId && Transaction.isOpen(t.status))
        )
      },

      insertLedgerEntry(entry) {
        return staged.ledger.get(entry.id) ? Effect.fail(unique("ledger_entries_pkey")) : write(() => staged.ledger.set(entry.id, entry))
      },
      listLedgerEntries(accountId) {
        return read(() => [...staged.ledger.values()].filter((e) => e.accountId === accountId))
      },

      claimIdempotencyKey(claim) {
        return write(() => {
          const key = idempotencyKey(claim.scope, claim.key)
          const found = staged.idempotency.get(key)
          if (found !== undefined && found.expiresAt > claim.createdAt) return Option.some(found)
          // Memory write units run one at a time, so no other unit can hold the key meanwhile.
          staged.idempotency.set(key, { ...claim, result: "" })
          return Option.none()
        })
      },
      findIdempotencyRecord(scope, key, now) {
        return read(() =>
          Option.filter(
            Option.fromNullishOr(idempotency.committed.get(idempotencyKey(scope, key))),
            (found) => found.expiresAt > now
          )
        )
      },
      completeIdempotencyKey(scope, key, result) {
        const id = idempotencyKey(scope, key)
        return Effect.flatMap(write(() => staged.idempotency.get(id)), (claimed) =>
          claimed === undefined ? missing("idempotency claim", id) : Effect.sync(() => staged.idempotency.set(id, { ...claimed, result })))
      },
      appendEvent(event) {
        // Positions are taken in the write lock, so they follow commit order as the SQL sequences do per entity.
        return write(() => staged.events.set(event.id, { ...event, position: ++lastPosition }))
      },
      listEvents(filter, afterPosition, limit) {
        return read(() =>
          [...staged.events.values()]
            .filter((e) =>
              e.position > afterPosition && (filter.clientId === undefined || e.clientId === filter.clientId) &&
              (filter.entityId === undefined || e.entityId === filter.entityId)
            )
            .sort((a, b) => a.position - b.position)
            .slice(0, limit)
        )
      },

      pageEvents(clientId, filter, request) {
        return read(() => {
          const matching = [...staged.events.values()]
            .filter((e) => (clientId === null || e.clientId === clientId) && trailMatches(e, filter))
            .sort((a, b) => b.position - a.position)
          const start = Page.offset(request)
          return { items: matching.slice(start, start + request.limit), total: matching.length }
        })
      },

      insertOutboxEntry(entry) {
        return staged.outbox.get(entry.id) ? Effect.fail(unique("outbox_entries_pkey")) : write(() => staged.outbox.set(entry.id, entry))
      },
      getOutboxEntry(id) {
        return read(() => Option.fromNullishOr(staged.outbox.get(id)))
      },
      updateOutboxEntry(entry) {
        return update(staged.outbox, "outbox entry", entry.id, entry)
      },
      dueOutboxEntries(now, limit, busyLanes = [], { pool, skipClients = [] } = {}) {
        const kinds = kindsOf(pool)
        return read(() =>
          [...staged.outbox.values()]
            .filter((e) =>
              e.state === "pending" && e.nextAttemptAt <= now && (e.leasedUntil === null || e.leasedUntil <= now) &&
              (e.lane === null || !busyLanes.includes(e.lane)) && kinds.includes(e.kind) &&
              !skipClients.includes(e.clientId)
            )
            .sort((a, b) => (a.nextAttemptAt < b.nextAttemptAt ? -1 : a.nextAttemptAt > b.nextAttemptAt ? 1 : a.id < b.id ? -1 : 1))
            .slice(0, limit)
        )
      },
      listOutboxEntries(subjectId) {
        return read(() => [...staged.outbox.values()].filter((e) => e.subjectId === subjectId).sort((a, b) => (a.id < b.id ? -1 : 1)))
      },
      holdLane(lane, except, now) {
        return retimePending(HELD, now, (entry) =>
          entry.lane === lane && entry.id !== except && entry.nextAttemptAt < HELD && (entry.leasedUntil === null || entry.leasedUntil <= now))
      },
      resumeLane(lane, now) {
        return retimePending(now, now, (entry) => entry.lane === lane && entry.nextAttemptAt === HELD)
      },
      deleteSettledOutboxEntries(settledBefore, limit) {
        return deleteOldest(
          staged.outbox,
          (e) => e.id,
          (e) => e.state !== "pending" && e.updatedAt < settledBefore && deletedOnceSettled.includes(e.kind),
          (e) => e.updatedAt,
          limit
        )
      },

      insertWebhookSubscription(subscription) {
        return staged.webhookSubscriptions.get(subscription.id)
          ? Effect.fail(unique("webhook_subscriptions_pkey"))
          : write(() => staged.webhookSubscriptions.set(subscription.id, subscription))
      },
      resumeUnheldDeliveries(now) {
        return retimePending(now, now, (entry) => {
          const subscription = entry.lane === null ? undefined : staged.webhookSubscriptions.get(entry.lane)
          return entry.nextAttemptAt === HELD && subscription !== undefined && !subscription.deliveriesHeld
        })
      },
      getWebhookSubscription(id) {
        return read(() => Option.fromNullishOr(staged.webhookSubscriptions.get(id)))
      },
      updateWebhookSubscription(subscription) {
        return update(staged.webhookSubscriptions, "webhook subscription", subscription.id, subscription)
      },
      listWebhookSubscriptions(clientId) {
        return read(() =>
          [...staged.webhookSubscriptions.values()].filter((s) => s.clientId === clientId).sort((a, b) => (a.id < b.id ? -1 : 1))
        )
      },
      insertWebhookDelivery(delivery) {
        return staged.webhookDeliveries.get(delivery.id)
          ? Effect.fail(unique("webhook_deliveries_pkey"))
          : write(() => staged.webhookDeliveries.set(delivery.id, delivery))
      },
      getWebhookDelivery(id) {
        return read(() => Option.fromNullishOr(staged.webhookDeliveries.get(id)))
      },
      updateWebhookDelivery(delivery) {
        return update(staged.webhookDeliveries, "webhook delivery", delivery.id, delivery)
      },
      listWebhookDeliveries(subscriptionId, limit) {
        return read(() =>
          [...staged.webhookDeliveries.values()].filter((d) => d.subscriptionId === subscriptionId)
            .sort((a, b) => (a.id < b.id ? 1 : -1)).slice(0, limit)
        )
      },
      deleteSettledWebhookDeliveries(settledBefore, limit) {
        return deleteOldest(staged.webhookDeliveries, (d) => d.id, (d) => d.state !== "pending" && d.updatedAt < settledBefore, (d) => d.updatedAt, limit)
      },
      hasEarlierPendingDelivery(delivery) {
        // Earlier in the log, by the events' positions, not their times (the SQL store's reasons).
        return read(() => {
          const position = staged.events.get(delivery.eventId)?.position
          return position !== undefined && [...staged.webhookDeliveries.values()].some((d) => {
            const earlier = staged.events.get(d.eventId)?.position
            return d.subscriptionId === delivery.subscriptionId && d.entityId === delivery.entityId && d.state === "pending" &&
              earlier !== undefined && earlier < position
          })
        })
      },

      getSetting(name) {
        return read(() => Option.fromNullishOr(staged.settings.get(name)))
      },
      putSetting(name, value) {
        return write(() => staged.settings.set(name, value))
      },

      deleteExpiredIdempotencyRecords(now, limit) {
        return deleteOldest(staged.idempotency, (r) => idempotencyKey(r.scope, r.key), (r) => r.expiresAt < now, (r) => r.expiresAt, limit)
      }
    }
    return {
      unit,
      commit() {
        Object.values(staged).forEach((table) => table.commit())
      }
    }
  }

  return Storage.of({
    transaction: <A, E, R>(mode: UnitMode, work: (unit: StorageUnit) => Effect.Effect<A, E, R>) => {
      const run = Effect.suspend(() => {
        const { commit, unit } = openUnit(mode)
        // Commit in the same synchronous step as the unit's success, so no reader sees half of it.
        return Effect.tap(work(unit), () => Effect.sync(commit))
      })
      return mode === "write" ? writeLock.withPermits(1)(run) : run
    }
  })
})

/** A unit of work that is open, and the mode it was opened in. */
export interface OpenUnit {
  readonly mode: UnitMode
  readonly unit: StorageUnit
}

/**
 * The unit of work open in the current fiber, if any. `run` sets it for the work it runs, and a `run` inside that
 * work joins the open unit instead of opening another: a caller can make several operations one unit (the HTTP
 * handler makes a GET's authentication and its operation one read), and one storage transaction instead of two.
 */
export const CurrentUnit = Context.Reference<OpenUnit | undefined>("@custody-relay/core/Storage/CurrentUnit", {
  defaultValue: () => undefined
})

/** What each mode guarantees, in order: a unit joins an open one that guarantees at least as much. */
const rank: Record<UnitMode, number> = { lookup: 0, read: 1, write: 2 }

const strongerInsideWeaker = (mode: UnitMode, open: UnitMode) =>
  Effect.die(new Error(`a ${open} unit of work attempted to open a ${mode} unit`))

/**
 * Runs `work` as one unit of work of the ambient Storage. A storage failure that survived the adapter's retries
 * is an infrastructure fault, not an answer to the caller's request: it becomes a defect here, at the boundary.
 *
 * Inside an open unit (see `CurrentUnit`), `work` runs in that unit when the unit guarantees at least what `mode`
 * asks: a lookup in any unit, a read in a read or write unit, a write in a write unit. It then sees the unit's
 * earlier writes and commits or rolls back with it; a storage failure in it is still a defect, so the outer unit is
 * not re-run for it (it is for a lost race of its own statements). Asking more than the open unit gives (a write in
 * a read unit, a snapshot in a lookup) is a defect, as a write through a read unit is.
 */
export const run = <A, E, R>(
  mode: UnitMode,
  work: (unit: StorageUnit) => Effect.Effect<A, E, R>
): Effect.Effect<A, Exclude<E, StorageError>, R | Storage> =>
  Effect.withFiber((fiber) => {
    const open = fiber.getRef(CurrentUnit)
    // The service is read from the fiber this step already has: `Storage.use` would take steps of its own.
    const body: Effect.Effect<A, E | StorageError, R | Storage> = open === undefined
      ? Context.getUnsafe(fiber.context, Storage).transaction(mode, (unit) => Effect.provideService(work(unit), CurrentUnit, { mode, unit }))
      : rank[mode] > rank[open.mode]
      ? strongerInsideWeaker(mode, open.mode)
      : work(open.unit)
    // Data-first: `pipe` with a combinator of optional arguments builds and spreads a closure on every call.
    return Effect.catchIf(body, isStorageError, Effect.die)
  }) as Effect.Effect<A, Exclude<E, StorageError>, R | Storage>

const isStorageError = (error: unknown): error is StorageError => error instanceof StorageError
