/**
 * The statements a storage compiles once and every unit shares: lookups by id (each with its locking twin),
 * inserts and updates by the columns they write, and list pages and totals by filter shape (StatementTemplate).
 * List filters are bound as named values so a query compiles once per shape, and mean exactly what the memory
 * store's filters mean (`Storage.accountMatches` and friends).
 */
import type { Account, Ids, Transaction, WhitelistedAddress } from "@custody-relay/core"
import { type Compilable, type ExpressionBuilder, type Expression, type Kysely, type SelectQueryBuilder, sql, type SqlBool } from "kysely"
import * as AccountRow from "./rows/AccountRow.js"
import * as TransactionRow from "./rows/TransactionRow.js"
import type {
  AccountsTable,
  ApiUsersTable,
  Database,
  DomainEventsTable,
  IdempotencyKeysTable,
  LedgerEntriesTable,
  OutboxEntriesTable,
  TransactionsTable,
  WebhookDeliveriesTable,
  WebhookSubscriptionsTable,
  WhitelistedAddressesTable
} from "./schema/Database.js"
import type { SortKey } from "./PageBoundaries.js"
import type { SqlEngine } from "./SqlEngine.js"
import { type Changes, LIST_TOTAL } from "./SqlUnit.js"
import { byColumns, byKey, byRows } from "./StatementTemplate.js"

/** `needle` occurs in `column`: the folded search, as `String.includes` on the folded texts. */
const contains = (
  engine: SqlEngine,
  column: "name_folded" | "asset_id_folded" | "address_folded",
  needle: string
): Expression<SqlBool> =>
  // A needle holding U+0000 never gets here (SqlUnit.matchesNothing).
  sql<SqlBool>`${sql.raw(engine.substringPosition)}(${sql.ref(column)}, ${needle}) > 0`

/**
 * A list query's filter as the values it binds, one name per value (a list of roles as `role0`, `role1`, ...), so
 * the query can be compiled once per shape (StatementTemplate.byColumns) and each call only binds its values.
 */
export interface AccountListValues {
  readonly client_id: Ids.ClientId
  readonly search?: string | undefined
  readonly asset_id?: string | undefined
  readonly workspace?: Account.Workspace | undefined
  readonly status?: Account.AccountStatus | undefined
  readonly [role: `role${number}`]: Account.AccountRole
}

export interface WhitelistListValues {
  readonly client_id: Ids.ClientId
  readonly [assetTypeOrStatus: `asset_type${number}` | `status${number}`]: string
}

export interface TransactionListValues {
  readonly client_id: Ids.ClientId
  readonly source_account_id?: string | undefined
  readonly asset_type?: string | undefined
  readonly status_group?: Transaction.StatusGroup | undefined
}

interface KeyValues {
  readonly key_created_at: string
  readonly key_id: string
}

interface PageValues {
  readonly limit: number
  readonly offset: number
}

/** Several keys read step by step (see `everyKey`): `count` of them, each `skip` rows on from the one before. */
interface StepValues {
  readonly skip: number
  readonly count: number
}

/**
 * Several keys read by number (see `everyKey`): of the first `rows` rows, the one numbered `first` + 1 and every
 * `every`th after it.
 */
interface NumberedValues {
  readonly first: number
  readonly every: number
  readonly rows: number
}

/** `values` named `prefix0`, `prefix1`, ... in order: a list the template binds one value at a time. */
const numbered = <A>(prefix: string, values: ReadonlyArray<A> | undefined): Record<string, A> =>
  Object.fromEntries((values ?? []).map((value, index) => [`${prefix}${index}`, value]))

const listed = <A>(values: object, prefix: string): Array<A> =>
  Object.entries(values).flatMap(([name, value]) => (name.startsWith(prefix) && /^\d+$/.test(name.slice(prefix.length)) ? [value as A] : []))

export const accountListValues = (clientId: Ids.ClientId, filter: Account.AccountFilter): AccountListValues => ({
  client_id: clientId,
  search: filter.search === undefined ? undefined : AccountRow.fold(filter.search),
  asset_id: filter.assetId,
  workspace: filter.workspace,
  status: filter.status,
  ...numbered("role", filter.roles)
})

export const whitelistListValues = (clientId: Ids.ClientId, filter: WhitelistedAddress.WhitelistFilter): WhitelistListValues => ({
  client_id: clientId,
  ...numbered("asset_type", filter.assetTypes),
  ...numbered("status", filter.statuses)
})

export const transactionListValues = (clientId: Ids.ClientId, filter: Transaction.TransactionFilter): TransactionListValues => ({
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

/** An idempotency key: its caller's scope and the key. */
interface IdempotencyKeyValues {
  readonly scope: string
  readonly key: string
}

/**
 * An idempotency key's statements as kysely builds them, per call; the store keeps each compiled once (the lookups
 * and writes below), and a test compares the two.
 */
export const idempotencyKeyStatements = (db: Kysely<Database>) => {
  const row = ({ key, scope }: IdempotencyKeyValues) =>
    db.selectFrom("idempotency_keys").selectAll().where("scope", "=", scope).where("key", "=", key)
  return {
    /** The key's row, committed or not. */
    row,
    /** The key's committed result that has not expired at `now`. */
    record: (values: IdempotencyKeyValues & { readonly now: string }) =>
      row(values).where("result", "is not", null).where(sql<SqlBool>`${sql.ref("expires_at")} > ${values.now}`),
    /** A claim of a key, inserted unless the key's row exists. */
    claim: (claimed: IdempotencyKeysTable) =>
      db.insertInto("idempotency_keys").values(claimed).onConflict((oc) => oc.columns(["scope", "key"]).doNothing()),
    /** Some of the key's columns, in place. */
    update: ({ key, scope, ...changes }: Partial<IdempotencyKeysTable> & IdempotencyKeyValues) =>
      db.updateTable("idempotency_keys").set(changes).where("scope", "=", scope).where("key", "=", key),
    /** The key's row with its result, new or in place of an expired one. */
    keep: (kept: IdempotencyKeysTable) =>
      db.insertInto("idempotency_keys").values(kept).onConflict((oc) =>
        oc.columns(["scope", "key"]).doUpdateSet((eb) => ({
          fingerprint: eb.ref("excluded.fingerprint"),
          result: eb.ref("excluded.result"),
          created_at: eb.ref("excluded.created_at"),
          expires_at: eb.ref("excluded.expires_at")
        }))
      )
  }
}

type IdempotencyKeyStatements = ReturnType<typeof idempotencyKeyStatements>

/** The store's lookups by id or key, each compiled once per store; the second of a pair locks its row (see SqlEngine). */
const lookupsOf = (db: Kysely<Database>, engine: SqlEngine, idempotencyKey: IdempotencyKeyStatements) => {
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
    ] as const,
    /** An idempotency key's row, committed or not; the second locks it (a claim on PostgreSQL). */
    idempotencyKey: [
      byColumns(idempotencyKey.row),
      byColumns((values: IdempotencyKeyValues) => idempotencyKey.row(values).forUpdate())
    ] as const,
    /** A key's committed result that has not expired at `now`: the look before a command's provider call. */
    idempotencyRecord: byColumns(idempotencyKey.record),
    // Every write unit that appends an event looks these up once (initiate among them). Behind `opaque`: with a
    // plain parameter SQLite planned this statement again on every run, 5 µs of a 0.5 µs read (SqlEngine).
    webhookSubscriptionsOfClient: byKey((clientId: Ids.ClientId) =>
      db.selectFrom("webhook_subscriptions").selectAll().where("client_id", "=", engine.opaque.text(clientId)).orderBy("id")
    )
  }
}


/**
 * A transaction's counter row (see migration 4) and the step it moves by: `count` for a new row, `increment` for
 * an existing one. They are the same value, given twice because a template binds each value once.
 */
interface CountStep extends Pick<TransactionsTable, "client_id" | "source_account_id" | "asset_type" | "status_group"> {
  readonly count: 1 | -1
  readonly increment: 1 | -1
}

/** The store's inserts and updates by id, each compiled once per set of columns it writes (see StatementTemplate). */
const writesOf = (db: Kysely<Database>, engine: SqlEngine, idempotencyKey: IdempotencyKeyStatements) => ({
  insertTransaction: byColumns((row: TransactionsTable) => db.insertInto("transactions").values(row)),
  insertLedgerEntry: byColumns((row: LedgerEntriesTable) => db.insertInto("ledger_entries").values(row)),
  /** Several events in one insert (see EventLog.flushEvents). */
  insertEvents: byRows((rows: ReadonlyArray<Omit<DomainEventsTable, "position">>) =>
    engine.logSettling === undefined ? db.insertInto("domain_events").values(rows) : engine.logSettling.insertEvents(db, rows)
  ),
  insertOutboxEntry: byColumns((row: OutboxEntriesTable) => db.insertInto("outbox_entries").values(row)),
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
  /** A claim of a key (PostgreSQL: see stores/IdempotencyKeys.ts). */
  claimIdempotencyKey: byColumns(idempotencyKey.claim),
  /** An expired key claimed anew, or a claimed key's result, in place. */
  updateIdempotencyKey: byColumns(idempotencyKey.update),
  /** A key's row with its result, written once (SQLite: see stores/IdempotencyKeys.ts). */
  keepIdempotencyKey: byColumns(idempotencyKey.keep),
  updateApiUser: byColumns(({ id, ...changes }: Changes<ApiUsersTable>) => db.updateTable("api_users").set(changes).where("id", "=", id)),
  updateAccount: byColumns(({ id, ...changes }: Changes<AccountsTable>) => db.updateTable("accounts").set(changes).where("id", "=", id)),
  updateWhitelistedAddress: byColumns(({ id, ...changes }: Changes<WhitelistedAddressesTable>) =>
    db.updateTable("whitelisted_addresses").set(changes).where("id", "=", id)
  ),
  updateTransaction: byColumns(({ id, ...changes }: Changes<TransactionsTable>) =>
    db.updateTable("transactions").set(changes).where("id", "=", id)
  ),
  updateOutboxEntry: byColumns(({ id, ...changes }: Changes<OutboxEntriesTable>) =>
    db.updateTable("outbox_entries").set(changes).where("id", "=", id)
  ),
  insertWebhookSubscription: byColumns((row: WebhookSubscriptionsTable) => db.insertInto("webhook_subscriptions").values(row)),
  updateWebhookSubscription: byColumns(({ id, ...changes }: Changes<WebhookSubscriptionsTable>) =>
    db.updateTable("webhook_subscriptions").set(changes).where("id", "=", id)
  ),
  /** One for each subscription an event matches, in the command's own unit (see Webhook.fanOut). */
  insertWebhookDelivery: byColumns((row: WebhookDeliveriesTable) => db.insertInto("webhook_deliveries").values(row)),
  updateWebhookDelivery: byColumns(({ id, ...changes }: Changes<WebhookDeliveriesTable>) =>
    db.updateTable("webhook_deliveries").set(changes).where("id", "=", id)
  )
})

/**
 * The store's pages and their totals, each compiled once per filter shape (which filters are set, how many values
 * a list filter holds): building and compiling a list query through kysely cost more than SQLite running it. A value
 * a statement names more than once (a free-text search's needle, a first page's filter) is bound at each place
 * (StatementTemplate's rule).
 */
const listsOf = (db: Kysely<Database>, engine: SqlEngine) => {
  const { integer, text } = engine.opaque
  /** A list's order: by its sort key, `created_at` then `id`, newest first when "desc". */
  const inListOrder = <T extends keyof Database, R>(query: SelectQueryBuilder<Database, T, R>, direction: "asc" | "desc") =>
    query.orderBy(sql.ref("created_at"), direction).orderBy(sql.ref("id"), direction)
  const pages = <V extends object, T extends "accounts" | "whitelisted_addresses" | "transactions", R>(
    from: (values: V) => SelectQueryBuilder<Database, T, R>
  ) => {
    const page = (direction: "asc" | "desc") =>
      byColumns((values: V & PageValues) =>
        inListOrder(from(values), direction).limit(integer(values.limit)).offset(integer(values.offset))
      )
    const newest = page("desc")
    const oldest = page("asc")
    return (values: V & PageValues, fromOldest: boolean): Compilable<R> => (fromOldest ? oldest : newest)(values)
  }
  /**
   * A list's first page, newest first, with the list's total on every row (`list_total`): one statement, so the page
   * and its total are read at one moment in any unit of work, a lookup's too (Storage.unitForPage).
   */
  const firstPage = <V extends object, T extends "accounts" | "whitelisted_addresses" | "transactions", R>(
    from: (values: V) => SelectQueryBuilder<Database, T, R>,
    total: (values: V) => SelectQueryBuilder<Database, keyof Database, { readonly total: number | string }>
  ) =>
    byColumns((values: V & { readonly limit: number }) =>
      inListOrder(from(values).select(total(values).as(LIST_TOTAL)), "desc").limit(integer(values.limit))
    )
  /** Whether a row is beyond a sort key in a list read in `direction`: after it oldest first, at or before it newest first. */
  const beyond = (direction: "asc" | "desc") => sql.raw(direction === "asc" ? ">" : "<=")
  /** A list's rows beyond the key `values` name, if they name one (see `beyond`). */
  const fromKey = <V extends object, T extends "transactions", R>(
    from: (values: V) => SelectQueryBuilder<Database, T, R>,
    values: V & Partial<KeyValues>,
    direction: "asc" | "desc"
  ) => {
    const { key_created_at: createdAt, key_id: id } = values
    return createdAt === undefined || id === undefined
      ? from(values)
      : from(values).where(sql<SqlBool>`(${sql.ref("created_at")}, ${sql.ref("id")}) ${beyond(direction)} (${text(createdAt)}, ${text(id)})`)
  }
  /**
   * A list's rows around a sort key (PageBoundaries.ListReads): oldest first from just after the key, newest first
   * from the key itself; from the list's end when no key is given.
   */
  const around = <V extends object, T extends "transactions", R>(from: (values: V) => SelectQueryBuilder<Database, T, R>) => {
    const read = (direction: "asc" | "desc") =>
      byColumns((values: V & PageValues & Partial<KeyValues>) =>
        inListOrder(fromKey(from, values, direction), direction).limit(integer(values.limit)).offset(integer(values.offset))
      )
    const after = read("asc")
    const upTo = read("desc")
    return {
      after: (values: V, key: SortKey | undefined, limit: number, offset: number): Compilable<R> => after({ ...values, ...keyed(key), limit, offset }),
      upTo: (values: V, key: SortKey | undefined, limit: number, offset: number): Compilable<R> => upTo({ ...values, ...keyed(key), limit, offset })
    }
  }
  const keyed = (key: SortKey | undefined) => key === undefined ? {} : { key_created_at: key.created_at, key_id: key.id }
  /**
   * A list's sort keys a step apart from a key (PageBoundaries.ListReads' key reads): up to `count` keys, every
   * `every`th row oldest first from just after the key, or newest first from the key itself (its own row is the
   * 0th); from the list's end when no key is given. One key is the row at its offset. Several are read in one
   * statement, so that a walk leaves several boundaries a round trip, each walking the list's index as far as one
   * key would. Where the engine joins laterally (PostgreSQL) each key is read from the one before it, a step on;
   * elsewhere (SQLite) the rows up to the last key are numbered along the index and every `every`th kept, which on
   * PostgreSQL cost about three times as much a row (docs/benchmarks.md).
   */
  const everyKey = (from: (values: TransactionListValues) => SelectQueryBuilder<Database, "transactions", SortKey>) => {
    const one = around(from)
    const stepByStep = (direction: "asc" | "desc") =>
      byColumns((values: TransactionListValues & Partial<KeyValues> & StepValues) => {
        const step = <R>(query: SelectQueryBuilder<Database, "transactions", R>) =>
          inListOrder(query, direction).limit(sql.lit(1)).offset(integer(values.skip))
        const next = from(values).where(
          sql<SqlBool>`(${sql.ref("created_at")}, ${sql.ref("id")}) ${beyond(direction)} (${sql.ref("walk.created_at")}, ${sql.ref("walk.id")})`
        )
        return db.withRecursive("walk(n, created_at, id)", (start) =>
          start.selectFrom(step(fromKey(from, values, direction)).as("first")).select([sql<number>`1`.as("n"), "first.created_at", "first.id"])
            .unionAll((more) =>
              more.selectFrom("walk").innerJoinLateral(step(next).as("next"), (join) => join.onTrue())
                .select([sql<number>`${sql.ref("walk.n")} + 1`.as("n"), "next.created_at", "next.id"])
                .where(sql.ref("walk.n"), "<", integer(values.count))
            )
        ).selectFrom("walk").select(["walk.created_at", "walk.id"]).orderBy("walk.n")
      })
    const byNumber = (direction: "asc" | "desc") =>
      byColumns((values: TransactionListValues & Partial<KeyValues> & NumberedValues) => {
        const order = sql.raw(direction)
        const walked = inListOrder(
          fromKey(from, values, direction).select(sql<number>`row_number() over (order by ${sql.ref("created_at")} ${order}, ${sql.ref("id")} ${order})`.as("n")),
          direction
        ).limit(integer(values.rows))
        // Rows are numbered from 1, so the key at offset `first` is number first + 1.
        const kept = sql<SqlBool>`${sql.ref("n")} > ${integer(values.first)} and (${sql.ref("n")} - 1 - ${integer(values.first)}) % ${integer(values.every)} = 0`
        return db.selectFrom(walked.as("walked")).select(["created_at", "id"]).where(kept).orderBy(sql.ref("n"))
      })
    const keysFrom = (direction: "asc" | "desc") => {
      // The first key's offset from the read's key: oldest first the read starts just after it, so every - 1; newest
      // first at the key's own row (the 0th), so every. Each later key is `every` rows on.
      const firstOf = (every: number) => direction === "asc" ? every - 1 : every
      const oneKey = direction === "asc" ? one.after : one.upTo
      const steps = stepByStep(direction)
      const numbers = byNumber(direction)
      return (values: TransactionListValues, key: SortKey | undefined, every: number, count: number): Compilable<SortKey> => {
        const first = firstOf(every)
        if (count === 1) return oneKey(values, key, 1, first)
        return engine.joinsLaterally
          ? steps({ ...values, ...keyed(key), skip: first, count })
          : numbers({ ...values, ...keyed(key), first, every, rows: first + every * (count - 1) + 1 })
      }
    }
    return { after: keysFrom("asc"), upTo: keysFrom("desc") }
  }
  const accounts = (values: AccountListValues) => db.selectFrom("accounts").selectAll().where(accountWhere(engine, values))
  const accountsTotal = (values: AccountListValues) =>
    db.selectFrom("accounts").select((eb) => eb.fn.countAll<number | string>().as("total")).where(accountWhere(engine, values))
  const whitelist = (values: WhitelistListValues) =>
    db.selectFrom("whitelisted_addresses").selectAll().where(whitelistWhere(engine, values))
  const whitelistTotal = (values: WhitelistListValues) =>
    db.selectFrom("whitelisted_addresses").select((eb) => eb.fn.countAll<number | string>().as("total"))
      .where(whitelistWhere(engine, values))
  const transactions = (values: TransactionListValues) =>
    db.selectFrom("transactions").select(TransactionRow.summaryColumns).where(transactionWhere(engine, values))
  // The total is a sum of the few counter rows the filter selects, not a count of the rows themselves. Its values
  // are opaque to SQLite's planner as the page's are: in a first page it runs in the same kept statement.
  const transactionsTotal = (values: TransactionListValues) =>
    db.selectFrom("transaction_counts")
      .select((eb) => eb.fn.coalesce(eb.fn.sum<number | string>("count"), sql.lit(0)).as("total"))
      .where("client_id", "=", text(values.client_id))
      .$if(values.source_account_id !== undefined, (qb) =>
        qb.where(sql<SqlBool>`${sql.ref("source_account_id")} = ${text(values.source_account_id ?? "")}`))
      .$if(values.asset_type !== undefined, (qb) => qb.where("asset_type", "=", text(values.asset_type ?? "")))
      .$if(values.status_group !== undefined, (qb) => qb.where("status_group", "=", text(values.status_group ?? "pending")))
  return {
    accountsFirst: firstPage(accounts, accountsTotal),
    accountsPage: pages(accounts),
    accountsTotal: byColumns(accountsTotal),
    whitelistFirst: firstPage(whitelist, whitelistTotal),
    whitelistPage: pages(whitelist),
    whitelistTotal: byColumns(whitelistTotal),
    transactionsFirst: firstPage(transactions, transactionsTotal),
    transactionsPage: pages(transactions),
    transactionsAround: around(transactions),
    transactionKeysEvery: everyKey((values) => db.selectFrom("transactions").select(["created_at", "id"]).where(transactionWhere(engine, values))),
    transactionsTotal: byColumns(transactionsTotal)
  }
}

/** The statements a store compiles once and every unit shares. */
export interface StoreStatements {
  readonly lookups: ReturnType<typeof lookupsOf>
  readonly writes: ReturnType<typeof writesOf>
  readonly lists: ReturnType<typeof listsOf>
}

export const storeStatementsOf = (db: Kysely<Database>, engine: SqlEngine): StoreStatements => {
  const idempotencyKey = idempotencyKeyStatements(db)
  return {
    lookups: lookupsOf(db, engine, idempotencyKey),
    writes: writesOf(db, engine, idempotencyKey),
    lists: listsOf(db, engine)
  }
}

