/**
 * `pnpm bench:storage`: what the SQL store costs. Prints numbers; never a test, never a pass or fail.
 *
 * 1. Initiate, ops/s: the core's `Transactions.initiate` (validation, fee quote, reservation, insert: one unit of
 *    work) against the same statements written by hand (kysely; raw better-sqlite3 on SQLite), one at a time.
 * 2. List page, ops/s: the core's `Transactions.list` (page 1 of 20 with its total) against the same two queries
 *    by hand (the rows, and the sum of the client's transaction counters), over 10,000 transactions.
 * 3. List-page latency as one client's transactions grow to 10k, 100k and 1M rows: page 1 with its total, the rows
 *    alone, what a COUNT(*) of the client's rows would cost instead of the counters, filtered pages, and deep
 *    pages (offset 5,000, page 5,000, the middle page and the last), each timed after one untimed call: that call
 *    walks and leaves the boundaries the timed ones start from (see PageBoundaries). The middle page's first call
 *    is timed on its own too.
 *
 * SQLite runs on a file in a temporary directory; PostgreSQL on a temporary database of RELAY_BENCH_PG_URL (or
 * RELAY_TEST_PG_URL), skipped when neither is set. RELAY_BENCH_ROWS=10000,100000 narrows step 3;
 * RELAY_BENCH_STORES=postgres (or sqlite) runs one engine; RELAY_BENCH_STEPS=4 runs step 4 alone (a comma list of 1,
 * 3 and 4; step 2 runs with step 1). RELAY_BENCH_PG_PREPARED sets how many statements each
 * PostgreSQL connection keeps prepared (pool.preparedStatements; 0 sends every statement unnamed).
 * 4. Deep pages at random, alone and during writes of the same client, at the largest size (RELAY_BENCH_DEEP_SECONDS
 *    each, default 10), on PostgreSQL once more with another client's transaction held open throughout; then the
 *    first page the same way, the floor any read gets on this machine under that load.
 */
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type BetterSqlite3 from "better-sqlite3"
import { Ids, Money, RateLimiter, Relay, Storage, Timestamp, type Transaction, Transactions } from "@custody-relay/core"
import { Decimal } from "decimal.js"
import { Effect, Layer, ManagedRuntime } from "effect"
import { type Kysely, sql } from "kysely"
import pg from "pg"
import { migrateToLatest } from "../src/migrations/migrateToLatest.js"
import { openPostgres } from "../src/postgres/layerPostgres.js"
import { PostgresEngine } from "../src/postgres/PostgresEngine.js"
import * as TransactionRow from "../src/rows/TransactionRow.js"
import type { Database } from "../src/schema/Database.js"
import { openSqlite } from "../src/sqlite/layerSqlite.js"
import { SqliteEngine } from "../src/sqlite/SqliteEngine.js"
import type { SqlEngine } from "../src/SqlEngine.js"
import * as SqlRateLimiter from "../src/SqlRateLimiter.js"
import * as SqlStorage from "../src/SqlStorage.js"
import { holdTransaction } from "../test/Dialects.js"
import { approvedDestination, fundedAccount, newClient, newCredential, principalOf } from "../test/proofs/ProofWorld.js"

const INITIATIONS = 3_000
const LIST_PAGES = 3_000
const LIST_ROWS = 10_000
const LATENCY_SAMPLES = 40
const sizes = (process.env["RELAY_BENCH_ROWS"] ?? "10000,100000,1000000").split(",").map(Number)
const postgresUrl = process.env["RELAY_BENCH_PG_URL"] ?? process.env["RELAY_TEST_PG_URL"]
const storeNames = (process.env["RELAY_BENCH_STORES"] ?? "sqlite,postgres").split(",")
const steps = (process.env["RELAY_BENCH_STEPS"] ?? "1,2,3,4").split(",")

interface Store {
  readonly name: string
  readonly engine: SqlEngine
  readonly db: Kysely<Database>
  /** Raw better-sqlite3 handle for the hand-written SQLite baseline, when the engine is SQLite. */
  readonly raw?: BetterSqlite3.Database
  /**
   * Opens a transaction on a connection of its own that holds a transaction id until released, as a report or a
   * `pg_dump` does: every snapshot's oldest running transaction stays at it (PostgreSQL).
   */
  readonly holdTransaction?: () => Promise<() => Promise<void>>
  readonly close: () => Promise<void>
}

const ROUNDS = 3

/**
 * Operations per second of `run`, the best of {@link ROUNDS} rounds of `count / ROUNDS` calls: on a shared machine
 * the best round is the one least disturbed by others, for the core and the baselines alike.
 */
const time = async (count: number, run: (i: number) => Promise<unknown>): Promise<number> => {
  let best = 0
  const perRound = Math.ceil(count / ROUNDS)
  for (let round = 0; round < ROUNDS; round++) {
    const start = performance.now()
    for (let i = 0; i < perRound; i++) await run(round * perRound + i)
    best = Math.max(best, perRound / ((performance.now() - start) / 1000))
  }
  return best
}

const percentile = (samples: ReadonlyArray<number>, p: number): number => {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN
}

const latency = async (run: () => Promise<unknown>): Promise<string> => {
  await run()
  const samples: Array<number> = []
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const start = performance.now()
    await run()
    samples.push(performance.now() - start)
  }
  return `${percentile(samples, 50).toFixed(2)} / ${percentile(samples, 95).toFixed(2)}`
}

/** How long one call takes, in ms: a deep page's first call walks to the page, leaving boundaries on its way. */
const once = async (run: () => Promise<unknown>): Promise<string> => {
  const start = performance.now()
  await run()
  return (performance.now() - start).toFixed(2)
}

const row = (cells: ReadonlyArray<string | number>) => console.log(`| ${cells.join(" | ")} |`)

const openSqliteStore = async (): Promise<Store> => {
  const directory = mkdtempSync(join(tmpdir(), "relay-bench-"))
  const filename = join(directory, "relay.db")
  const db = await openSqlite({ filename })
  await migrateToLatest(db)
  const { default: BetterSqlite3 } = await import("better-sqlite3")
  const raw = new BetterSqlite3(filename, { timeout: 5000 })
  raw.pragma("journal_mode = WAL")
  raw.pragma("synchronous = NORMAL")
  raw.pragma("foreign_keys = ON")
  return {
    name: "SQLite (file, WAL)",
    engine: SqliteEngine,
    db,
    raw,
    close: async () => {
      raw.close()
      await db.destroy()
      rmSync(directory, { recursive: true, force: true })
    }
  }
}

const openPostgresStore = async (url: string): Promise<Store> => {
  const name = `relay_bench_${randomUUID().replaceAll("-", "").slice(0, 12)}`
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  await admin.query(`create database ${name}`)
  const target = new URL(url)
  target.pathname = `/${name}`
  // RELAY_BENCH_PG_PREPARED: statements each connection keeps prepared (pool.preparedStatements; 0: none, as before).
  const prepared = process.env["RELAY_BENCH_PG_PREPARED"]
  const db = await openPostgres({ connectionString: target.toString(), ...(prepared === undefined ? {} : { pool: { preparedStatements: Number(prepared) } }) })
  await migrateToLatest(db)
  return {
    name: "PostgreSQL 15 (local)",
    engine: PostgresEngine,
    db,
    holdTransaction: () => holdTransaction(target.toString()),
    close: async () => {
      await db.destroy()
      await admin.query(`drop database ${name} with (force)`)
      await admin.end()
    }
  }
}

const relayOn = (store: Store) =>
  ManagedRuntime.make(
    Relay.layer(
      Layer.merge(
        Layer.succeed(Storage.Storage, SqlStorage.make(store.db, store.engine)),
        Layer.succeed(RateLimiter.RateLimiter, SqlRateLimiter.make(store.db, store.engine))
      )
    )
  )

/** Initiate by hand: the same reads and writes as the core's unit of work, none of its rules. */
const handInitiateKysely = (db: Kysely<Database>, engine: SqlEngine, world: World) => async () => {
  const trx = await engine.begin(db, "write")
  try {
    const source = await trx.selectFrom("accounts").selectAll().where("id", "=", Ids.AccountId.make(world.source))
      .$if(engine.locksRowsForWrite, (qb) => qb.forNoKeyUpdate()).executeTakeFirstOrThrow()
    const destination = await trx.selectFrom("whitelisted_addresses").selectAll().where("id", "=", Ids.WhitelistedAddressId.make(world.destination))
      .$if(engine.locksRowsForWrite, (qb) => qb.forNoKeyUpdate()).executeTakeFirstOrThrow()
    const reserved = "1.000021"
    const balance = new Decimal(source.available_balance).minus(reserved).toFixed()
    await trx.updateTable("accounts").set({ available_balance: balance, updated_at: now() }).where("id", "=", Ids.AccountId.make(world.source)).execute()
    await trx.insertInto("transactions").values(handRow(world, destination.address, reserved)).execute()
    await trx.commit().execute()
  } catch (error) {
    await trx.rollback().execute()
    throw error
  }
}

const now = () => Timestamp.fromMillis(Date.now())

const handRow = (world: World, address: string, reserved: string): Database["transactions"] => {
  const at = now()
  return {
    id: Ids.TransactionId.make(randomUUID()),
    client_id: Ids.ClientId.make(world.clientId),
    source_account_id: Ids.AccountId.make(world.source),
    destination_id: world.destination,
    destination_type: "external",
    destination_address: address,
    amount: "1",
    asset_type: "ETH",
    network_fee: "0.000021",
    fee_asset_id: "ETH",
    reserved,
    status: "AWAITING_SIGNATURE",
    status_group: "pending",
    sub_status: null,
    required_approvals: 1,
    created_by_api_user_id: Ids.ApiUserId.make(randomUUID()),
    created_by_name: "Bench",
    decisions: "[]",
    provider_transaction_id: null,
    approved_at: null,
    provider_approved_at: null,
    created_at: at,
    updated_at: at
  }
}

/** Initiate by hand on raw better-sqlite3: prepared statements, one synchronous transaction. */
const handInitiateRaw = (raw: BetterSqlite3.Database, world: World) => {
  const readAccount = raw.prepare<[string], { readonly available_balance: string }>("select available_balance from accounts where id = ?")
  const readDestination = raw.prepare<[string], { readonly address: string }>("select address from whitelisted_addresses where id = ?")
  const update = raw.prepare("update accounts set available_balance = ?, updated_at = ? where id = ?")
  const columns = Object.keys(handRow(world, "", "0"))
  const insert = raw.prepare(`insert into transactions (${columns.join(", ")}) values (${columns.map(() => "?").join(", ")})`)
  const initiate = raw.transaction(() => {
    const source = readAccount.get(world.source)
    const destination = readDestination.get(world.destination)
    if (source === undefined || destination === undefined) throw new Error("the bench world is missing")
    const reserved = "1.000021"
    update.run(new Decimal(source.available_balance).minus(reserved).toFixed(), now(), world.source)
    insert.run(...Object.values(handRow(world, destination.address, reserved)))
  })
  return async () => initiate.immediate()
}

interface World {
  readonly clientId: string
  readonly source: string
  readonly destination: string
  readonly keyId: string
  readonly secret: string
}

const makeWorld = (runtime: ReturnType<typeof relayOn>) =>
  runtime.runPromise(Effect.gen(function*() {
    const clientId = yield* newClient
    const credential = yield* newCredential(clientId, "Bench")
    const source = yield* fundedAccount(credential, "100000000000000000000", 1)
    const destination = yield* approvedDestination(credential)
    return { clientId, source, destination, keyId: credential.keyId, secret: credential.secret } satisfies World
  }))

const benchInitiateAndList = async (store: Store) => {
  const runtime = relayOn(store)
  const world = await makeWorld(runtime)
  const principal = await runtime.runPromise(principalOf({ keyId: world.keyId, secret: world.secret }))
  const input = {
    sourceAccountId: world.source,
    destinationId: world.destination,
    destinationType: "external" as const,
    amount: "1",
    assetType: "ETH"
  }
  const core = await time(INITIATIONS, () => runtime.runPromise(Transactions.initiate(principal, input)))
  const kysely = await time(INITIATIONS, handInitiateKysely(store.db, store.engine, world))
  const raw = store.raw === undefined ? undefined : await time(INITIATIONS, handInitiateRaw(store.raw, world))
  row([store.name, "initiate", core.toFixed(0), kysely.toFixed(0), raw?.toFixed(0) ?? "-", (core / kysely).toFixed(2)])

  // Top the list up to LIST_ROWS transactions, then page.
  const have = 2 * INITIATIONS + (raw === undefined ? 0 : INITIATIONS)
  const topUp = handInitiateKysely(store.db, store.engine, world)
  for (let i = have; i < LIST_ROWS; i++) await topUp()
  const page = { page: 1, limit: 20 }
  const coreList = await time(LIST_PAGES, () => runtime.runPromise(Transactions.list(principal, {}, page)))
  const handList = await time(LIST_PAGES, async () => {
    const trx = await store.engine.begin(store.db, "read")
    try {
      const clientId = Ids.ClientId.make(world.clientId)
      // Bound as the store binds them (SqlEngine's `opaque`), so SQLite does not re-plan the page on every run.
      const { text, integer } = store.engine.opaque
      await trx.selectFrom("transactions").select(TransactionRow.summaryColumns).where("client_id", "=", text(clientId))
        .orderBy("created_at", "desc").orderBy("id", "desc").limit(integer(20)).offset(integer(0)).execute()
      await trx.selectFrom("transaction_counts").select((eb) => eb.fn.sum("count").as("total")).where("client_id", "=", clientId).executeTakeFirstOrThrow()
      await trx.commit().execute()
    } catch (error) {
      await trx.rollback().execute()
      throw error
    }
  })
  const rawList = store.raw === undefined ? undefined : await (async () => {
    const items = store.raw?.prepare(
      `select ${TransactionRow.summaryColumns.join(", ")} from transactions where client_id = cast(? as text) order by created_at desc, id desc limit 20 offset 0`
    )
    const count = store.raw?.prepare("select sum(count) as total from transaction_counts where client_id = ?")
    const read = store.raw?.transaction(() => {
      items?.all(world.clientId)
      count?.get(world.clientId)
    })
    return time(LIST_PAGES, async () => read?.deferred())
  })()
  row([store.name, `list page (20 of ${LIST_ROWS} + total)`, coreList.toFixed(0), handList.toFixed(0), rawList?.toFixed(0) ?? "-", (coreList / handList).toFixed(2)])
  await runtime.dispose()
}

/** Appends `count` transactions of one client in one statement, timestamps one millisecond apart. */
const seed = async (store: Store, world: { readonly clientId: string; readonly source: string }, from: number, count: number) => {
  if (store.engine.name === "sqlite") {
    await sql`
      with recursive n(i) as (select ${from} union all select i + 1 from n where i < ${from + count - 1})
      insert into transactions (id, client_id, source_account_id, destination_id, destination_type, destination_address, amount,
        asset_type, network_fee, fee_asset_id, reserved, status, status_group, sub_status, required_approvals,
        created_by_api_user_id, created_by_name, decisions, provider_transaction_id, approved_at, provider_approved_at,
        created_at, updated_at)
      select printf('00000000-0000-7000-8000-%012x', i), ${world.clientId}, ${world.source}, 'destination', 'external', '0xdest',
        '1', 'ETH', '0.000021', 'ETH', '1.000021',
        case i % 4 when 0 then 'COMPLETED' when 1 then 'AWAITING_SIGNATURE' when 2 then 'FAILED' else 'CONFIRMING' end,
        case i % 4 when 0 then 'completed' when 1 then 'pending' when 2 then 'failed' else 'pending' end,
        null, 1, 'bench-user', 'Bench', '[]', null, null, null,
        strftime('%Y-%m-%dT%H:%M:%fZ', 1700000000 + i / 1000.0, 'unixepoch'),
        strftime('%Y-%m-%dT%H:%M:%fZ', 1700000000 + i / 1000.0, 'unixepoch')
      from n
    `.execute(store.db)
    await sql`analyze`.execute(store.db)
  } else {
    // In statements of at most 100,000 rows: the pool's statement timeout (30 s) is shorter than a million rows
    // take with the list-change trigger's row each (migration 8).
    for (let start = from; start < from + count; start += 100_000) {
      const end = Math.min(from + count, start + 100_000) - 1
      await sql`
        insert into transactions (id, client_id, source_account_id, destination_id, destination_type, destination_address, amount,
          asset_type, network_fee, fee_asset_id, reserved, status, status_group, sub_status, required_approvals,
          created_by_api_user_id, created_by_name, decisions, provider_transaction_id, approved_at, provider_approved_at,
          created_at, updated_at)
        select '00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'), ${world.clientId}, ${world.source}, 'destination', 'external',
          '0xdest', 1, 'ETH', 0.000021, 'ETH', 1.000021,
          (array['COMPLETED','AWAITING_SIGNATURE','FAILED','CONFIRMING'])[i % 4 + 1],
          (array['completed','pending','failed','pending'])[i % 4 + 1],
          null, 1, 'bench-user', 'Bench', '[]', null, null, null,
          to_char(to_timestamp(1700000000 + i / 1000.0) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
          to_char(to_timestamp(1700000000 + i / 1000.0) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
        from generate_series(${start}::bigint, ${end}::bigint) as i
      `.execute(store.db)
    }
    // Steady state, as autovacuum leaves a table: the visibility map lets COUNT read the index alone.
    await sql`vacuum analyze transactions`.execute(store.db)
  }
}

/** Seeding writes rows behind the store's back: recount the client's counters (what migration 4 does). */
const recount = async (store: Store, clientId: string) => {
  await sql`delete from transaction_counts where client_id = ${clientId}`.execute(store.db)
  await sql`
    insert into transaction_counts (client_id, source_account_id, asset_type, status_group, count)
    select client_id, source_account_id, asset_type, status_group, count(*) from transactions where client_id = ${clientId}
    group by client_id, source_account_id, asset_type, status_group
  `.execute(store.db)
}

/** A page of 20 of the client's transactions, in the unit the API reads it in: a lookup for the first, a read unit after. */
const readPage = (storage: Storage.Storage["Service"], clientId: Ids.ClientId, filter: Transaction.TransactionFilter, page: number) => {
  const request = { page, limit: 20 }
  return storage.transaction(Storage.unitForPage(request), (unit) => unit.listTransactions(clientId, filter, request))
}

const benchLatency = async (store: Store) => {
  const runtime = relayOn(store)
  const world = await makeWorld(runtime)
  await runtime.dispose()
  const storage = SqlStorage.make(store.db, store.engine)
  const clientId = Ids.ClientId.make(world.clientId)
  const list = (filter: Transaction.TransactionFilter, page: number) => () => Effect.runPromise(readPage(storage, clientId, filter, page))
  const rowsOnly = () =>
    store.db.selectFrom("transactions").select(TransactionRow.summaryColumns).where("client_id", "=", store.engine.opaque.text(clientId))
      .orderBy("created_at", "desc").orderBy("id", "desc").limit(store.engine.opaque.integer(20)).execute()
  const countOnly = () =>
    store.db.selectFrom("transactions").select((eb) => eb.fn.countAll().as("total")).where("client_id", "=", clientId).execute()
  let seeded = 0
  for (const size of sizes) {
    const started = performance.now()
    await seed(store, world, seeded + 1, size - seeded)
    await recount(store, world.clientId)
    const seedSeconds = ((performance.now() - started) / 1000).toFixed(1)
    seeded = size
    row([
      store.name,
      size.toLocaleString("en"),
      await latency(list({}, 1)),
      await latency(rowsOnly),
      await latency(countOnly),
      await latency(list({ group: "pending" }, 1)),
      await latency(list({ accountId: world.source, assetType: "ETH" }, 1)),
      await latency(list({}, 251)),
      await latency(list({}, 5000)),
      await once(list({}, Math.ceil(size / 40))),
      await latency(list({}, Math.ceil(size / 40))),
      await latency(list({}, Math.ceil(size / 20))),
      `${seedSeconds} s`
    ])
  }
}

const DEEP_SECONDS = Number(process.env["RELAY_BENCH_DEEP_SECONDS"] ?? 10)

/**
 * Step 4: deep pages at random (2 readers, pages 2 to the last) for DEEP_SECONDS, alone and then while 2 writers
 * initiate transfers of the same client through the core as fast as they can. On PostgreSQL a deep page whose
 * snapshot misses a commit the kept one saw reads from the nearer end instead of from the boundaries (see
 * PageBoundaries): the share of pages over 10 ms says how often. Then the same with the readers on page 1 (the
 * newest rows and the counters' total, no boundaries): its tail under the writers is what the machine gives any
 * read under that load (the readers, the writers and the database on the same cores), the floor for the deep pages'.
 * Each row also counts the bench process's own stalls (`eventLoopStalls`): where a page's tail is the process's and
 * not the database's, they say so.
 */
/** A stall of the event loop longer than this is counted (`eventLoopStalls`). */
const STALL_MILLIS = 10

/**
 * Counts the turns of this process's event loop that took longer than STALL_MILLIS, with a 1 ms timer: a page read
 * during one waits that long whatever the database does (a long garbage collection, the process waiting for a core).
 * `stop` gives the count and the longest gap between the timer's runs.
 */
const eventLoopStalls = () => {
  let stalls = 0
  let longest = 0
  let last = performance.now()
  const timer = setInterval(() => {
    const now = performance.now()
    // The timer's own period is 1 ms; a gap longer than the stall and that period is a turn that ran that long.
    if (now - last > STALL_MILLIS + 1) stalls++
    longest = Math.max(longest, now - last)
    last = now
  }, 1)
  return { stop: () => {
    clearInterval(timer)
    const final = performance.now() - last
    return { stalls: stalls + (final > STALL_MILLIS + 1 ? 1 : 0), longest: Math.max(longest, final) }
  } }
}

/**
 * Waits for the event loop's next turn, as a server's next request arrives in a turn of its own. On SQLite a page
 * or an initiation can complete without any I/O, and a loop of them awaited back to back would never give the event
 * loop a turn: another reader's walk, which pauses for a turn or waits for the read worker, would wait for this loop
 * to end.
 */
const nextRequest = () => new Promise<void>((resolve) => setImmediate(resolve))

const benchDeepPagesUnderWrites = async (store: Store, size: number) => {
  const runtime = relayOn(store)
  const world = await makeWorld(runtime)
  await seed(store, world, 1, size)
  await recount(store, world.clientId)
  const principal = await runtime.runPromise(principalOf({ keyId: world.keyId, secret: world.secret }))
  const storage = SqlStorage.make(store.db, store.engine)
  const clientId = Ids.ClientId.make(world.clientId)
  const lastPage = Math.ceil(size / 20)
  const input = { sourceAccountId: world.source, destinationId: world.destination, destinationType: "external" as const, amount: "1", assetType: "ETH" }
  // The first walks, untimed: boundaries every step of the list.
  for (let page = 2; page <= lastPage; page += Math.ceil(lastPage / 8)) {
    await Effect.runPromise(readPage(storage, clientId, {}, page))
  }
  const series = [
    ["deep, at random", () => 2 + Math.floor(Math.random() * (lastPage - 1))],
    ["page 1", () => 1]
  ] as const
  // On PostgreSQL the writers once more with another client's transaction open throughout (a report, a backup).
  const conditions = [{ writers: 0, held: false }, { writers: 2, held: false }, ...(store.holdTransaction === undefined ? [] : [{ writers: 2, held: true }])]
  for (const [pages, nextPage] of series) {
    for (const { writers, held } of conditions) {
      const release = held ? await store.holdTransaction!() : undefined
      const samples: Array<number> = []
      let writes = 0
      const until = performance.now() + DEEP_SECONDS * 1000
      const reader = async () => {
        while (performance.now() < until) {
          await nextRequest()
          const page = nextPage()
          const start = performance.now()
          await Effect.runPromise(readPage(storage, clientId, {}, page))
          samples.push(performance.now() - start)
        }
      }
      const writer = async () => {
        while (performance.now() < until) {
          await nextRequest()
          await runtime.runPromise(Transactions.initiate(principal, input))
          writes++
        }
      }
      const stalls = eventLoopStalls()
      await Promise.all([reader(), reader(), ...Array.from({ length: writers }, writer)])
      const { stalls: stalled, longest: longestStall } = stalls.stop()
      await release?.()
      const over = samples.filter((ms) => ms > 10).length
      row([
        store.name,
        size.toLocaleString("en"),
        pages,
        held ? `${writers}, a transaction held open` : writers,
        samples.length,
        [50, 95, 99, 99.9].map((p) => percentile(samples, p).toFixed(2)).join(" / "),
        samples.reduce((longest, ms) => Math.max(longest, ms), 0).toFixed(2),
        `${((100 * over) / samples.length).toFixed(1)}%`,
        (writes / DEEP_SECONDS).toFixed(0),
        `${stalled} / ${longestStall.toFixed(0)}`
      ])
    }
  }
  await runtime.dispose()
}

const main = async () => {
  const stores: Array<() => Promise<Store>> = []
  if (storeNames.includes("sqlite")) stores.push(openSqliteStore)
  if (!storeNames.includes("postgres")) {
    // Left out by RELAY_BENCH_STORES.
  } else if (postgresUrl === undefined) {
    console.log("PostgreSQL skipped: set RELAY_BENCH_PG_URL or RELAY_TEST_PG_URL to include it.")
  } else {
    stores.push(() => openPostgresStore(postgresUrl))
  }
  /** Runs `run` on a fresh database of each engine, closed (and dropped) after. */
  const onEachStore = async (run: (store: Store) => Promise<void>) => {
    for (const open of stores) {
      const store = await open()
      try {
        await run(store)
      } finally {
        await store.close()
      }
    }
  }

  if (steps.includes("1")) {
    console.log(`\nInitiate and list page, operations per second (one at a time; best of ${ROUNDS} rounds of ${INITIATIONS / ROUNDS} initiations, ${LIST_PAGES / ROUNDS} pages)\n`)
    row(["store", "operation", "core ops/s", "hand-written kysely ops/s", "hand-written better-sqlite3 ops/s", "core / kysely"])
    row(["---", "---", "---:", "---:", "---:", "---:"])
    await onEachStore((store) => benchInitiateAndList(store))
  }
  if (steps.includes("3")) {
    console.log(`\nList-page latency in ms, p50 / p95 of ${LATENCY_SAMPLES}, as one client's transactions grow (page size 20)\n`)
    row(["store", "rows", "page 1 + total", "rows only", "COUNT(*) instead", "group=pending + total", "account+asset + total", "page 251 + total", "page 5000 + total", "middle page, first call", "middle page + total", "last page + total", "seeding"])
    row(["---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:"])
    await onEachStore((store) => benchLatency(store))
  }
  if (steps.includes("4")) {
    const deepRows = sizes.at(-1) ?? 0
    console.log(`\nDeep pages at random, then page 1 (2 readers, ${DEEP_SECONDS} s), alone and during writes of the same client (initiations through the core), ${deepRows.toLocaleString("en")} rows, ms\n`)
    row(["store", "rows", "pages read", "writers", "pages", "p50 / p95 / p99 / p99.9", "longest", "pages over 10 ms", "writes/s", `the bench's event-loop stalls over ${STALL_MILLIS} ms / longest`])
    row(["---", "---:", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:"])
    await onEachStore((store) => benchDeepPagesUnderWrites(store, deepRows))
  }
  console.log(`\nnode ${process.version}, ${new Date().toISOString()}; ${Money.canonical("1")} ETH per initiation`)
}

await main()
