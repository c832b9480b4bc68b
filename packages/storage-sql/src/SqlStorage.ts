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
import { type ExpressionBuilder, type Expression, type Kysely, sql, type SqlBool } from "kysely"
import * as AccountRow from "./rows/AccountRow.js"
import * as ApiUserRow from "./rows/ApiUserRow.js"
import * as ClientRow from "./rows/ClientRow.js"
import * as IdempotencyRecordRow from "./rows/IdempotencyRecordRow.js"
import * as LedgerEntryRow from "./rows/LedgerEntryRow.js"
import * as TransactionRow from "./rows/TransactionRow.js"
import * as WhitelistedAddressRow from "./rows/WhitelistedAddressRow.js"
import type { Database, TransactionsTable } from "./schema/Database.js"
import type { SqlEngine } from "./SqlEngine.js"

export interface SqlStorageOptions {
  /** How many times a unit that lost a race is run again before its error is let through; default 8. */
  readonly maxRetries?: number
}

export const DEFAULT_MAX_RETRIES = 8

type Op<A> = Effect.Effect<A, Storage.StorageError>

/**
 * Backoff between re-runs: 2 ms doubling, capped at 100 ms, jittered so units that collided once do not collide
 * again in step.
 */
export const backoff = Schedule.min([Schedule.exponential("2 millis"), Schedule.spaced("100 millis")]).pipe(Schedule.jittered)

export const isRetryable = (error: unknown): boolean => error instanceof Storage.StorageError && error.isRetryable

/** An update that matched no row: the core updates only records it read in the same unit, so this is a bug. */
const expectOneRow = (table: string, key: string) => (result: { readonly numUpdatedRows: bigint }): void => {
  if (result.numUpdatedRows !== 1n) throw new Error(`update of ${table} ${key} matched ${result.numUpdatedRows} rows`)
}

const countOf = (row: { readonly total: number | string | bigint }): number => Number(row.total)

/** `row` decoded, or none when the query found no row. */
const optional = <Row, A>(decode: (row: Row) => A) => (row: Row | undefined): Option.Option<A> =>
  row === undefined ? Option.none() : Option.some(decode(row))

/** The page of `request` and the total; a short page ends the list, so only a full page pays for the count. */
const pageOf = async <Row, A>(
  rows: (limit: number, offset: number) => Promise<ReadonlyArray<Row>>,
  count: () => Promise<number>,
  decode: (row: Row) => A,
  request: Page.PageRequest
): Promise<Page.Page<A>> => {
  const offset = Page.offset(request)
  const found = await rows(request.limit, offset)
  const endsHere = found.length < request.limit && (found.length > 0 || offset === 0)
  return { items: found.map(decode), total: endsHere ? offset + found.length : await count() }
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

const accountWhere = (engine: SqlEngine, clientId: Ids.ClientId, filter: Account.AccountFilter) =>
(eb: ExpressionBuilder<Database, "accounts">): Expression<SqlBool> => {
  const terms: Array<Expression<SqlBool>> = [eb("client_id", "=", clientId)]
  if (filter.search !== undefined) {
    const needle = AccountRow.fold(filter.search)
    terms.push(
      eb.or([
        contains(engine, "name_folded", needle),
        contains(engine, "asset_id_folded", needle),
        contains(engine, "address_folded", needle)
      ])
    )
  }
  if (filter.assetId !== undefined) terms.push(eb("asset_id", "=", filter.assetId))
  if (filter.workspace !== undefined) terms.push(eb("workspace", "=", filter.workspace))
  if (filter.roles !== undefined && filter.roles.length > 0) terms.push(eb("role", "in", [...filter.roles]))
  if (filter.status !== undefined) terms.push(eb("status", "=", filter.status))
  return eb.and(terms)
}

const whitelistWhere = (clientId: Ids.ClientId, filter: WhitelistedAddress.WhitelistFilter) =>
(eb: ExpressionBuilder<Database, "whitelisted_addresses">): Expression<SqlBool> => {
  const terms: Array<Expression<SqlBool>> = [eb("client_id", "=", clientId)]
  if (filter.assetTypes !== undefined && filter.assetTypes.length > 0) terms.push(eb("asset_type", "in", [...filter.assetTypes]))
  if (filter.statuses !== undefined && filter.statuses.length > 0) terms.push(eb("status", "in", [...filter.statuses]))
  return eb.and(terms)
}

const transactionWhere = (clientId: Ids.ClientId, filter: Transaction.TransactionFilter) =>
(eb: ExpressionBuilder<Database, "transactions">): Expression<SqlBool> => {
  const terms: Array<Expression<SqlBool>> = [eb("client_id", "=", clientId)]
  // The filter's account id is any string the caller sent, not an AccountId: compare it as text.
  if (filter.accountId !== undefined) terms.push(sql<SqlBool>`${sql.ref("source_account_id")} = ${filter.accountId}`)
  if (filter.assetType !== undefined) terms.push(eb("asset_type", "=", filter.assetType))
  if (filter.group !== undefined) terms.push(eb("status_group", "=", filter.group))
  return eb.and(terms)
}

/** A query whose driver errors become `StorageError`s. */
const queryIn = (engine: SqlEngine) => <A>(run: () => Promise<A>): Op<A> => Effect.tryPromise({ try: run, catch: engine.classify })

/** A write: refused before it reaches the database in a read unit, as the memory store refuses it. */
const writeIn = (mode: Storage.UnitMode, query: <A>(run: () => Promise<A>) => Op<A>) => <A>(run: () => Promise<A>): Op<A> =>
  mode === "write" ? query(run) : Effect.die(new Error("a read unit of work attempted a write"))

/** Moves one transaction into (+1) or out of (-1) its counter row (see migration 4). */
const countTransactionsIn = (db: Kysely<Database>) =>
async (
  key: Pick<TransactionsTable, "client_id" | "source_account_id" | "asset_type" | "status_group">,
  delta: 1 | -1
): Promise<void> => {
  await db.insertInto("transaction_counts")
    .values({
      client_id: key.client_id,
      source_account_id: key.source_account_id,
      asset_type: key.asset_type,
      status_group: key.status_group,
      count: delta
    })
    .onConflict((oc) =>
      oc.columns(["client_id", "source_account_id", "asset_type", "status_group"])
        .doUpdateSet((eb) => ({ count: eb("transaction_counts.count", "+", delta) }))
    )
    .execute()
}

/**
 * The unit's reads and writes over one open transaction (or any kysely handle) in one mode. A unit is made for
 * every unit of work, so it is written as method shorthand and its helpers come from module-level factories: under
 * tsx (how `pnpm start` runs the server) esbuild's keepNames wraps every arrow function assigned to a name or a
 * property in a `__name` call (an `Object.defineProperty`), about 40 of them per unit, 6% of a GET's CPU profile;
 * methods and returned arrows are left alone.
 */
export const makeUnit = (db: Kysely<Database>, mode: Storage.UnitMode, engine: SqlEngine): Storage.StorageUnit => {
  const query = queryIn(engine)
  const write = writeIn(mode, query)
  // Reads by id in a write unit lock the row they return when the engine locks rows (see SqlEngine).
  const lock = mode === "write" && engine.locksRowsForWrite
  const countTransactions = countTransactionsIn(db)

  return {
    insertClient(client) {
      return write(() => db.insertInto("clients").values(ClientRow.encode(client)).execute()).pipe(Effect.asVoid)
    },
    getClient(id) {
      return query(() => db.selectFrom("clients").selectAll().where("id", "=", id).executeTakeFirst()).pipe(
        Effect.map(optional(ClientRow.decode))
      )
    },

    insertApiUser(user) {
      return write(() => db.insertInto("api_users").values(ApiUserRow.encode(user)).execute()).pipe(Effect.asVoid)
    },
    getApiUser(id) {
      return query(() =>
        db.selectFrom("api_users").selectAll().where("id", "=", id).$if(lock, (qb) => qb.forNoKeyUpdate()).executeTakeFirst()
      ).pipe(Effect.map(optional(ApiUserRow.decode)))
    },
    findApiUserByKeyId(keyId) {
      return query(() => db.selectFrom("api_users").selectAll().where("key_id", "=", keyId).executeTakeFirst()).pipe(
        Effect.map(optional(ApiUserRow.decode))
      )
    },
    updateApiUser(user) {
      return write(async () => {
        const { id, created_at: _, ...changes } = ApiUserRow.encode(user)
        expectOneRow("api_users", id)(await db.updateTable("api_users").set(changes).where("id", "=", id).executeTakeFirstOrThrow())
      })
    },

    insertAccount(account) {
      return write(() => db.insertInto("accounts").values(AccountRow.encode(account)).execute()).pipe(Effect.asVoid)
    },
    getAccount(id) {
      return query(() =>
        db.selectFrom("accounts").selectAll().where("id", "=", id).$if(lock, (qb) => qb.forNoKeyUpdate()).executeTakeFirst()
      ).pipe(Effect.map(optional(AccountRow.decode)))
    },
    findAccountByIdentity(clientId, identity) {
      return query(() =>
        db.selectFrom("accounts").selectAll()
          .where("client_id", "=", clientId)
          .where("name", "=", identity.name)
          .where("workspace", "=", identity.workspace)
          .where("asset_id", "=", identity.assetId)
          .where("role", "=", identity.role)
          // A literal, not a parameter: SQLite uses the partial unique index only when it can see the predicate.
          .where("status", "<>", sql.lit("rejected"))
          .executeTakeFirst()
      ).pipe(Effect.map(optional(AccountRow.decode)))
    },
    updateAccount(account) {
      return write(async () => {
        const { id, client_id: _, created_at: __, ...changes } = AccountRow.encode(account)
        expectOneRow("accounts", id)(await db.updateTable("accounts").set(changes).where("id", "=", id).executeTakeFirstOrThrow())
      })
    },
    listAccounts(clientId, filter, request) {
      const where = accountWhere(engine, clientId, filter)
      return query(() =>
        pageOf(
          (limit, offset) =>
            db.selectFrom("accounts").selectAll().where(where)
              .orderBy("created_at", "desc").orderBy("id", "desc").limit(limit).offset(offset).execute(),
          () =>
            db.selectFrom("accounts").select((eb) => eb.fn.countAll<number | string>().as("total")).where(where)
              .executeTakeFirstOrThrow().then(countOf),
          AccountRow.decode,
          request
        )
      )
    },

    insertWhitelistedAddress(entry) {
      return write(() => db.insertInto("whitelisted_addresses").values(WhitelistedAddressRow.encode(entry)).execute()).pipe(Effect.asVoid)
    },
    getWhitelistedAddress(id) {
      return query(() =>
        db.selectFrom("whitelisted_addresses").selectAll().where("id", "=", id).$if(lock, (qb) => qb.forNoKeyUpdate())
          .executeTakeFirst()
      ).pipe(Effect.map(optional(WhitelistedAddressRow.decode)))
    },
    findWhitelistedAddress(clientId, assetType, address) {
      return query(() =>
        db.selectFrom("whitelisted_addresses").selectAll()
          .where("client_id", "=", clientId)
          .where("asset_type", "=", assetType)
          .where("address", "=", address)
          .where("status", "<>", sql.lit("ARCHIVED"))
          .executeTakeFirst()
      ).pipe(Effect.map(optional(WhitelistedAddressRow.decode)))
    },
    updateWhitelistedAddress(entry) {
      return write(async () => {
        const { id, client_id: _, created_at: __, ...changes } = WhitelistedAddressRow.encode(entry)
        expectOneRow("whitelisted_addresses", id)(
          await db.updateTable("whitelisted_addresses").set(changes).where("id", "=", id).executeTakeFirstOrThrow()
        )
      })
    },
    listWhitelistedAddresses(clientId, filter, request) {
      const where = whitelistWhere(clientId, filter)
      return query(() =>
        pageOf(
          (limit, offset) =>
            db.selectFrom("whitelisted_addresses").selectAll().where(where)
              .orderBy("created_at", "desc").orderBy("id", "desc").limit(limit).offset(offset).execute(),
          () =>
            db.selectFrom("whitelisted_addresses").select((eb) => eb.fn.countAll<number | string>().as("total")).where(where)
              .executeTakeFirstOrThrow().then(countOf),
          WhitelistedAddressRow.decode,
          request
        )
      )
    },

    insertTransaction(tx) {
      return write(async () => {
        const row = TransactionRow.encode(tx)
        await db.insertInto("transactions").values(row).execute()
        await countTransactions(row, 1)
      })
    },
    getTransaction(id) {
      return query(() =>
        db.selectFrom("transactions").selectAll().where("id", "=", id).$if(lock, (qb) => qb.forNoKeyUpdate()).executeTakeFirst()
      ).pipe(Effect.map(optional(TransactionRow.decode)))
    },
    updateTransaction(tx) {
      return write(async () => {
        // Client, source, asset and creation never change; the counters are keyed by the first three.
        const { id, client_id: _, source_account_id: __, asset_type: ___, created_at: ____, ...changes } = TransactionRow.encode(tx)
        // Locked even if the unit did not read the row first, so the group it leaves is the one it really leaves.
        const before = await db.selectFrom("transactions").select(["client_id", "source_account_id", "asset_type", "status_group"])
          .where("id", "=", id).$if(engine.locksRowsForWrite, (qb) => qb.forNoKeyUpdate()).executeTakeFirst()
        expectOneRow("transactions", id)(await db.updateTable("transactions").set(changes).where("id", "=", id).executeTakeFirstOrThrow())
        if (before !== undefined && before.status_group !== changes.status_group) {
          await countTransactions(before, -1)
          await countTransactions({ ...before, status_group: changes.status_group }, 1)
        }
      })
    },
    listTransactions(clientId, filter, request) {
      const where = transactionWhere(clientId, filter)
      return query(() =>
        pageOf(
          (limit, offset) =>
            db.selectFrom("transactions").selectAll().where(where)
              .orderBy("created_at", "desc").orderBy("id", "desc").limit(limit).offset(offset).execute(),
          // The total is a sum of the few counter rows the filter selects, not a count of the rows themselves.
          () => {
            const { accountId, assetType, group } = filter
            return db.selectFrom("transaction_counts")
              .select((eb) => eb.fn.coalesce(eb.fn.sum<number | string>("count"), sql.lit(0)).as("total"))
              .where("client_id", "=", clientId)
              .$if(accountId !== undefined, (qb) => qb.where(sql<SqlBool>`${sql.ref("source_account_id")} = ${accountId}`))
              .$if(assetType !== undefined, (qb) => qb.where("asset_type", "=", assetType ?? ""))
              .$if(group !== undefined, (qb) => qb.where("status_group", "=", group ?? "pending"))
              .executeTakeFirstOrThrow().then(countOf)
          },
          TransactionRow.decode,
          request
        )
      )
    },
    listOpenTransactionsFrom(accountId) {
      return query(() =>
        db.selectFrom("transactions").selectAll()
          .where("source_account_id", "=", accountId)
          // The literal lets SQLite use the partial index of open transactions.
          .where("status_group", "=", sql.lit("pending"))
          .orderBy("created_at").orderBy("id")
          .execute()
      ).pipe(Effect.map((rows) => rows.map(TransactionRow.decode)))
    },

    insertLedgerEntry(entry) {
      return write(() => db.insertInto("ledger_entries").values(LedgerEntryRow.encode(entry)).execute()).pipe(Effect.asVoid)
    },
    listLedgerEntries(accountId) {
      return query(() =>
        db.selectFrom("ledger_entries").selectAll().where("account_id", "=", accountId).orderBy("created_at").orderBy("id").execute()
      ).pipe(Effect.map((rows) => rows.map(LedgerEntryRow.decode)))
    },

    getIdempotencyRecord(scope, key) {
      return query(() =>
        db.selectFrom("idempotency_records").selectAll().where("scope", "=", scope).where("key", "=", key)
          .$if(lock, (qb) => qb.forNoKeyUpdate()).executeTakeFirst()
      ).pipe(Effect.map(optional(IdempotencyRecordRow.decode)))
    },
    claimIdempotencyRecord(record) {
      return write(() =>
        db.insertInto("idempotency_records").values(IdempotencyRecordRow.encode(record))
          .onConflict((oc) => oc.columns(["scope", "key"]).doNothing())
          .executeTakeFirstOrThrow()
      ).pipe(Effect.map((result) => result.numInsertedOrUpdatedRows === 1n))
    },
    updateIdempotencyRecord(record) {
      return write(async () => {
        const { scope, key, created_at: _, ...changes } = IdempotencyRecordRow.encode(record)
        expectOneRow("idempotency_records", `${scope}/${key}`)(
          await db.updateTable("idempotency_records").set(changes).where("scope", "=", scope).where("key", "=", key)
            .executeTakeFirstOrThrow()
        )
      })
    },
    deleteIdempotencyRecord(scope, key) {
      return write(() => db.deleteFrom("idempotency_records").where("scope", "=", scope).where("key", "=", key).execute()).pipe(
        Effect.asVoid
      )
    },
    deleteExpiredIdempotencyRecords(now) {
      // `now` is any instant the caller names, not a stored Timestamp: compare it as text.
      return write(() =>
        db.deleteFrom("idempotency_records").where(sql<SqlBool>`${sql.ref("expires_at")} < ${now}`).executeTakeFirstOrThrow()
      ).pipe(
        Effect.map((result) => Number(result.numDeletedRows))
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
  const attempt = <A, E, R>(mode: Storage.UnitMode, work: (unit: Storage.StorageUnit) => Effect.Effect<A, E, R>) =>
    Effect.acquireUseRelease(
      // Method shorthand, not arrow properties: see makeUnit on tsx's keepNames.
      Effect.tryPromise({
        try() {
          return engine.begin(db, mode)
        },
        catch: engine.classify
      }),
      (trx) =>
        Effect.flatMap(work(makeUnit(trx, mode, engine)), (value) =>
          Effect.as(
            Effect.tryPromise({
              try() {
                return trx.commit().execute()
              },
              catch: engine.classify
            }),
            value
          )),
      (trx) =>
        trx.isCommitted || trx.isRolledBack
          ? Effect.void
          // A rollback that fails changes nothing for the caller: the unit's outcome is already decided, and kysely
          // releases (pg: discards) the connection either way, so the server ends the transaction with it.
          : Effect.promise(() => trx.rollback().execute().catch(() => undefined))
    )
  return Storage.Storage.of({
    transaction: (mode, work) => Effect.retry(attempt(mode, work), { schedule: backoff, times, while: isRetryable })
  })
}
