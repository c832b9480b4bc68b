/**
 * The package's migrations, in order, as modules rather than files found on disk: they travel inside a bundle
 * and need no file system. Names sort in the order they run; a new migration is a new module appended here.
 */
import type { Kysely } from "kysely"
import type { Migration, MigrationProvider } from "kysely/migration"
import type { EngineName } from "../SqlEngine.js"
import * as Records from "./0001_records.js"
import * as ListIndexes from "./0002_list_indexes.js"
import * as RateLimitWindows from "./0003_rate_limit_windows.js"
import * as TransactionCounts from "./0004_transaction_counts.js"
import * as CommandsEventsOutbox from "./0005_commands_events_outbox.js"
import * as SettingsAndKeyBudgets from "./0006_settings_and_key_budgets.js"
import * as Webhooks from "./0007_webhooks.js"
import * as TransactionListChanges from "./0008_transaction_list_changes.js"
import * as OutboxEntryLanes from "./0009_outbox_entry_lanes.js"
import * as ListChangesAtCommit from "./0010_list_changes_at_commit.js"
import * as OutboxLaneAndPoolIndexes from "./0011_outbox_lane_and_pool_indexes.js"
import * as SettledRowIndexes from "./0012_settled_row_indexes.js"

type Up = (db: Kysely<unknown>, engine: EngineName) => Promise<void>

const ordered: ReadonlyArray<readonly [string, Up]> = [
  ["0001_records", Records.up],
  ["0002_list_indexes", ListIndexes.up],
  ["0003_rate_limit_windows", RateLimitWindows.up],
  ["0004_transaction_counts", TransactionCounts.up],
  ["0005_commands_events_outbox", CommandsEventsOutbox.up],
  ["0006_settings_and_key_budgets", SettingsAndKeyBudgets.up],
  ["0007_webhooks", Webhooks.up],
  ["0008_transaction_list_changes", TransactionListChanges.up],
  ["0009_outbox_entry_lanes", OutboxEntryLanes.up],
  ["0010_list_changes_at_commit", ListChangesAtCommit.up],
  ["0011_outbox_lane_and_pool_indexes", OutboxLaneAndPoolIndexes.up],
  ["0012_settled_row_indexes", SettledRowIndexes.up]
]

/** Migration names, oldest first. */
export const names: ReadonlyArray<string> = ordered.map(([name]) => name)

/** Where kysely's Migrator records what ran: names of our own, so an embedder's kysely migrations never meet ours. */
export const MIGRATION_TABLE = "custody_relay_migration"
export const MIGRATION_LOCK_TABLE = "custody_relay_migration_lock"

/** The migrations for one engine; no `down`: the schema only moves forward. */
export const providerFor = (engine: EngineName): MigrationProvider => ({
  getMigrations: () =>
    Promise.resolve(
      Object.fromEntries(
        ordered.map(([name, up]): [string, Migration] => [name, { up: (db: Kysely<unknown>) => up(db, engine) }])
      )
    )
})
