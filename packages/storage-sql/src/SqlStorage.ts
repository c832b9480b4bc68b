/**
 * The Storage port over kysely, written once for both engines. A unit of work is one database transaction,
 * begun as the engine says (`SqlEngine.begin`), committed when the unit succeeds and rolled back when it fails or
 * is interrupted. A unit that fails with a retryable `StorageError` (lost a race: busy, deadlock, a duplicate its
 * own check did not see) is run again from the start, a bounded number of times with a short jittered backoff.
 *
 * Every query means what the memory store means: the same filters (`Storage.accountMatches` and friends), the
 * same order (`Storage.compareNewestFirst`), the same page arithmetic (`Page.offset`). A read unit refuses writes
 * before they reach the database, as the memory store does.
 */
import { type Account, type Ids, Page, Storage, type Transaction, type WhitelistedAddress } from "@custody-relay/core"
import { Effect, Option, Schedule } from "effect"
import { type Compilable, type ExpressionBuilder, type Expression, type Kysely, sql, type SqlBool } from "kysely"
import * as AccountRow from "./rows/AccountRow.js"
import * as ApiUserRow from "./rows/ApiUserRow.js"
import * as ClientRow from "./rows/ClientRow.js"
import * as LedgerEntryRow from "./rows/LedgerEntryRow.js"
import * as TransactionRow from "./rows/TransactionRow.js"
import * as WhitelistedAddressRow from "./rows/WhitelistedAddressRow.js"
import type {
  AccountsTable,
  ApiUsersTable,
  Database,
  LedgerEntriesTable,
  TransactionsTable,
  WhitelistedAddressesTable
} from "./schema/Database.js"
import type { SqlEngine } from "./SqlEngine.js"
import type { SqlSession } from "./SqlSession.js"
import { byColumns, byKey } from "./StatementTemplate.js"
import * as EventLog from "./stores/EventLog.js"
import * as IdempotencyKeys from "./stores/IdempotencyKeys.js"
import * as OutboxEntries from "./stores/OutboxEntries.js"
import * as StorageFailure from "./StorageFailure.js"

export interface SqlStorageOptions {
  /** How many times a unit that lost a race is run again before its error is let through; default 8. */
  readonly maxRetries?: number
}

export const DEFAULT_MAX_RETRIES = 8

export type Op<A> = Effect.Effect<A, Storage.StorageError>

/**
 * Backoff between re-runs: 2 ms doubling, capped at 100 ms, jittered so units that collided once do not collide
 * again in step.
 */
export const backoff = Schedule.min([Schedule.exponential("2 millis"), Schedule.spaced("100 millis")]).pipe(Schedule.jittered)

export const isRetryable = (error: unknown): boolean => error instanceof Storage.StorageError && error.isRetryable

/** An update that matched no row: the core updates only records it read in the same unit, so this is a bug. */
export const expectOneRow = (table: string, key: string) => (updated: number): Op<void> =>
  updated === 1 ? Effect.void : Effect.fail(StorageFailure.fault(new Error(`update of ${table} ${key} matched ${updated} rows`)))

const countOf = (row: { readonly total: number | string | bigint } | undefined): number => Number(row?.total ?? 0)

/** `row` decoded, or none when the query found no row. */
export const optional = <Row, A>(decode: (row: Row) => A) => (row: Row | undefined): Option.Option<A> =>
  row === undefined ? Option.none() : Option.some(decode(row))

/** The page of `request` and the total; a short page ends the list, so only a full page pays for the count. */
const pageOf = <Row, A>(
  rows: (limit: number, offset: number) => Op<ReadonlyArray<Row>>,
  count: () => Op<number>,
  decode: (row: Row) => A,
  request: Page.PageRequest
): Op<Page.Page<A>> => {
  const offset = Page.offset(request)
  return Effect.flatMap(rows(request.limit, offset), (found) => {
    const endsHere = found.length < request.limit && (found.length > 0 || offset === 0)
    const items = found.map(decode)
    return endsHere
      ? Effect.succeed({ items, total: offset + found.length })
      : Effect.map(count(), (total) => ({ items, total }))
  })
}

/** `needle` occurs in `column`: the folded search, as `String.includes` on the folded texts. */
const contains = (
  engine: SqlEngine,
  column: "name_folded" | "asset_id_folded" | "address_folded",
  needle: string
): Expression<SqlBool> =>
  // No stored text holds U+0000 (the core's Text refuses control characters, and PostgreSQL cannot store it), so
  // such a needle matches nothing; PostgreSQL would refuse the parameter instead.
  needle.includes("\u0000")
    ? sql<SqlBool>`1 = 0`
    : sql<SqlBool>`${sql.raw(engine.substringPosition)}(${sql.ref(column)}, ${needle}) > 0`

/**
 * A list query's filter as the values it binds, one name per value (a list of roles as `role0`, `role1`, ...), so
 * the query can be compiled once per shape (StatementTemplate.byColumns) and each call only binds its values.
 */
interface AccountListValues {
  readonly client_id: Ids.ClientId
  readonly search?: string | undefined
  readonly asset_id?: string | undefined
  readonly workspace?: Account.Workspace | undefined
  readonly status?: Account.AccountStatus | undefined
  readonly [role: `role${number}`]: Account.AccountRole
}

interface WhitelistListValues {
  readonly client_id: Ids.ClientId
  readonly [assetTypeOrStatus: `asset_type${number}` | `status${number}`]: string
}

interface TransactionListValues {
  readonly client_id: Ids.ClientId
  readonly source_account_id?: string | undefined
  readonly asset_type?: string | undefined
  readonly status_group?: Transaction.StatusGroup | undefined
}

interface PageValues {
  readonly limit: number
  readonly offset: number
}

/** `values` named `prefix0`, `prefix1`, ... in order: a list the template binds one value at a time. */
const numbered = <A>(prefix: string, values: ReadonlyArray<A> | undefined): Record<string, A> =>
  Object.fromEntries((values ?? []).map((value, index) => [`${prefix}${index}`, value]))

const listed = <A>(values: object, prefix: string): Array<A> =>
  Object.entries(values).flatMap(([name, value]) => (name.startsWith(prefix) && /^\d+$/.test(name.slice(prefix.length)) ? [value as A] : []))

const accountListValues = (clientId: Ids.ClientId, filter: Account.AccountFilter): AccountListValues => ({
  client_id: clientId,
  search: filter.search === undefined ? undefined : AccountRow.fold(filter.search),
  asset_id: filter.assetId,
  workspace: filter.workspace,
  status: filter.status,
  ...numbered("role", filter.roles)
})

const whitelistListValues = (clientId: Ids.ClientId, filter: WhitelistedAddress.WhitelistFilter): WhitelistListValues => ({
  client_id: clientId,
  ...numbered("asset_type", filter.assetTypes),
  ...numbered("status", filter.statuses)
})

const transactionListValues = (clientId: Ids.ClientId, filter: Transaction.TransactionFilter): TransactionListValues => ({
  client_id: clientId,
  source_account_id: filter.accountId,
  asset_type: filter.assetType,
  status_group: filter.group
})

const accountWhere = (engine: SqlEngine, values: AccountListValues) =>
(eb: ExpressionBuilder<Database, "accounts">): Expression<SqlBool> => {
  const { text } = engine.opaque
  const terms: Array<Expression<SqlBool>> = [eb("client_id", "=", text(values.client_id))]
  if (values.search !== undefined) {
    const needle = values.search
    terms.push(
      eb.or([
        contains(engine, "name_folded", needle),
        contains(engine, "asset_id_folded", needle),
        contains(engine, "address_folded", needle)
      ])
    )
  }
  if (values.asset_id !== undefined) terms.push(eb("asset_id", "=", text(values.asset_id)))
  if (values.workspace !== undefined) terms.push(eb("workspace", "=", text(values.workspace)))
  const roles = listed<Account.AccountRole>(values, "role")
  if (roles.length > 0) terms.push(eb("role", "in", roles))
  if (values.status !== undefined) terms.push(eb("status", "=", text(values.status)))
  return eb.and(terms)
}

const whitelistWhere = (engine: SqlEngine, values: WhitelistListValues) =>
(eb: ExpressionBuilder<Database, "whitelisted_addresses">): Expression<SqlBool> => {
  const terms: Array<Expression<SqlBool>> = [eb("client_id", "=", engine.opaque.text(values.client_id))]
  const assetTypes = listed<string>(values, "asset_type")
  const statuses = listed<WhitelistedAddress.WhitelistStatus>(values, "status")
  if (assetTypes.length > 0) terms.push(eb("asset_type", "in", assetTypes))
  if (statuses.length > 0) terms.push(eb("status", "in", statuses))
  return eb.and(terms)
}

const transactionWhere = (engine: SqlEngine, values: TransactionListValues) =>
(eb: ExpressionBuilder<Database, "transactions">): Expression<SqlBool> => {
  const { text } = engine.opaque
  const terms: Array<Expression<SqlBool>> = [eb("client_id", "=", text(values.client_id))]
  // The filter's account id is any string the caller sent, not an AccountId: compare it as text.
  if (values.source_account_id !== undefined) terms.push(sql<SqlBool>`${sql.ref("source_account_id")} = ${text(values.source_account_id)}`)
  if (values.asset_type !== undefined) terms.push(eb("asset_type", "=", text(values.asset_type)))
  if (values.status_group !== undefined) terms.push(eb("status_group", "=", text(values.status_group)))
  return eb.and(terms)
}

/**
 * How a unit's statements reach its session: each is built with kysely, compiled, and executed by the session.
 * `affected` counts the rows a write changed; a write is refused before it reaches the database in a read unit,
 * as the memory store refuses it.
 */
/** What each store of a unit is made from: statement builder, the unit's statements, the engine, the mode. */
export interface StoreArguments {
  readonly db: Kysely<Database>
  readonly statements: Statements
  readonly engine: SqlEngine
  readonly mode: Storage.UnitMode
}

export interface Statements {
  readonly rows: <R>(query: Compilable<R>) => Op<ReadonlyArray<R>>
  readonly first: <R>(query: Compilable<R>) => Op<R | undefined>
  readonly write: (query: Compilable<unknown>) => Op<number>
}

const READ_UNIT_WRITE = new Error("a read unit of work attempted a write")

const statementsOf = (session: SqlSession, mode: Storage.UnitMode): Statements => ({
  rows(query) {
    return Effect.map(session.execute(query.compile()), (result) => result.rows)
  },
  first(query) {
    return Effect.map(session.execute(query.compile()), (result) => result.rows[0])
  },
  write(query) {
    return mode === "write"
      ? Effect.map(session.execute(query.compile()), (result) => Number(result.numAffectedRows ?? 0n))
      : Effect.die(READ_UNIT_WRITE)
  }
})

/** The store's lookups by id or key, each compiled once per store; the second of a pair locks its row (see SqlEngine). */
const lookupsOf = (db: Kysely<Database>) => {
  return {
    client: [
      byKey((id: Ids.ClientId) => db.selectFrom("clients").selectAll().where("id", "=", id)),
      byKey((id: Ids.ClientId) => db.selectFrom("clients").selectAll().where("id", "=", id).forNoKeyUpdate())
    ] as const,
    apiUserByKeyId: byKey((keyId: string) => db.selectFrom("api_users").selectAll().where("key_id", "=", keyId)),
    apiUser: [
      byKey((id: Ids.ApiUserId) => db.selectFrom("api_users").selectAll().where("id", "=", id)),
      byKey((id: Ids.ApiUserId) => db.selectFrom("api_users").selectAll().where("id", "=", id).forNoKeyUpdate())
    ] as const,
    account: [
      byKey((id: Ids.AccountId) => db.selectFrom("accounts").selectAll().where("id", "=", id)),
      byKey((id: Ids.AccountId) => db.selectFrom("accounts").selectAll().where("id", "=", id).forNoKeyUpdate())
    ] as const,
    whitelistedAddress: [
      byKey((id: Ids.WhitelistedAddressId) => db.selectFrom("whitelisted_addresses").selectAll().where("id", "=", id)),
      byKey((id: Ids.WhitelistedAddressId) => db.selectFrom("whitelisted_addresses").selectAll().where("id", "=", id).forNoKeyUpdate())
    ] as const,
    transaction: [
      byKey((id: Ids.TransactionId) => db.selectFrom("transactions").selectAll().where("id", "=", id)),
      byKey((id: Ids.TransactionId) => db.selectFrom("transactions").selectAll().where("id", "=", id).forNoKeyUpdate())
    ] as const
  }
}

type Changes<Row extends { readonly id: unknown }> = Partial<Omit<Row, "id">> & Pick<Row, "id">

/**
 * A transaction's counter row (see migration 4) and the step it moves by: `count` for a new row, `increment` for
 * an existing one. They are the same value, given twice because a template binds each value once.
 */
interface CountStep extends Pick<TransactionsTable, "client_id" | "source_account_id" | "asset_type" | "status_group"> {
  readonly count: 1 | -1
  readonly increment: 1 | -1
}

/** The store's inserts and updates by id, each compiled once per set of columns it writes (see StatementTemplate). */
const writesOf = (db: Kysely<Database>) => ({
  insertTransaction: byColumns((row: TransactionsTable) => db.insertInto("transactions").values(row)),
  insertLedgerEntry: byColumns((row: LedgerEntriesTable) => db.insertInto("ledger_entries").values(row)),
  countTransactions: byColumns((step: CountStep) =>
    db.insertInto("transaction_counts")
      .values({
        client_id: step.client_id,
        source_account_id: step.source_account_id,
        asset_type: step.asset_type,
        status_group: step.status_group,
        count: step.count
      })
      .onConflict((oc) =>
        oc.columns(["client_id", "source_account_id", "asset_type", "status_group"])
          .doUpdateSet((eb) => ({ count: eb("transaction_counts.count", "+", step.increment) }))
      )
  ),
  updateApiUser: byColumns(({ id, ...changes }: Changes<ApiUsersTable>) => db.updateTable("api_users").set(changes).where("id", "=", id)),
  updateAccount: byColumns(({ id, ...changes }: Changes<AccountsTable>) => db.updateTable("accounts").set(changes).where("id", "=", id)),
  updateWhitelistedAddress: byColumns(({ id, ...changes }: Changes<WhitelistedAddressesTable>) =>
    db.updateTable("whitelisted_addresses").set(changes).where("id", "=", id)
  ),
  updateTransaction: byColumns(({ id, ...changes }: Changes<TransactionsTable>) =>
    db.updateTable("transactions").set(changes).where("id", "=", id)
  )
})

/**
 * The store's pages and their totals, each compiled once per filter shape (which filters are set, how many values
 * a list filter holds): building and compiling a list query through kysely cost more than SQLite running it. A
 * free-text search binds its needle three times, so it is compiled per call (StatementTemplate's rule).
 */
const listsOf = (db: Kysely<Database>, engine: SqlEngine) => {
  const { integer } = engine.opaque
  const newestFirst = <Q extends { orderBy: (column: "created_at" | "id", direction: "desc") => Q }>(query: Q): Q =>
    query.orderBy("created_at", "desc").orderBy("id", "desc")
  return {
    accountsPage: byColumns((values: AccountListValues & PageValues) =>
      newestFirst(db.selectFrom("accounts").selectAll().where(accountWhere(engine, values)))
        .limit(integer(values.limit)).offset(integer(values.offset))
    ),
    accountsTotal: byColumns((values: AccountListValues) =>
      db.selectFrom("accounts").select((eb) => eb.fn.countAll<number | string>().as("total")).where(accountWhere(engine, values))
    ),
    whitelistPage: byColumns((values: WhitelistListValues & PageValues) =>
      newestFirst(db.selectFrom("whitelisted_addresses").selectAll().where(whitelistWhere(engine, values)))
        .limit(integer(values.limit)).offset(integer(values.offset))
    ),
    whitelistTotal: byColumns((values: WhitelistListValues) =>
      db.selectFrom("whitelisted_addresses").select((eb) => eb.fn.countAll<number | string>().as("total"))
        .where(whitelistWhere(engine, values))
    ),
    transactionsPage: byColumns((values: TransactionListValues & PageValues) =>
      newestFirst(db.selectFrom("transactions").selectAll().where(transactionWhere(engine, values)))
        .limit(integer(values.limit)).offset(integer(values.offset))
    ),
    // The total is a sum of the few counter rows the filter selects, not a count of the rows themselves.
    transactionsTotal: byColumns((values: TransactionListValues) =>
      db.selectFrom("transaction_counts")
        .select((eb) => eb.fn.coalesce(eb.fn.sum<number | string>("count"), sql.lit(0)).as("total"))
        .where("client_id", "=", values.client_id)
        .$if(values.source_account_id !== undefined, (qb) =>
          qb.where(sql<SqlBool>`${sql.ref("source_account_id")} = ${values.source_account_id}`))
        .$if(values.asset_type !== undefined, (qb) => qb.where("asset_type", "=", values.asset_type ?? ""))
        .$if(values.status_group !== undefined, (qb) => qb.where("status_group", "=", values.status_group ?? "pending"))
    )
  }
}

/** The statements a store compiles once and every unit shares. */
export interface StoreStatements {
  readonly lookups: ReturnType<typeof lookupsOf>
  readonly writes: ReturnType<typeof writesOf>
  readonly lists: ReturnType<typeof listsOf>
}

export const storeStatementsOf = (db: Kysely<Database>, engine: SqlEngine): StoreStatements => ({
  lookups: lookupsOf(db),
  writes: writesOf(db),
  lists: listsOf(db, engine)
})

/**
 * The rows a write unit read by id, as it read them. The unit holds them locked (SQLite: the write lock;
 * PostgreSQL: FOR NO KEY UPDATE), so they are what the database holds until the unit itself writes them. An
 * update then sets only the columns it changes (`changedColumns`): an index over unchanged columns is left alone,
 * and so are its pages, which the commit would otherwise write again (a balance update that names every column
 * rewrites five account indexes). Emptied when each unit of work begins.
 */
export class RowsRead {
  readonly api_users = new Map<string, ApiUsersTable>()
  readonly accounts = new Map<string, AccountsTable>()
  readonly whitelisted_addresses = new Map<string, WhitelistedAddressesTable>()
  readonly transactions = new Map<string, TransactionsTable>()
  clear(): void {
    this.api_users.clear()
    this.accounts.clear()
    this.whitelisted_addresses.clear()
    this.transactions.clear()
  }
}

/**
 * What an update of a row to `next` must write: the id and the columns that differ from `before` (the row as this
 * unit read it), or every column when the unit did not read it or nothing differs.
 */
export const changedColumns = <Row extends { readonly id: unknown }>(next: Row, before: object | undefined): Changes<Row> => {
  if (before === undefined) return next
  const was = before as Readonly<Record<PropertyKey, unknown>>
  const changed: Partial<Row> = {}
  let count = 0
  for (const column of Object.keys(next) as Array<keyof Row>) {
    if (next[column] !== was[column]) {
      changed[column] = next[column]
      count++
    }
  }
  return count === 0 ? next : { ...changed, id: next.id }
}

/**
 * The unit's reads and writes over one open transaction (or any kysely handle) in one mode. A unit is made for
 * every unit of work, so it is written as method shorthand and its helpers come from module-level factories: under
 * tsx (how `pnpm start` runs the server) esbuild's keepNames wraps every arrow function assigned to a name or a
 * property in a `__name` call (an `Object.defineProperty`), about 40 of them per unit, 6% of a GET's CPU profile;
 * methods and returned arrows are left alone.
 */
export const makeUnit = (
  db: Kysely<Database>,
  session: SqlSession,
  mode: Storage.UnitMode,
  engine: SqlEngine,
  { lookups, writes, lists }: StoreStatements,
  /** Where a write unit keeps the rows it read (see RowsRead); the caller empties it when a unit of work begins. */
  read: RowsRead = new RowsRead()
): Storage.StorageUnit => {
  // `db` only builds statements; every statement runs through the unit's session.
  const statements = statementsOf(session, mode)
  const { rows, first, write } = statements
  // Reads by id in a write unit lock the row they return when the engine locks rows (see SqlEngine).
  const lock = mode === "write" && engine.locksRowsForWrite
  const locking = lock ? 1 : 0
  const countTransactions = (key: Pick<TransactionsTable, "client_id" | "source_account_id" | "asset_type" | "status_group">, delta: 1 | -1) =>
    write(writes.countTransactions({
      client_id: key.client_id,
      source_account_id: key.source_account_id,
      asset_type: key.asset_type,
      status_group: key.status_group,
      count: delta,
      increment: delta
    }))
  // A row read by id, decoded; only a write unit updates, so only a write unit keeps it (see RowsRead).
  const byId = <Row extends { readonly id: string }, A>(rowsOf: Map<string, Row>, decode: (row: Row) => A) =>
  (row: Row | undefined): Option.Option<A> => {
    if (row === undefined) return Option.none()
    if (mode === "write") rowsOf.set(row.id, row)
    return Option.some(decode(row))
  }
  // After an update the kept row is what the unit wrote, so a second update compares with the first.
  const update = <Next extends { readonly id: string }>(
    rowsOf: Map<string, object>,
    next: Next,
    statement: (changes: NoInfer<Changes<Next>>) => Compilable<unknown>,
    table: string
  ): Op<void> => {
    const before = rowsOf.get(next.id)
    return Effect.flatMap(write(statement(changedColumns(next, before))), (updated) => {
      if (updated === 1 && before !== undefined) rowsOf.set(next.id, { ...before, ...next })
      return expectOneRow(table, next.id)(updated)
    })
  }
  const apiUserById = byId(read.api_users, ApiUserRow.decode)
  const accountById = byId(read.accounts, AccountRow.decode)
  const whitelistedAddressById = byId(read.whitelisted_addresses, WhitelistedAddressRow.decode)
  const transactionById = byId(read.transactions, TransactionRow.decode)

  const sharedArguments: StoreArguments = { db, statements, engine, mode }
  return {
    ...IdempotencyKeys.store(sharedArguments),
    ...EventLog.store(sharedArguments),
    ...OutboxEntries.store(sharedArguments),
    insertClient(client) {
      return Effect.asVoid(write(db.insertInto("clients").values(ClientRow.encode(client))))
    },
    getClient(id) {
      return Effect.map(first(lookups.client[locking](id)), optional(ClientRow.decode))
    },

    insertApiUser(user) {
      return Effect.asVoid(write(db.insertInto("api_users").values(ApiUserRow.encode(user))))
    },
    getApiUser(id) {
      return Effect.map(first(lookups.apiUser[locking](id)), apiUserById)
    },
    findApiUserByKeyId(keyId) {
      return Effect.map(first(lookups.apiUserByKeyId(keyId)), optional(ApiUserRow.decode))
    },
    updateApiUser(user) {
      const { created_at: _, ...next } = ApiUserRow.encode(user)
      return update(read.api_users, next, writes.updateApiUser, "api_users")
    },

    insertAccount(account) {
      return Effect.asVoid(write(db.insertInto("accounts").values(AccountRow.encode(account))))
    },
    getAccount(id) {
      return Effect.map(first(lookups.account[locking](id)), accountById)
    },
    findAccountByIdentity(clientId, identity) {
      return Effect.map(
        first(
          db.selectFrom("accounts").selectAll()
            .where("client_id", "=", clientId)
            .where("name", "=", identity.name)
            .where("workspace", "=", identity.workspace)
            .where("asset_id", "=", identity.assetId)
            .where("role", "=", identity.role)
            // A literal, not a parameter: SQLite uses the partial unique index only when it can see the predicate.
            .where("status", "<>", sql.lit("rejected"))
        ),
        optional(AccountRow.decode)
      )
    },
    updateAccount(account) {
      const { client_id: _, created_at: __, ...next } = AccountRow.encode(account)
      return update(read.accounts, next, writes.updateAccount, "accounts")
    },
    listAccounts(clientId, filter, request) {
      const values = accountListValues(clientId, filter)
      return pageOf(
        (limit, offset) => rows(lists.accountsPage({ ...values, limit, offset })),
        () => Effect.map(first(lists.accountsTotal(values)), countOf),
        AccountRow.decode,
        request
      )
    },

    insertWhitelistedAddress(entry) {
      return Effect.asVoid(write(db.insertInto("whitelisted_addresses").values(WhitelistedAddressRow.encode(entry))))
    },
    getWhitelistedAddress(id) {
      return Effect.map(first(lookups.whitelistedAddress[locking](id)), whitelistedAddressById)
    },
    findWhitelistedAddress(clientId, assetType, addresses) {
      // No address matches an empty list (`in ()` is not SQL).
      if (addresses.length === 0) return Effect.succeed(Option.none())
      return Effect.map(
        first(
          db.selectFrom("whitelisted_addresses").selectAll()
            .where("client_id", "=", clientId)
            .where("asset_type", "=", assetType)
            .where("address", "in", addresses)
            .where("status", "<>", sql.lit("ARCHIVED"))
        ),
        optional(WhitelistedAddressRow.decode)
      )
    },
    updateWhitelistedAddress(entry) {
      const { client_id: _, created_at: __, ...next } = WhitelistedAddressRow.encode(entry)
      return update(read.whitelisted_addresses, next, writes.updateWhitelistedAddress, "whitelisted_addresses")
    },
    listWhitelistedAddresses(clientId, filter, request) {
      const values = whitelistListValues(clientId, filter)
      return pageOf(
        (limit, offset) => rows(lists.whitelistPage({ ...values, limit, offset })),
        () => Effect.map(first(lists.whitelistTotal(values)), countOf),
        WhitelistedAddressRow.decode,
        request
      )
    },

    insertTransaction(tx) {
      const row = TransactionRow.encode(tx)
      return Effect.andThen(write(writes.insertTransaction(row)), Effect.asVoid(countTransactions(row, 1)))
    },
    getTransaction(id) {
      return Effect.map(first(lookups.transaction[locking](id)), transactionById)
    },
    updateTransaction(tx) {
      // Client, source, asset and creation never change; the counters are keyed by the first three.
      const { client_id: _, source_account_id: __, asset_type: ___, created_at: ____, ...next } = TransactionRow.encode(tx)
      const id = next.id
      return Effect.gen(function*() {
        // The row as the unit read it, or read now, locked, so the group it leaves is the one it really leaves.
        const before = read.transactions.get(id) ?? (yield* first(
          db.selectFrom("transactions").select(["client_id", "source_account_id", "asset_type", "status_group"])
            .where("id", "=", id).$if(engine.locksRowsForWrite, (qb) => qb.forNoKeyUpdate())
        ))
        yield* update(read.transactions, next, writes.updateTransaction, "transactions")
        if (before !== undefined && before.status_group !== next.status_group) {
          yield* countTransactions(before, -1)
          yield* countTransactions({ ...before, status_group: next.status_group }, 1)
        }
      })
    },
    listTransactions(clientId, filter, request) {
      const values = transactionListValues(clientId, filter)
      return pageOf(
        (limit, offset) => rows(lists.transactionsPage({ ...values, limit, offset })),
        () => Effect.map(first(lists.transactionsTotal(values)), countOf),
        TransactionRow.decode,
        request
      )
    },
    listOpenTransactionsFrom(accountId) {
      return Effect.map(
        rows(
          db.selectFrom("transactions").selectAll()
            .where("source_account_id", "=", engine.opaque.text(accountId))
            // The literal lets SQLite use the partial index of open transactions.
            .where("status_group", "=", sql.lit("pending"))
            .orderBy("created_at").orderBy("id")
        ),
        (found) => found.map(TransactionRow.decode)
      )
    },

    insertLedgerEntry(entry) {
      return Effect.asVoid(write(writes.insertLedgerEntry(LedgerEntryRow.encode(entry))))
    },
    listLedgerEntries(accountId) {
      return Effect.map(
        rows(
          db.selectFrom("ledger_entries").selectAll().where("account_id", "=", engine.opaque.text(accountId))
            .orderBy("created_at").orderBy("id")
        ),
        (found) => found.map(LedgerEntryRow.decode)
      )
    }
  }
}

/** The Storage service over a kysely instance whose schema is up to date (see `migrateToLatest`). */
export const make = (
  db: Kysely<Database>,
  engine: SqlEngine,
  options: SqlStorageOptions = {}
): Storage.Storage["Service"] => {
  const times = options.maxRetries ?? DEFAULT_MAX_RETRIES
  const open = engine.sessions(db)
  const statements = storeStatementsOf(db, engine)
  // A SQLite handle reuses one session object, so its two units (read, write) are made once, not per unit of work;
  // what a unit read is forgotten when the next unit of work on it begins.
  type Made = { readonly unit: Storage.StorageUnit; readonly read: RowsRead }
  const units = new WeakMap<SqlSession, { read?: Made; write?: Made }>()
  const unitOf = (session: SqlSession, mode: Storage.UnitMode): Storage.StorageUnit => {
    let made = units.get(session)
    if (made === undefined) units.set(session, made = {})
    let unit = made[mode]
    if (unit === undefined) {
      const read = new RowsRead()
      unit = made[mode] = { unit: makeUnit(db, session, mode, engine, statements, read), read }
    } else if (mode === "write") {
      // Only a write unit keeps what it read.
      unit.read.clear()
    }
    return unit.unit
  }
  const attempt = <A, E, R>(mode: Storage.UnitMode, work: (unit: Storage.StorageUnit) => Effect.Effect<A, E, R>) =>
    Effect.acquireUseRelease(
      open(mode),
      (session) => Effect.flatMap(Effect.suspend(() => work(unitOf(session, mode))), (value) => Effect.as(session.commit, value)),
      (session) => session.release
    )
  return Storage.Storage.of({
    transaction: (mode, work) => {
      const once = attempt(mode, work)
      // Most units succeed at once; the retry loop (a schedule's state, about as costly as a short unit) is set up
      // only after a first run lost a race. The first re-run follows at once, the later ones after the backoff.
      return times <= 0
        ? once
        : Effect.catchIf(once, isRetryable, () => Effect.retry(once, { schedule: backoff, times: times - 1, while: isRetryable }))
    }
  })
}
