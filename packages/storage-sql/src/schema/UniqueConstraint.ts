/**
 * Every uniqueness rule of the schema, by name. The migrations create them from this list and the error
 * classification reads it back, so a `StorageConstraintViolated` names the same constraint on every engine (and
 * the same names the memory store uses where it has the rule: `<table>_pkey`, `api_users_key_id`). SQLite reports
 * a violated column list, not a name; PostgreSQL reports the name.
 */
import type { Database } from "./Database.js"

export interface UniqueConstraint {
  readonly name: string
  readonly table: keyof Database
  readonly columns: ReadonlyArray<string>
  /** A partial index's predicate, in SQL both engines read the same way. */
  readonly where?: string
}

export const primaryKeys: ReadonlyArray<UniqueConstraint> = [
  { name: "clients_pkey", table: "clients", columns: ["id"] },
  { name: "api_users_pkey", table: "api_users", columns: ["id"] },
  { name: "accounts_pkey", table: "accounts", columns: ["id"] },
  { name: "whitelisted_addresses_pkey", table: "whitelisted_addresses", columns: ["id"] },
  { name: "transactions_pkey", table: "transactions", columns: ["id"] },
  { name: "ledger_entries_pkey", table: "ledger_entries", columns: ["id"] },
  { name: "idempotency_keys_pkey", table: "idempotency_keys", columns: ["scope", "key"] },
  { name: "outbox_entries_pkey", table: "outbox_entries", columns: ["id"] },
  { name: "relay_settings_pkey", table: "relay_settings", columns: ["name"] },
  { name: "webhook_subscriptions_pkey", table: "webhook_subscriptions", columns: ["id"] },
  { name: "webhook_deliveries_pkey", table: "webhook_deliveries", columns: ["id"] },
  { name: "rate_limit_windows_pkey", table: "rate_limit_windows", columns: ["key", "window_start"] }
]

/** Unique indexes beyond the primary keys: each backs a duplicate rule the core checks first. */
export const uniqueIndexes: ReadonlyArray<UniqueConstraint> = [
  { name: "api_users_key_id", table: "api_users", columns: ["key_id"] },
  /** ACC-CREATE-3: one account per identity among those not rejected. */
  {
    name: "accounts_identity",
    table: "accounts",
    columns: ["client_id", "name", "workspace", "asset_id", "role"],
    where: "status <> 'rejected'"
  },
  /** One live address-book entry per asset and address. */
  {
    name: "whitelisted_addresses_destination",
    table: "whitelisted_addresses",
    columns: ["client_id", "asset_type", "address"],
    where: "status <> 'ARCHIVED'"
  }
]

const all = [...primaryKeys, ...uniqueIndexes]

const LISTED = "constraint failed: "

/** The constraint SQLite means by "UNIQUE constraint failed: table.a, table.b" (or by an index name). */
export const fromSqliteMessage = (message: string): string => {
  const named = /index '([^']+)'/.exec(message)
  if (named?.[1] !== undefined) return named[1]
  const after = message.indexOf(LISTED)
  const listed = after === -1 ? "" : message.slice(after + LISTED.length)
  if (listed === "") return "unknown"
  const qualified = listed.split(",").map((column) => column.trim())
  const table = qualified[0]?.split(".")[0]
  const columns = qualified.map((column) => column.slice(column.indexOf(".") + 1))
  const found = all.find((c) => c.table === table && c.columns.join(",") === columns.join(","))
  return found?.name ?? `${table}(${columns.join(", ")})`
}
