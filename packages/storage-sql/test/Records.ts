/**
 * Records for the storage tests, built directly (not through the operations) so a test can put any shape into
 * storage: edge-case names, equal timestamps, every status. Ids are random UUIDs, so suites sharing one database
 * never meet; timestamps are explicit, so the expected order is known.
 */
import { randomUUID } from "node:crypto"
import {
  type Account,
  type ApiUser,
  type Client,
  type DomainEvent,
  type Idempotency,
  Ids,
  type Ledger,
  type Outbox,
  Money,
  Timestamp,
  Transaction,
  type WhitelistedAddress
} from "@custody-relay/core"

/** 2026-01-01T00:00:00.000Z plus `offset` milliseconds. */
export const at = (offset: number): Timestamp.Timestamp => Timestamp.fromMillis(Date.UTC(2026, 0, 1) + offset)

/** An approval of the account `entityId` by the operator at `at(n)`, an id of its own. */
export const accountApproved = (clientId: Ids.ClientId, entityId: string, n: number): DomainEvent.DomainEvent => ({
  id: randomUUID(),
  type: "account.approved",
  clientId,
  entityType: "account",
  entityId,
  statusBefore: "pending_approval",
  statusAfter: "approved",
  actor: { kind: "operator" },
  at: at(n),
  data: {}
})

export const client = (overrides: Partial<Client.Client> = {}): Client.Client => ({
  id: Ids.ClientId.make(randomUUID()),
  name: "Client",
  createdAt: at(0),
  ...overrides
})

export const apiUser = (clientId: Ids.ClientId | null, overrides: Partial<ApiUser.ApiUser> = {}): ApiUser.ApiUser => ({
  id: Ids.ApiUserId.make(randomUUID()),
  clientId,
  name: "Approver",
  keyId: `crk_${randomUUID().replaceAll("-", "")}`,
  secretHash: "ab".repeat(32),
  permissions: ["View custody account", "Approve transaction"],
  revokedAt: null,
  createdAt: at(0),
  updatedAt: at(0),
  ...overrides
})

export const account = (clientId: Ids.ClientId, overrides: Partial<Account.Account> = {}): Account.Account => ({
  id: Ids.AccountId.make(randomUUID()),
  clientId,
  name: `Treasury ${randomUUID().slice(0, 8)}`,
  description: "",
  workspace: "custody",
  role: "custody",
  assetId: "ETH",
  chainType: "ethereum",
  address: null,
  status: "active",
  availableBalance: Money.canonical("0"),
  requiredApprovals: 1,
  createdAt: at(0),
  updatedAt: at(0),
  ...overrides
})

export const whitelisted = (
  clientId: Ids.ClientId,
  overrides: Partial<WhitelistedAddress.WhitelistedAddress> = {}
): WhitelistedAddress.WhitelistedAddress => ({
  id: Ids.WhitelistedAddressId.make(randomUUID()),
  clientId,
  providerId: `provider-${randomUUID()}`,
  name: "Exchange",
  address: `0x${randomUUID().replaceAll("-", "")}`,
  description: "",
  status: "APPROVED",
  assetType: "ETH",
  createdAt: at(0),
  updatedAt: at(0),
  ...overrides
})

export const transaction = (
  source: Account.Account,
  overrides: Partial<Transaction.Transaction> = {}
): Transaction.Transaction => ({
  id: Ids.TransactionId.make(randomUUID()),
  clientId: source.clientId,
  sourceAccountId: source.id,
  destinationId: randomUUID(),
  destinationType: "external",
  destinationAddress: "0xdestination",
  amount: Money.canonical("1.5"),
  assetType: source.assetId,
  networkFee: Money.canonical("0.001"),
  feeAssetId: source.assetId,
  reserved: Money.canonical("1.501"),
  status: "AWAITING_SIGNATURE",
  subStatus: null,
  requiredApprovals: 1,
  createdBy: { apiUserId: Ids.ApiUserId.make(randomUUID()), name: "Initiator" },
  decisions: [],
  providerTransactionId: null,
  approvedAt: null,
  providerApprovedAt: null,
  createdAt: at(0),
  updatedAt: at(0),
  ...overrides
})

export const ledgerEntry = (account: Account.Account, overrides: Partial<Ledger.LedgerEntry> = {}): Ledger.LedgerEntry => ({
  id: Ids.LedgerEntryId.make(randomUUID()),
  clientId: account.clientId,
  accountId: account.id,
  kind: "deposit",
  direction: "credit",
  amount: Money.canonical("10"),
  transactionId: null,
  createdAt: at(0),
  ...overrides
})

export const idempotencyClaim = (
  overrides: Partial<Idempotency.IdempotencyClaim> = {}
): Idempotency.IdempotencyClaim => ({
  scope: `crk_${randomUUID().replaceAll("-", "")}`,
  key: randomUUID(),
  fingerprint: "fingerprint",
  createdAt: at(0),
  expiresAt: at(86_400_000),
  ...overrides
})

export const outboxEntry = (clientId: Ids.ClientId, overrides: Partial<Outbox.OutboxEntry> = {}): Outbox.OutboxEntry => ({
  id: randomUUID(),
  kind: "submitTransfer",
  clientId,
  subjectId: randomUUID(),
  lane: null,
  state: "pending",
  attempts: 0,
  nextAttemptAt: at(0),
  leasedUntil: null,
  lastError: null,
  createdAt: at(0),
  updatedAt: at(0),
  ...overrides
})

/** Every status of the transaction table, so list tests cover each group. */
export const transactionStatuses = Transaction.statuses
