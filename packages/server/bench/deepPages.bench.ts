/**
 * `pnpm --filter @custody-relay/server run bench:deep-pages`: what deep pages of a large transaction list do to
 * every other request on SQLite, where statements run on the event loop (or on PostgreSQL, BENCH_PG_URL). One relay
 * server on a SQLite file with the demo data and BENCH_ROWS transactions of the demo client (1,000,000 by default,
 * written straight into the file between two starts). Measures a reader (GET account, 10 connections) alone, then the same reader while
 * other clients ask for deep pages of the list (2 connections): first, right after start, pages no walk has reached
 * yet (the middle and three quarters down of each list a filter makes: first walks; the reader runs exactly as long
 * as they do); after a warm-up, pages anywhere in the list, chosen at random, then the middle page (the farthest
 * from both ends), and prints the readers' latencies (to the hundredth of a millisecond) and the deep pages' own
 * (autocannon's, in whole milliseconds).
 * Asserts nothing.
 *
 * BENCH_LIST=events: the same with the audit trail (`GET /relay/v1/events`) of BENCH_ROWS events of the demo client
 * (written straight into the file), its filters (entity type, event type, a time range) in place of the list's:
 * "first walks" are then a trail's first counts (TrailCounts).
 *
 * BENCH_PG_URL=postgres://...: the same on a PostgreSQL database created (and dropped) here, instead of the SQLite
 * file. Statements then run in PostgreSQL, off the event loop; what a deep page costs the reader is the database's
 * time and the node's pool. BENCH_PG_DELAY_MS (with BENCH_PG_URL): the server measured reaches PostgreSQL through
 * delayProxy.mjs, which holds every chunk that many milliseconds each way, as a database on another host would (a
 * round trip costs twice that more); the seeding goes direct.
 *
 * BENCH_RELAY=built runs dist/main.js with node (run `pnpm build` first); else from source (BenchProcess.fromSource).
 * BENCH_DURATION (seconds per measurement, default 10), BENCH_WARMUP (seconds, default 10).
 */
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import Database from "better-sqlite3"
import pg from "pg"
import { autocannon, type AutocannonResult, delayProxy, demoOf, grab, type Latency, postgresDatabase, READY, relayCommand, startServer, stopGently, timedFinely } from "./BenchProcess.js"

const rows = Number(process.env["BENCH_ROWS"] ?? 1_000_000)
const duration = Number(process.env["BENCH_DURATION"] ?? 10)
const warmup = Number(process.env["BENCH_WARMUP"] ?? 10)
const built = process.env["BENCH_RELAY"] === "built"
const pgUrl = process.env["BENCH_PG_URL"]
const pgDelayMillis = pgUrl === undefined ? 0 : Number(process.env["BENCH_PG_DELAY_MS"] ?? "0")
const events = process.env["BENCH_LIST"] === "events"
const command = relayCommand(built)
const stop = stopGently

/** The columns the seeded rows fill, the same on both engines. */
const TRANSACTION_COLUMNS = `(id, client_id, source_account_id, destination_id, destination_type, destination_address,
  amount, asset_type, network_fee, fee_asset_id, reserved, status, status_group, sub_status, required_approvals,
  created_by_api_user_id, created_by_name, decisions, provider_transaction_id, approved_at, provider_approved_at,
  created_at, updated_at)`
const EVENT_COLUMNS = "(id, type, client_id, entity_type, entity_id, status_before, status_after, actor, at, data)"

/**
 * Seeds the SQLite file: `insert` run once for the rows numbered 1 to `count` (its parameters the count, the account's
 * client and the account), then `after` with the client, then ANALYZE.
 */
const seedSqliteWith = (file: string, accountId: string, count: number, insert: string, after: (db: Database.Database, clientId: string) => void = () => {}) => {
  const db = new Database(file)
  try {
    const { client_id: clientId } = db.prepare("select client_id from accounts where id = ?").get(accountId) as { client_id: string }
    db.prepare(`with recursive n(i) as (select 1 union all select i + 1 from n where i < ?) ${insert}`).run(count, clientId, accountId)
    after(db, clientId)
    db.exec("analyze")
  } finally {
    db.close()
  }
}

/** `count` transactions of the account's client, one millisecond apart, then the list's counters recounted. */
const seedSqlite = (file: string, accountId: string, count: number) =>
  seedSqliteWith(
    file,
    accountId,
    count,
    `insert into transactions ${TRANSACTION_COLUMNS}
    select printf('00000000-0000-7000-8000-%012x', i), ?, ?, 'destination', 'external', 'bc1qdest', '0.001', 'BTC',
      '0.00001', 'BTC', '0.00101', 'COMPLETED', 'completed', null, 1, 'bench-user', 'Bench', '[]', null, null, null,
      strftime('%Y-%m-%dT%H:%M:%fZ', 1700000000 + i / 1000.0, 'unixepoch'),
      strftime('%Y-%m-%dT%H:%M:%fZ', 1700000000 + i / 1000.0, 'unixepoch')
    from n`,
    (db, clientId) => {
      db.prepare("delete from transaction_counts where client_id = ?").run(clientId)
      db.prepare(`
        insert into transaction_counts (client_id, source_account_id, asset_type, status_group, count)
        select client_id, source_account_id, asset_type, status_group, count(*) from transactions where client_id = ?
        group by client_id, source_account_id, asset_type, status_group
      `).run(clientId)
    }
  )

/**
 * Seeds a PostgreSQL database created here: `insert` run for the rows numbered 1 to `count`, in statements of 100,000
 * (its parameters the account's client, the account, and the first and last number), then `after` with the client.
 */
const seedPostgresInParts = async (
  url: string,
  accountId: string,
  count: number,
  insert: string,
  after: (client: pg.Client, clientId: string | undefined) => Promise<unknown>
) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows: [account] } = await client.query<{ client_id: string }>("select client_id from accounts where id = $1", [accountId])
    const clientId = account?.client_id
    for (let start = 1; start <= count; start += 100_000) {
      await client.query(insert, [clientId, accountId, start, Math.min(count, start + 99_999)])
    }
    await after(client, clientId)
  } finally {
    await client.end()
  }
}

/** The same on PostgreSQL, in statements of 100,000 rows (migration 8's trigger logs each one). */
const seedPostgres = (url: string, accountId: string, count: number) =>
  seedPostgresInParts(
    url,
    accountId,
    count,
    `insert into transactions ${TRANSACTION_COLUMNS}
    select '00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'), $1, $2, 'destination', 'external', 'bc1qdest',
      0.001, 'BTC', 0.00001, 'BTC', 0.00101, 'COMPLETED', 'completed', null, 1, 'bench-user', 'Bench', '[]', null, null, null,
      to_char(to_timestamp(1700000000 + i / 1000.0) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
      to_char(to_timestamp(1700000000 + i / 1000.0) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
    from generate_series($3::bigint, $4::bigint) as i`,
    async (client, clientId) => {
      await client.query("delete from transaction_counts where client_id = $1", [clientId])
      await client.query(
        `insert into transaction_counts (client_id, source_account_id, asset_type, status_group, count)
        select client_id, source_account_id, asset_type, status_group, count(*) from transactions where client_id = $1
        group by client_id, source_account_id, asset_type, status_group`,
        [clientId]
      )
      // Steady state, as autovacuum leaves a table: the visibility map lets a count read the index alone.
      await client.query("vacuum analyze transactions")
    }
  )

/** The event types the seeded events take in turn, and the entity types that go with them. */
const EVENT_KINDS = [["transaction.initiated", "transaction"], ["funds.reserved", "account"], ["transaction.status_changed", "transaction"]] as const

/** `count` events of the account's client, a millisecond apart: one in three the account's, the rest of transactions. */
const seedSqliteEvents = (file: string, accountId: string, count: number) =>
  seedSqliteWith(
    file,
    accountId,
    count,
    `insert into domain_events ${EVENT_COLUMNS}
    select printf('00000000-0000-7000-8000-%012x', i),
      case i % 3 ${EVENT_KINDS.map(([type], k) => `when ${k} then '${type}'`).join(" ")} end, ?,
      case i % 3 ${EVENT_KINDS.map(([, entity], k) => `when ${k} then '${entity}'`).join(" ")} end,
      case i % 3 when 1 then ? else printf('00000000-0000-7000-9000-%012x', i / 3) end, null, null, '{"kind":"system"}',
      strftime('%Y-%m-%dT%H:%M:%fZ', 1700000000 + i / 1000.0, 'unixepoch'), '{}'
    from n`
  )

/** The same on PostgreSQL, in statements of 100,000 rows. */
const seedPostgresEvents = (url: string, accountId: string, count: number) =>
  seedPostgresInParts(
    url,
    accountId,
    count,
    `insert into domain_events ${EVENT_COLUMNS}
    select '00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'),
      case i % 3 ${EVENT_KINDS.map(([type], k) => `when ${k} then '${type}'`).join(" ")} end, $1,
      case i % 3 ${EVENT_KINDS.map(([, entity], k) => `when ${k} then '${entity}'`).join(" ")} end,
      case i % 3 when 1 then $2 else '00000000-0000-7000-9000-' || lpad(to_hex(i / 3), 12, '0') end, null, null, '{"kind":"system"}',
      to_char(to_timestamp(1700000000 + i / 1000.0) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), '{}'
    from generate_series($3::bigint, $4::bigint) as i`,
    (client) => client.query("vacuum analyze domain_events")
  )

const latencies = (latency: Latency) => `${latency.p50} / ${latency.p99} ms`

const run = async () => {
  const directory = mkdtempSync(join(tmpdir(), "relay-deep-pages-"))
  const file = join(directory, "relay.db")
  const postgres = pgUrl === undefined ? undefined : await postgresDatabase(pgUrl, `relay_deep_pages_${process.pid}`)
  const env = {
    RELAY_DATABASE: postgres?.url ?? file,
    RELAY_RATE_LIMIT_STORE: "memory",
    PORT: "0",
    RELAY_LOG_LEVEL: "Warn",
    RELAY_RATE_LIMIT: "1000000000"
  }
  let server: ChildProcess | undefined
  let proxy: ChildProcess | undefined
  try {
    const first = await startServer({ command, logFile: join(directory, "first.log"), ready: READY, env: { ...env, RELAY_DEMO: "always" } })
    const demo = demoOf(first.output)
    await stop(first.child)
    const seeding = performance.now()
    if (postgres === undefined) (events ? seedSqliteEvents : seedSqlite)(file, demo.account, rows)
    else await (events ? seedPostgresEvents : seedPostgres)(postgres.url, demo.account, rows)
    const seeded = ((performance.now() - seeding) / 1000).toFixed(1)
    let database = env.RELAY_DATABASE
    if (postgres !== undefined && pgDelayMillis > 0) {
      const delayed = await delayProxy(new URL(postgres.url), pgDelayMillis, join(directory, "delay.log"))
      proxy = delayed.child
      const through = new URL(postgres.url)
      through.hostname = "127.0.0.1"
      through.port = delayed.port
      database = through.toString()
    }
    const started = await startServer({ command, logFile: join(directory, "second.log"), ready: READY, env: { ...env, RELAY_DATABASE: database, RELAY_DEMO: "never" } })
    server = started.child
    const url = grab(started.output, /listening on (http:\/\/\S+)/)
    const reader = (seconds: number) =>
      timedFinely(autocannon({ url: `${url}/relay/v1/accounts/${demo.account}`, connections: 10, duration: seconds, headers: demo.headers }))
    const lastPage = Math.ceil(rows / 20)
    const middlePage = Math.ceil(lastPage / 2)
    const path = (page: number) => `/relay/v1/${events ? "events" : "transactions"}?page=${page}&limit=20`
    const randomPages = [{ setupRequest: (request: { path: string }) => ({ ...request, path: path(1 + Math.floor(Math.random() * lastPage)) }) }]
    const deep = (seconds: number, which: "random" | "middle" | "first") =>
      autocannon({
        url: `${url}${path(which === "first" ? 1 : middlePage)}`,
        connections: 2,
        duration: seconds,
        headers: demo.headers,
        ...(which === "random" ? { requests: randomPages } : {})
      })
    process.stdout.write(`\n${cpus().length} CPUs, ${cpus()[0]?.model ?? "?"}; node ${process.version}; relay ${built ? "built, with node" : "from source"}; ${postgres === undefined ? "SQLite file" : pgDelayMillis > 0 ? `PostgreSQL 15 (local, behind a proxy that holds each chunk ${pgDelayMillis} ms each way)` : "PostgreSQL 15 (local)"}; ${rows.toLocaleString("en")} ${events ? "events" : "transactions"} of one client (seeded in ${seeded} s); ${duration} s each after ${warmup} s of warm-up\n\n`)
    // The first deep page a server serves walks to it; later ones start from what that walk left.
    /** Milliseconds until the whole answer to `target` (a path and query) has arrived. */
    const timed = async (target: string) => {
      const started = performance.now()
      const response = await fetch(`${url}${target}`, { headers: demo.headers })
      await response.arrayBuffer()
      return performance.now() - started
    }
    const firstMiddle = (await timed(path(middlePage))).toFixed(1)
    const secondMiddle = (await timed(path(middlePage))).toFixed(1)
    // First walks: the middle and a quarter of each list a filter makes (each keeps boundaries, or counts, of its own;
    // every transaction list holds all the rows, a trail's filters fewer or none), none reached by a walk yet, asked
    // for by 2 clients while the reader runs.
    const filters = events
      ? ["entityType=transaction", `type=${EVENT_KINDS[1][0]}`, "from=2023-11-14T22:21:40.000Z"]
      : [`accountId=${demo.account}`, "assetType=BTC", "status=completed"]
    const lists = filters.reduce<Array<Array<string>>>((subsets, filter) => [...subsets, ...subsets.map((subset) => [...subset, filter])], [[]])
    const firstWalks = lists.flatMap((list) => [middlePage, Math.ceil(lastPage * 3 / 4)].map((page) => [path(page), ...list].join("&")))
    const walkMillis: Array<number> = []
    const walkFirst = async () => {
      for (let next = firstWalks.shift(); next !== undefined; next = firstWalks.shift()) walkMillis.push(await timed(next))
    }
    // The reader warms up first (it reads no list, so it walks nothing), then runs exactly as long as the walks do.
    await reader(warmup).done
    const readerDuringWalks = reader(3_600)
    const stormStarted = performance.now()
    await Promise.all([walkFirst(), walkFirst()])
    const stormMillis = performance.now() - stormStarted
    readerDuringWalks.stop()
    const duringFirstWalks = await readerDuringWalks.done
    // The warm-up reads every part of the list, as a server that has served for a while has.
    await Promise.all([reader(warmup).done, deep(warmup, "random")])
    const quiet = await reader(duration).done
    const [duringRandom, random] = await Promise.all([reader(duration).done, deep(duration, "random")])
    const [duringMiddle, middle] = await Promise.all([reader(duration).done, deep(duration, "middle")])
    // The same load of the first page, which walks nothing: what any two busy clients cost the reader.
    const [duringFirst, firstPages] = await Promise.all([reader(duration).done, deep(duration, "first")])
    // A time range no request asked for before (a range that moves with the clock, "the last ten minutes"): each is a
    // trail of its own, first read here; the trail it cuts (all of the client's events) was read above.
    const rangeMillis: Array<number> = []
    if (events) {
      for (let i = 0; i < 10; i++) {
        const from = new Date((1_700_000_000 + Math.random() * rows / 1000) * 1000).toISOString()
        rangeMillis.push(await timed(`${path(2)}&from=${from}`))
      }
    }
    const sortedRanges = [...rangeMillis].sort((a, b) => a - b)
    const readers = [quiet, duringFirstWalks, duringRandom, duringMiddle, duringFirst].map(({ result }) => result)
    const failed = [...readers, random, middle, firstPages].reduce((sum, result) => sum + result.non2xx + result.errors, 0)
    const ratio = (during: { readonly latency: Latency }) => (during.latency.p99 / quiet.latency.p99).toFixed(1)
    const rate = (result: AutocannonResult) => result.requests.average.toFixed(0)
    process.stdout.write([
      "| measurement | req/s | p50 / p99 |",
      "|---|---|---|",
      `| reader (GET account), alone | ${rate(quiet.result)} | ${latencies(quiet.latency)} |`,
      `| reader, during the first walks (${(stormMillis / 1000).toFixed(1)} s; longest wait ${duringFirstWalks.latency.max} ms) | ${(duringFirstWalks.result.requests.total / stormMillis * 1000).toFixed(0)} | ${latencies(duringFirstWalks.latency)} |`,
      `| reader, during pages at random | ${rate(duringRandom.result)} | ${latencies(duringRandom.latency)} |`,
      `| pages at random (1 to ${lastPage.toLocaleString("en")}), 2 connections | ${rate(random)} | ${random.latency.p50} / ${random.latency.p99} ms |`,
      `| reader, during the middle page | ${rate(duringMiddle.result)} | ${latencies(duringMiddle.latency)} |`,
      `| the middle page (${middlePage.toLocaleString("en")}), 2 connections | ${rate(middle)} | ${middle.latency.p50} / ${middle.latency.p99} ms |`,
      `| reader, during the first page | ${rate(duringFirst.result)} | ${latencies(duringFirst.latency)} |`,
      `| the first page, 2 connections | ${rate(firstPages)} | ${firstPages.latency.p50} / ${firstPages.latency.p99} ms |`,
      "",
      `the middle page, first asked after start: ${firstMiddle} ms, then ${secondMiddle} ms`,
      `first walks: ${walkMillis.length} pages (the middle and three quarters down of ${lists.length} lists) in ${stormMillis.toFixed(0)} ms, each ${Math.min(...walkMillis).toFixed(1)} to ${Math.max(...walkMillis).toFixed(1)} ms`,
      ...(events
        ? [`a new time range's first read (page 2 of from=<a time never asked for>, 10 in turn): ${sortedRanges[0]?.toFixed(1)} / ${sortedRanges[4]?.toFixed(1)} / ${sortedRanges[9]?.toFixed(1)} ms (least / median / most)`]
        : []),
      `reader p99 during / alone: ${ratio(duringFirstWalks)} (first walks), ${ratio(duringRandom)} (pages at random), ${ratio(duringMiddle)} (middle page), ${ratio(duringFirst)} (first page); answers other than 2xx or errors: ${failed}`,
      ""
    ].join("\n"))
  } finally {
    if (server !== undefined) await stop(server)
    if (proxy !== undefined) await stop(proxy)
    await postgres?.drop()
    rmSync(directory, { recursive: true, force: true })
  }
}

run().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
