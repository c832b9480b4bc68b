/**
 * What is left of `bench:retention`'s seeded backlog (settled outbox entries and webhook deliveries from 2023, pending
 * entries held behind a failed delivery), read beside the server, not through it.
 *
 * The bench asks `anyLeft` every 250 ms while its reader loads the server, and on SQLite better-sqlite3 answers on the
 * bench's own event loop, the one that times the reader's answers: an answer that arrives while it reads is timed as
 * a wait of the server's. So `anyLeft` reads at most the first row of each settled rows' index (migration 12), about
 * 1 ms with a million of each on a file; `count` walks every row, 410 to 500 ms there, and every 250 ms it held the
 * bench's loop for 44% of the first pass, its longest waits of 700 ms and more (docs/benchmarks.md). `count` is for
 * before and after the reader only.
 */
import { Outbox } from "@custody-relay/core"
import Database from "better-sqlite3"
import pg from "pg"

/** The seeded settled rows were last updated in 2023; the demo's own settle meanwhile, and are kept. */
const SEEDED_BEFORE = "2024"

/**
 * Whether any seeded settled row is left: the settled rows' index predicates as literals, so SQLite sees that the
 * partial indexes answer it (as SettledRows writes them). The seeding writes only `deliverWebhook` entries.
 */
export const ANY_LEFT = `select (exists (select 1 from outbox_entries where state <> 'pending'
    and kind in (${Outbox.deletedOnceSettled.map((kind) => `'${kind}'`).join(", ")}) and updated_at < '${SEEDED_BEFORE}')
  or exists (select 1 from webhook_deliveries where state <> 'pending' and updated_at < '${SEEDED_BEFORE}')) as "anyLeft"`

/** The seeded settled entries and deliveries left, and pending entries: every row of each, see the module's comment. */
export const COUNTS = `select (select count(*) from outbox_entries where state <> 'pending' and updated_at < '${SEEDED_BEFORE}') as entries,
    (select count(*) from webhook_deliveries where state <> 'pending' and updated_at < '${SEEDED_BEFORE}') as deliveries,
    (select count(*) from outbox_entries where state = 'pending') as pending`

export interface Counts {
  readonly entries: number
  readonly deliveries: number
  readonly pending: number
}

export interface SeededBacklog {
  readonly anyLeft: () => Promise<boolean>
  readonly count: () => Promise<Counts>
  readonly close: () => Promise<void>
}

/** The backlog in the SQLite `file`, or on PostgreSQL at `url` when given. */
export const seededBacklog = async (file: string, url: string | undefined): Promise<SeededBacklog> => {
  if (url === undefined) {
    // A connection per read: one kept open across the server's checkpoints was seen to go on reading what it first saw.
    const read = <A>(statement: string) => {
      const db = new Database(file, { readonly: true })
      try {
        return db.prepare<[], A>(statement).get()!
      } finally {
        db.close()
      }
    }
    return {
      anyLeft: async () => read<{ anyLeft: number }>(ANY_LEFT).anyLeft === 1,
      count: async () => read<Counts>(COUNTS),
      close: async () => undefined
    }
  }
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  return {
    anyLeft: async () => (await client.query<{ anyLeft: boolean }>(ANY_LEFT)).rows[0]?.anyLeft === true,
    count: async () => {
      const { rows: [row] } = await client.query<{ entries: string; deliveries: string; pending: string }>(COUNTS)
      return { entries: Number(row?.entries), deliveries: Number(row?.deliveries), pending: Number(row?.pending) }
    },
    close: () => client.end()
  }
}
