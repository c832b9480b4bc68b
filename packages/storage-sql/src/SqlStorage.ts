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
import { type Compilable, type CompiledQuery, type ExpressionBuilder, type Expression, type Kysely, sql, type SqlBool } from "kysely"
import * as AccountRow from "./rows/AccountRow.js"
import * as ApiUserRow from "./rows/ApiUserRow.js"
import * as ClientRow from "./rows/ClientRow.js"
import * as IdempotencyRecordRow from "./rows/IdempotencyRecordRow.js"
import * as LedgerEntryRow from "./rows/LedgerEntryRow.js"
import * as TransactionRow from "./rows/TransactionRow.js"
import * as WhitelistedAddressRow from "./rows/WhitelistedAddressRow.js"
import type { Database, TransactionsTable } from "./schema/Database.js"
import type { SqlEngine } from "./SqlEngine.js"
import type { SqlSession } from "./SqlSession.js"
import * as StorageFailure from "./StorageFailure.js"

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
const expectOneRow = (table: string, key: string) => (updated: number): Op<void> =>
  updated === 1 ? Effect.void : Effect.fail(StorageFailure.fault(new Error(`update of ${table} ${key} matched ${updated} rows`)))

const countOf = (row: { readonly total: number | string | bigint } | undefined): number => Number(row?.total ?? 0)

/** `row` decoded, or none when the query found no row. */
const optional = <Row, A>(decode: (row: Row) => A) => (row: Row | undefined): Option.Option<A> =>
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

/**
 * How a unit's statements reach its session: each is built with kysely, compiled, and executed by the session.
 * `affected` counts the rows a write changed; a write is refused before it reaches the database in a read unit,
 * as the memory store refuses it.
 */
interface Statements {
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

/**
 * A lookup by one key whose shape never changes, compiled by kysely once and then run with each call's key:
 * compiling costs more than running such a lookup on SQLite. Should kysely ever compile the template to anything
 * but one parameter, it is compiled per call instead.
 */
const compiledOnce = <K extends string, R>(build: (key: K) => Compilable<R>) => {
  const placeholder = "\u0000key" as K
  let template: CompiledQuery<R> | null | undefined
  return (key: K): Compilable<R> => ({
    compile() {
      if (template === undefined) {
        const compiled = build(placeholder).compile()
        template = compiled.parameters.length === 1 && compiled.parameters[0] === placeholder ? compiled : null
      }
      return template === null ? build(key).compile() : { ...template, parameters: [key] }
    }
  })
}

/** The store's lookups by id or key, each compiled once per store; the second of a pair locks its row (see SqlEngine). */
const lookupsOf = (db: Kysely<Database>) => {
  return {
    client: compiledOnce((id: Ids.ClientId) => db.selectFrom("clients").selectAll().where("id", "=", id)),
    apiUserByKeyId: compiledOnce((keyId: string) => db.selectFrom("api_users").selectAll().where("key_id", "=", keyId)),
    apiUser: [
      compiledOnce((id: Ids.ApiUserId) => db.selectFrom("api_users").selectAll().where("id", "=", id)),
      compiledOnce((id: Ids.ApiUserId) => db.selectFrom("api_users").selectAll().where("id", "=", id).forNoKeyUpdate())
    ] as const,
    account: [
      compiledOnce((id: Ids.AccountId) => db.selectFrom("accounts").selectAll().where("id", "=", id)),
      compiledOnce((id: Ids.AccountId) => db.selectFrom("accounts").selectAll().where("id", "=", id).forNoKeyUpdate())
    ] as const,
    whitelistedAddress: [
      compiledOnce((id: Ids.WhitelistedAddressId) => db.selectFrom("whitelisted_addresses").selectAll().where("id", "=", id)),
      compiledOnce((id: Ids.WhitelistedAddressId) => db.selectFrom("whitelisted_addresses").selectAll().where("id", "=", id).forNoKeyUpdate())
    ] as const,
    transaction: [
      compiledOnce((id: Ids.TransactionId) => db.selectFrom("transactions").selectAll().where("id", "=", id)),
      compiledOnce((id: Ids.TransactionId) => db.selectFrom("transactions").selectAll().where("id", "=", id).forNoKeyUpdate())
    ] as const
  }
}

type Lookups = ReturnType<typeof lookupsOf>

/** Moves one transaction into (+1) or out of (-1) its counter row (see migration 4). */
const countTransactionsIn = (db: Kysely<Database>, statements: Statements) =>
(
  key: Pick<TransactionsTable, "client_id" | "source_account_id" | "asset_type" | "status_group">,
  delta: 1 | -1
): Op<number> =>
  statements.write(
    db.insertInto("transaction_counts")
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
  )

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
  lookups: Lookups
): Storage.StorageUnit => {
  // `db` only builds statements; every statement runs through the unit's session.
  const { rows, first, write } = statementsOf(session, mode)
  // Reads by id in a write unit lock the row they return when the engine locks rows (see SqlEngine).
  const lock = mode === "write" && engine.locksRowsForWrite
  const locking = lock ? 1 : 0
  const countTransactions = countTransactionsIn(db, { rows, first, write })

  return {
    insertClient(client) {
      return Effect.asVoid(write(db.insertInto("clients").values(ClientRow.encode(client))))
    },
    getClient(id) {
      return Effect.map(first(lookups.client(id)), optional(ClientRow.decode))
    },

    insertApiUser(user) {
      return Effect.asVoid(write(db.insertInto("api_users").values(ApiUserRow.encode(user))))
    },
    getApiUser(id) {
      return Effect.map(
        first(lookups.apiUser[locking](id)),
        optional(ApiUserRow.decode)
      )
    },
    findApiUserByKeyId(keyId) {
      return Effect.map(first(lookups.apiUserByKeyId(keyId)), optional(ApiUserRow.decode))
    },
    updateApiUser(user) {
      const { id, created_at: _, ...changes } = ApiUserRow.encode(user)
      return Effect.flatMap(write(db.updateTable("api_users").set(changes).where("id", "=", id)), expectOneRow("api_users", id))
    },

    insertAccount(account) {
      return Effect.asVoid(write(db.insertInto("accounts").values(AccountRow.encode(account))))
    },
    getAccount(id) {
      return Effect.map(
        first(lookups.account[locking](id)),
        optional(AccountRow.decode)
      )
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
      const { id, client_id: _, created_at: __, ...changes } = AccountRow.encode(account)
      return Effect.flatMap(write(db.updateTable("accounts").set(changes).where("id", "=", id)), expectOneRow("accounts", id))
    },
    listAccounts(clientId, filter, request) {
      const where = accountWhere(engine, clientId, filter)
      return pageOf(
        (limit, offset) =>
          rows(
            db.selectFrom("accounts").selectAll().where(where)
              .orderBy("created_at", "desc").orderBy("id", "desc").limit(limit).offset(offset)
          ),
        () =>
          Effect.map(
            first(db.selectFrom("accounts").select((eb) => eb.fn.countAll<number | string>().as("total")).where(where)),
            countOf
          ),
        AccountRow.decode,
        request
      )
    },

    insertWhitelistedAddress(entry) {
      return Effect.asVoid(write(db.insertInto("whitelisted_addresses").values(WhitelistedAddressRow.encode(entry))))
    },
    getWhitelistedAddress(id) {
      return Effect.map(
        first(lookups.whitelistedAddress[locking](id)),
        optional(WhitelistedAddressRow.decode)
      )
    },
    findWhitelistedAddress(clientId, assetType, address) {
      return Effect.map(
        first(
          db.selectFrom("whitelisted_addresses").selectAll()
            .where("client_id", "=", clientId)
            .where("asset_type", "=", assetType)
            .where("address", "=", address)
            .where("status", "<>", sql.lit("ARCHIVED"))
        ),
        optional(WhitelistedAddressRow.decode)
      )
    },
    updateWhitelistedAddress(entry) {
      const { id, client_id: _, created_at: __, ...changes } = WhitelistedAddressRow.encode(entry)
      return Effect.flatMap(
        write(db.updateTable("whitelisted_addresses").set(changes).where("id", "=", id)),
        expectOneRow("whitelisted_addresses", id)
      )
    },
    listWhitelistedAddresses(clientId, filter, request) {
      const where = whitelistWhere(clientId, filter)
      return pageOf(
        (limit, offset) =>
          rows(
            db.selectFrom("whitelisted_addresses").selectAll().where(where)
              .orderBy("created_at", "desc").orderBy("id", "desc").limit(limit).offset(offset)
          ),
        () =>
          Effect.map(
            first(db.selectFrom("whitelisted_addresses").select((eb) => eb.fn.countAll<number | string>().as("total")).where(where)),
            countOf
          ),
        WhitelistedAddressRow.decode,
        request
      )
    },

    insertTransaction(tx) {
      const row = TransactionRow.encode(tx)
      return Effect.andThen(write(db.insertInto("transactions").values(row)), Effect.asVoid(countTransactions(row, 1)))
    },
    getTransaction(id) {
      return Effect.map(
        first(lookups.transaction[locking](id)),
        optional(TransactionRow.decode)
      )
    },
    updateTransaction(tx) {
      // Client, source, asset and creation never change; the counters are keyed by the first three.
      const { id, client_id: _, source_account_id: __, asset_type: ___, created_at: ____, ...changes } = TransactionRow.encode(tx)
      return Effect.gen(function*() {
        // Locked even if the unit did not read the row first, so the group it leaves is the one it really leaves.
        const before = yield* first(
          db.selectFrom("transactions").select(["client_id", "source_account_id", "asset_type", "status_group"])
            .where("id", "=", id).$if(engine.locksRowsForWrite, (qb) => qb.forNoKeyUpdate())
        )
        yield* Effect.flatMap(write(db.updateTable("transactions").set(changes).where("id", "=", id)), expectOneRow("transactions", id))
        if (before !== undefined && before.status_group !== changes.status_group) {
          yield* countTransactions(before, -1)
          yield* countTransactions({ ...before, status_group: changes.status_group }, 1)
        }
      })
    },
    listTransactions(clientId, filter, request) {
      const where = transactionWhere(clientId, filter)
      return pageOf(
        (limit, offset) =>
          rows(
            db.selectFrom("transactions").selectAll().where(where)
              .orderBy("created_at", "desc").orderBy("id", "desc").limit(limit).offset(offset)
          ),
        // The total is a sum of the few counter rows the filter selects, not a count of the rows themselves.
        () => {
          const { accountId, assetType, group } = filter
          return Effect.map(
            first(
              db.selectFrom("transaction_counts")
                .select((eb) => eb.fn.coalesce(eb.fn.sum<number | string>("count"), sql.lit(0)).as("total"))
                .where("client_id", "=", clientId)
                .$if(accountId !== undefined, (qb) => qb.where(sql<SqlBool>`${sql.ref("source_account_id")} = ${accountId}`))
                .$if(assetType !== undefined, (qb) => qb.where("asset_type", "=", assetType ?? ""))
                .$if(group !== undefined, (qb) => qb.where("status_group", "=", group ?? "pending"))
            ),
            countOf
          )
        },
        TransactionRow.decode,
        request
      )
    },
    listOpenTransactionsFrom(accountId) {
      return Effect.map(
        rows(
          db.selectFrom("transactions").selectAll()
            .where("source_account_id", "=", accountId)
            // The literal lets SQLite use the partial index of open transactions.
            .where("status_group", "=", sql.lit("pending"))
            .orderBy("created_at").orderBy("id")
        ),
        (found) => found.map(TransactionRow.decode)
      )
    },

    insertLedgerEntry(entry) {
      return Effect.asVoid(write(db.insertInto("ledger_entries").values(LedgerEntryRow.encode(entry))))
    },
    listLedgerEntries(accountId) {
      return Effect.map(
        rows(db.selectFrom("ledger_entries").selectAll().where("account_id", "=", accountId).orderBy("created_at").orderBy("id")),
        (found) => found.map(LedgerEntryRow.decode)
      )
    },

    getIdempotencyRecord(scope, key) {
      return Effect.map(
        first(
          db.selectFrom("idempotency_records").selectAll().where("scope", "=", scope).where("key", "=", key)
            .$if(lock, (qb) => qb.forNoKeyUpdate())
        ),
        optional(IdempotencyRecordRow.decode)
      )
    },
    claimIdempotencyRecord(record) {
      return Effect.map(
        write(
          db.insertInto("idempotency_records").values(IdempotencyRecordRow.encode(record))
            .onConflict((oc) => oc.columns(["scope", "key"]).doNothing())
        ),
        (inserted) => inserted === 1
      )
    },
    updateIdempotencyRecord(record) {
      const { scope, key, created_at: _, ...changes } = IdempotencyRecordRow.encode(record)
      return Effect.flatMap(
        write(db.updateTable("idempotency_records").set(changes).where("scope", "=", scope).where("key", "=", key)),
        expectOneRow("idempotency_records", `${scope}/${key}`)
      )
    },
    deleteIdempotencyRecord(scope, key) {
      return Effect.asVoid(write(db.deleteFrom("idempotency_records").where("scope", "=", scope).where("key", "=", key)))
    },
    deleteExpiredIdempotencyRecords(now) {
      // `now` is any instant the caller names, not a stored Timestamp: compare it as text.
      return write(db.deleteFrom("idempotency_records").where(sql<SqlBool>`${sql.ref("expires_at")} < ${now}`))
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
  const lookups = lookupsOf(db)
  // A SQLite handle reuses one session object, so its two units (read, write) are made once, not per unit of work.
  const units = new WeakMap<SqlSession, { read?: Storage.StorageUnit; write?: Storage.StorageUnit }>()
  const unitOf = (session: SqlSession, mode: Storage.UnitMode): Storage.StorageUnit => {
    let made = units.get(session)
    if (made === undefined) units.set(session, made = {})
    return made[mode] ??= makeUnit(db, session, mode, engine, lookups)
  }
  const attempt = <A, E, R>(mode: Storage.UnitMode, work: (unit: Storage.StorageUnit) => Effect.Effect<A, E, R>) =>
    Effect.acquireUseRelease(
      open(mode),
      (session) => Effect.flatMap(work(unitOf(session, mode)), (value) => Effect.as(session.commit, value)),
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
