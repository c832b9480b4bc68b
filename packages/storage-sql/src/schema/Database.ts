/**
 * The tables as kysely sees them after the latest migration: one interface per table, columns in snake_case,
 * typed in the domain's terms (branded ids, literal statuses) because the adapter is the only writer and writes
 * only records the core made.
 *
 * Column choices that matter:
 * - Money columns hold canonical decimal strings: TEXT in SQLite, unconstrained NUMERIC in PostgreSQL. Both give
 *   back exactly the digits written (PostgreSQL may add trailing zeros, which `Money.canonical` removes on read).
 * - Timestamps are the core's ISO-8601 UTC strings with milliseconds, stored as text so that the text order is
 *   the time order and the row order matches `Storage.compareNewestFirst` byte for byte.
 * - `*_folded` columns hold the JavaScript lower-case of the searchable fields, so the account search means what
 *   the memory store means (`toLowerCase` is Unicode-aware; SQL `lower` and `LIKE` are not, or not the same).
 * - `transactions.status_group` is `Transaction.groupOf[status]`, stored so a group filter is one index range.
 * - JSON columns (`permissions`, `decisions`) hold small arrays that are always read and written whole.
 */
import type { Generated } from "kysely"
import type {
  Account,
  Ids,
  Ledger,
  Timestamp,
  Transaction,
  WhitelistedAddress
} from "@custody-relay/core"

export interface ClientsTable {
  readonly id: Ids.ClientId
  readonly name: string
  readonly created_at: Timestamp.Timestamp
}

export interface ApiUsersTable {
  readonly id: Ids.ApiUserId
  readonly client_id: Ids.ClientId | null
  readonly name: string
  readonly key_id: string
  readonly secret_hash: string
  /** JSON array of permission names. */
  readonly permissions: string
  readonly revoked_at: Timestamp.Timestamp | null
  /** JSON `{limit, windowSeconds}`: the API user's own request budget; null for the deployment's. */
  readonly rate_limit: string | null
  readonly created_at: Timestamp.Timestamp
  readonly updated_at: Timestamp.Timestamp
}

export interface AccountsTable {
  readonly id: Ids.AccountId
  readonly client_id: Ids.ClientId
  readonly name: string
  readonly name_folded: string
  readonly description: string
  readonly workspace: Account.Workspace
  readonly role: Account.AccountRole
  readonly asset_id: string
  readonly asset_id_folded: string
  readonly chain_type: string
  readonly address: string | null
  readonly address_folded: string | null
  readonly status: Account.AccountStatus
  /** Canonical decimal written; NUMERIC in PostgreSQL may read back with trailing zeros. */
  readonly available_balance: string
  readonly required_approvals: number
  readonly created_at: Timestamp.Timestamp
  readonly updated_at: Timestamp.Timestamp
}

export interface WhitelistedAddressesTable {
  readonly id: Ids.WhitelistedAddressId
  readonly client_id: Ids.ClientId
  readonly provider_id: string
  readonly name: string
  readonly address: string
  readonly description: string
  readonly status: WhitelistedAddress.WhitelistStatus
  readonly asset_type: string
  readonly created_at: Timestamp.Timestamp
  readonly updated_at: Timestamp.Timestamp
}

export interface TransactionsTable {
  readonly id: Ids.TransactionId
  readonly client_id: Ids.ClientId
  readonly source_account_id: Ids.AccountId
  readonly destination_id: string
  readonly destination_type: Transaction.DestinationType
  readonly destination_address: string
  readonly amount: string
  readonly asset_type: string
  readonly network_fee: string
  readonly fee_asset_id: string
  readonly reserved: string
  readonly status: Transaction.TransactionStatus
  readonly status_group: Transaction.StatusGroup
  readonly sub_status: string | null
  readonly required_approvals: number
  readonly created_by_api_user_id: Ids.ApiUserId
  readonly created_by_name: string
  /** JSON array of `Transaction.Decision`. */
  readonly decisions: string
  readonly provider_transaction_id: string | null
  readonly approved_at: Timestamp.Timestamp | null
  readonly provider_approved_at: Timestamp.Timestamp | null
  readonly created_at: Timestamp.Timestamp
  readonly updated_at: Timestamp.Timestamp
}

export interface LedgerEntriesTable {
  readonly id: Ids.LedgerEntryId
  readonly client_id: Ids.ClientId
  readonly account_id: Ids.AccountId
  readonly kind: Ledger.LedgerEntryKind
  readonly direction: Ledger.LedgerEntry["direction"]
  readonly amount: string
  readonly transaction_id: string | null
  readonly created_at: Timestamp.Timestamp
}

/** A command's idempotency key and, once its unit commits, its result (Idempotency). */
export interface IdempotencyKeysTable {
  readonly scope: string
  readonly key: string
  readonly fingerprint: string
  readonly result: string | null
  readonly created_at: Timestamp.Timestamp
  readonly expires_at: Timestamp.Timestamp
}

/** One domain event; `actor` and `data` are JSON text. `position` is the engine's sequence (BIGINT comes back as a string). */
export interface DomainEventsTable {
  readonly position: Generated<number | string>
  readonly id: string
  readonly type: string
  readonly client_id: string | null
  readonly entity_type: string
  readonly entity_id: string
  readonly status_before: string | null
  readonly status_after: string | null
  readonly actor: string
  readonly at: string
  readonly data: string
}

export interface WebhookSubscriptionsTable {
  readonly id: string
  readonly client_id: string
  readonly url: string
  /** JSON array of event types; empty: every type. */
  readonly event_types: string
  /** 1 or 0 (SQLite has no boolean). */
  readonly enabled: number
  readonly disabled_reason: string | null
  readonly secret: string
  readonly previous_secret: string | null
  readonly previous_secret_until: string | null
  /** 1 while its deliveries are held behind a failed one (migration 11), else 0. */
  readonly deliveries_held: number
  readonly created_at: string
  readonly updated_at: string
}

export interface WebhookDeliveriesTable {
  readonly id: string
  readonly subscription_id: string
  readonly client_id: string
  readonly event_id: string
  readonly entity_id: string
  readonly event_at: string
  readonly payload: string
  readonly state: string
  readonly attempts: number
  readonly last_status: number | null
  readonly last_error: string | null
  readonly last_latency_millis: number | null
  readonly created_at: string
  readonly updated_at: string
}

export interface OutboxEntriesTable {
  readonly id: string
  readonly kind: string
  readonly client_id: string
  readonly subject_id: string
  readonly lane: string | null
  readonly state: string
  readonly attempts: number
  readonly next_attempt_at: string
  readonly leased_until: string | null
  readonly last_error: string | null
  readonly created_at: string
  readonly updated_at: string
}

/** One fixed window of one rate-limit key (RateLimiter): shared by every node that uses the database. */
export interface RateLimitWindowsTable {
  readonly key: string
  /** Unix milliseconds; BIGINT in PostgreSQL, which the driver returns as a string. */
  readonly window_start: number | string
  /** Unix milliseconds when the window ends: the purge deletes windows that ended. */
  readonly window_end: number | string
  readonly count: number
}

/**
 * How many transactions one client has from one source account in one asset and status group: list totals are
 * sums of these rows (migration 4). Kept by the store in the same unit of work as the transactions themselves.
 */
export interface TransactionCountsTable {
  readonly client_id: Ids.ClientId
  readonly source_account_id: Ids.AccountId
  readonly asset_type: string
  readonly status_group: Transaction.StatusGroup
  readonly count: number
}

export interface Database {
  readonly clients: ClientsTable
  readonly api_users: ApiUsersTable
  readonly accounts: AccountsTable
  readonly whitelisted_addresses: WhitelistedAddressesTable
  readonly transactions: TransactionsTable
  readonly ledger_entries: LedgerEntriesTable
  readonly idempotency_keys: IdempotencyKeysTable
  readonly domain_events: DomainEventsTable
  readonly outbox_entries: OutboxEntriesTable
  readonly relay_settings: { readonly name: string; readonly value: string }
  readonly webhook_subscriptions: WebhookSubscriptionsTable
  readonly webhook_deliveries: WebhookDeliveriesTable
  readonly rate_limit_windows: RateLimitWindowsTable
  readonly transaction_counts: TransactionCountsTable
}
