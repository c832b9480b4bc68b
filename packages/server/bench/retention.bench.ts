/**
 * `pnpm --filter @custody-relay/server run bench:retention`: what the housekeeping's first pass after an upgrade
 * costs every other request (core Retention): a server on a SQLite file (or PostgreSQL, BENCH_PG_URL) whose tables
 * hold BENCH_ROWS settled outbox entries and as many settled webhook deliveries (1,000,000 each by default, settled in
 * 2023, written straight into the database between two starts) and a tenth as many pending ones held behind a failed
 * delivery, which are kept. Measures a reader (GET account, 10 connections) from the start of a server that keeps
 * everything (retention 0), then from the start of one with the default retention while its housekeeping deletes the
 * settled rows, until they are gone, and after; both from a cold start, so the comparison is the deletion's alone.
 * Prints the readers' latencies, how long the deletion took and what is left. Asserts nothing.
 *
 * BENCH_RELAY=built runs dist/main.js with node (run `pnpm build` first); else from source (BenchProcess.fromSource).
 * BENCH_DURATION (seconds of the reader with nothing to delete, and after, default 20).
 */
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import Database from "better-sqlite3"
import pg from "pg"
import { autocannon, demoOf, grab, type Latency, postgresDatabase, READY, relayCommand, startServer, stopGently, timedFinely } from "./BenchProcess.js"
import { seededBacklog } from "./SeededBacklog.js"

const rows = Number(process.env["BENCH_ROWS"] ?? 1_000_000)
const duration = Number(process.env["BENCH_DURATION"] ?? 20)
const built = process.env["BENCH_RELAY"] === "built"
const pgUrl = process.env["BENCH_PG_URL"]
const command = relayCommand(built)
const stop = stopGently

/** A delivery's body, about the size of a transaction event's. */
const PAYLOAD = JSON.stringify({ id: "0".repeat(36), type: "transaction.completed", data: { note: "x".repeat(420) } })
const HELD = "9999-12-31T23:59:59.999Z"
const HELD_LANE = "00000000-0000-7000-a000-000000000000"

/** The seeding statements, per engine: `n` counts rows, `at` is the instant of row n (in 2023, one ms apart). */
const seeding = (engine: "sqlite" | "postgres") => {
  const id = (part: string) =>
    engine === "sqlite" ? `printf('00000000-0000-7000-${part}-%012x', i)` : `'00000000-0000-7000-${part}-' || lpad(to_hex(i), 12, '0')`
  const at = engine === "sqlite"
    ? "strftime('%Y-%m-%dT%H:%M:%fZ', 1700000000 + i / 1000.0, 'unixepoch')"
    : `to_char(to_timestamp(1700000000 + i / 1000.0) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
  const p = (n: number) => (engine === "sqlite" ? "?" : `$${n}`)
  const entries = (state: string, part: string, lane: string, due: string) => `
    insert into outbox_entries (id, kind, client_id, subject_id, lane, state, attempts, next_attempt_at, leased_until,
      last_error, created_at, updated_at)
    select ${id(part)}, 'deliverWebhook', ${p(1)}, ${id("9000")}, ${lane}, '${state}', 1, ${due}, null, null, ${at}, ${at}`
  return {
    settledEntries: entries("done", "8000", "null", at),
    heldEntries: entries("pending", "b000", `'${HELD_LANE}'`, `'${HELD}'`),
    settledDeliveries: `
      insert into webhook_deliveries (id, subscription_id, client_id, event_id, entity_id, event_at, payload, state,
        attempts, last_status, last_error, last_latency_millis, created_at, updated_at)
      select ${id("9000")}, ${p(2)}, ${p(1)}, ${id("c000")}, ${id("d000")}, ${at}, ${p(3)}, 'delivered', 1, 204, null, 12, ${at}, ${at}`
  }
}

const seedSqlite = (file: string, accountId: string) => {
  const db = new Database(file)
  try {
    const { client_id: clientId } = db.prepare("select client_id from accounts where id = ?").get(accountId) as { client_id: string }
    const statements = seeding("sqlite")
    const series = (count: number) => `with recursive n(i) as (select 1 union all select i + 1 from n where i < ${count})`
    db.transaction(() => {
      db.prepare(`${series(rows)} ${statements.settledEntries} from n`).run(clientId)
      db.prepare(`${series(rows / 10)} ${statements.heldEntries} from n`).run(clientId)
      db.prepare(`${series(rows)} ${statements.settledDeliveries} from n`).run(clientId, HELD_LANE, PAYLOAD)
    })()
    // The seeding's log copied back and emptied, as a database long in service has it: left behind, the server's
    // first commits would copy back gigabytes and the reader would measure the seeding.
    db.pragma("wal_checkpoint(TRUNCATE)")
  } finally {
    db.close()
  }
}

const seedPostgres = async (url: string, accountId: string) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows: [account] } = await client.query<{ client_id: string }>("select client_id from accounts where id = $1", [accountId])
    const clientId = account!.client_id
    const statements = seeding("postgres")
    const series = (from: number, to: number) => `from generate_series(${from}::bigint, ${to}::bigint) as i`
    for (let start = 1; start <= rows; start += 100_000) {
      const end = Math.min(rows, start + 99_999)
      await client.query(`${statements.settledEntries} ${series(start, end)}`, [clientId])
      await client.query(`${statements.settledDeliveries} ${series(start, end)}`, [clientId, HELD_LANE, PAYLOAD])
    }
    await client.query(`${statements.heldEntries} ${series(1, rows / 10)}`, [clientId])
    await client.query("vacuum analyze outbox_entries")
    await client.query("vacuum analyze webhook_deliveries")
  } finally {
    await client.end()
  }
}

const latencies = (latency: Latency) => `${latency.p50} / ${latency.p99} ms (longest ${latency.max} ms)`

const run = async () => {
  const directory = mkdtempSync(join(tmpdir(), "relay-retention-"))
  const file = join(directory, "relay.db")
  const postgres = pgUrl === undefined ? undefined : await postgresDatabase(pgUrl, `relay_retention_${process.pid}`)
  const env = { RELAY_DATABASE: postgres?.url ?? file, RELAY_RATE_LIMIT_STORE: "memory", PORT: "0", RELAY_LOG_LEVEL: "Info", RELAY_RATE_LIMIT: "1000000000" }
  const keepingAll = { RELAY_OUTBOX_RETENTION_SECONDS: "0", RELAY_WEBHOOK_DELIVERY_RETENTION_SECONDS: "0" }
  let server: ChildProcess | undefined
  try {
    const first = await startServer({ command, logFile: join(directory, "first.log"), ready: READY, env: { ...env, ...keepingAll, RELAY_DEMO: "always" } })
    const demo = demoOf(first.output)
    await stop(first.child)
    const seedStarted = performance.now()
    if (postgres === undefined) seedSqlite(file, demo.account)
    else await seedPostgres(postgres.url, demo.account)
    const seeded = ((performance.now() - seedStarted) / 1000).toFixed(1)
    const backlog = await seededBacklog(file, postgres?.url)
    const before = await backlog.count()
    process.stdout.write(`\n${cpus().length} CPUs, ${cpus()[0]?.model ?? "?"}; node ${process.version}; relay ${built ? "built, with node" : "from source"}; ${postgres === undefined ? "SQLite file" : "PostgreSQL 15 (local)"}; seeded in ${seeded} s: ${before.entries.toLocaleString("en")} settled outbox entries, ${before.deliveries.toLocaleString("en")} settled deliveries, ${before.pending.toLocaleString("en")} pending\n\n`)

    const serve = async (name: string, extra: Record<string, string>) => {
      const started = await startServer({ command, logFile: join(directory, `${name}.log`), ready: READY, env: { ...env, ...extra, RELAY_DEMO: "never" } })
      server = started.child
      const url = grab(started.output, /listening on (http:\/\/\S+)/)
      return (seconds: number) => timedFinely(autocannon({ url: `${url}/relay/v1/accounts/${demo.account}`, connections: 10, duration: seconds, headers: demo.headers }))
    }
    const keeping = await serve("keeping", keepingAll)
    const quiet = await keeping(duration).done
    await stop(server!)

    // The default retention: its housekeeping starts at the first lease, right after the start.
    const pruneStarted = performance.now()
    const pruning = await serve("pruning", {})
    const reader = pruning(3_600)
    while (await backlog.anyLeft() && performance.now() - pruneStarted < 3_600_000) {
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    const pruneSeconds = (performance.now() - pruneStarted) / 1000
    reader.stop()
    const during = await reader.done
    // Counted between the readers: a count walks every row (SeededBacklog).
    const left = await backlog.count()
    const after = await pruning(duration).done
    await backlog.close()
    const deleted = before.entries + before.deliveries - left.entries - left.deliveries
    const failed = [quiet, during, after].reduce((sum, { result }) => sum + result.non2xx + result.errors, 0)
    process.stdout.write([
      "| measurement | req/s | p50 / p99 |",
      "|---|---|---|",
      `| reader (GET account), from the start, retention off: nothing deleted | ${quiet.result.requests.average.toFixed(0)} | ${latencies(quiet.latency)} |`,
      `| reader, from the start while the first pass deletes (${pruneSeconds.toFixed(1)} s) | ${(during.result.requests.total / pruneSeconds).toFixed(0)} | ${latencies(during.latency)} |`,
      `| reader, after | ${after.result.requests.average.toFixed(0)} | ${latencies(after.latency)} |`,
      "",
      `deleted ${deleted.toLocaleString("en")} rows in ${pruneSeconds.toFixed(1)} s from the start (${(deleted / pruneSeconds).toFixed(0)} a second); left: ${left.entries} settled entries, ${left.deliveries} settled deliveries, ${left.pending.toLocaleString("en")} pending entries (of ${before.pending.toLocaleString("en")})`,
      `reader p99 while deleting / with nothing to delete: ${(during.latency.p99 / quiet.latency.p99).toFixed(1)}; answers other than 2xx or errors: ${failed}`,
      ""
    ].join("\n"))
  } finally {
    if (server !== undefined) await stop(server)
    await postgres?.drop()
    rmSync(directory, { recursive: true, force: true })
  }
}

run().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
