/**
 * Custody accounts: vault accounts that hold one asset in one workspace. The record as stored, the shapes the
 * interface shows (ACC-SHAPE-1, ACC-SHAPE-2), the create input (ACC-CREATE-2) and the state table. An account is
 * created `pending_approval` with no address; approval or rejection is final; an approved account becomes
 * `active` when the custody provider assigns its deposit address (our profile of ACC-ACTIVE-1).
 */
import { Schema, Struct } from "effect"
import { AccountId, ClientId } from "./Ids.js"
import { FilterText, FilterValues } from "./Input.js"
import { DecimalString } from "./Money.js"
import * as StateMachine from "./StateMachine.js"
import { Text } from "./Text.js"
import { Timestamp } from "./Timestamp.js"

export const workspaces = ["custody", "transactional"] as const
export const Workspace = Schema.Literals(workspaces)
export type Workspace = typeof Workspace.Type

export const roles = ["custody", "staking"] as const
export const AccountRole = Schema.Literals(roles)
export type AccountRole = typeof AccountRole.Type

export const statuses = ["pending_approval", "approved", "rejected", "active"] as const
export const AccountStatus = Schema.Literals(statuses)
export type AccountStatus = typeof AccountStatus.Type

export const machine = StateMachine.make({
  entity: "account",
  states: statuses,
  initial: "pending_approval",
  transitions: [
    { from: "pending_approval", event: "approve", to: "approved" },
    { from: "pending_approval", event: "reject", to: "rejected" },
    { from: "approved", event: "activate", to: "active" }
  ]
} as const)
export type AccountEvent = (typeof machine.transitions)[number]["event"]

export const Account = Schema.Struct({
  id: AccountId,
  clientId: ClientId,
  name: Schema.String,
  description: Schema.String,
  workspace: Workspace,
  role: AccountRole,
  assetId: Schema.String,
  chainType: Schema.String,
  address: Schema.NullOr(Schema.String),
  status: AccountStatus,
  availableBalance: DecimalString,
  /** Distinct approvals a transaction from this account needs: its approval policy. */
  requiredApprovals: Schema.Int,
  createdAt: Timestamp,
  updatedAt: Timestamp
})
export type Account = typeof Account.Type

/** Only an active account can send or receive (TXN-VAL-3, TXN-DEST-2). */
export const isActive = (account: Account): boolean => account.status === "active"

/** Body of POST /relay/v1/accounts (ACC-CREATE-2, LIM-SIZE-1). */
export const CreateAccountInput = Schema.Struct({
  name: Text(3, 50),
  workspace: Workspace,
  assetId: Schema.String.check(Schema.isMaxLength(64)),
  description: Schema.optionalKey(Text(0, 255)),
  role: Schema.optionalKey(AccountRole)
}).annotate({ examples: [{ name: "Treasury BTC", workspace: "custody", assetId: "BTC", description: "Cold storage" }] })
export type CreateAccountInput = typeof CreateAccountInput.Type

/** What makes two accounts "identical" for ACC-CREATE-3. The description is not part of an account's identity. */
export interface AccountIdentity {
  readonly name: string
  readonly workspace: Workspace
  readonly assetId: string
  readonly role: AccountRole
}

/** List and get record (ACC-SHAPE-1): the record without its internal fields, plus its CAD value. */
export const AccountView = Account.mapFields(Struct.omit(["clientId", "requiredApprovals"])).mapFields(
  Struct.assign({ availableBalanceCad: Schema.String })
)
export type AccountView = typeof AccountView.Type

/** The create response carries exactly these nine fields (ACC-SHAPE-2). */
export const AccountCreated = Account.mapFields(
  Struct.pick(["id", "name", "workspace", "assetId", "role", "address", "description", "status", "createdAt"])
)
export type AccountCreated = typeof AccountCreated.Type

/** Body of approve and reject. */
export const AccountDecisionInput = Schema.Struct({ accountId: Schema.String.check(Schema.isMaxLength(64)) })
export type AccountDecisionInput = typeof AccountDecisionInput.Type

/** Answer of approve and reject (ACC-APPR-1). */
export const AccountDecision = Schema.Struct({ accountId: AccountId, status: AccountStatus })
export type AccountDecision = typeof AccountDecision.Type

/** Filters of GET /relay/v1/accounts (ACC-LIST-1); every given filter must hold for every returned record. */
export interface AccountFilter {
  /** Case-insensitive substring of the name, the asset id or the deposit address. */
  readonly search?: string
  readonly assetId?: string
  readonly workspace?: Workspace
  readonly roles?: ReadonlyArray<AccountRole>
  readonly status?: AccountStatus
}

/** An AccountFilter as an untyped caller passes it, checked as HTTP checks its query (the Promise facade decodes it). */
export const AccountFilterInput = Schema.Struct({
  search: Schema.optionalKey(FilterText(255)),
  assetId: Schema.optionalKey(FilterText(64)),
  workspace: Schema.optionalKey(Workspace),
  roles: Schema.optionalKey(FilterValues(AccountRole)),
  status: Schema.optionalKey(AccountStatus)
})

export const toView = (account: Account, availableBalanceCad: string): AccountView => ({
  id: account.id,
  name: account.name,
  description: account.description,
  workspace: account.workspace,
  role: account.role,
  assetId: account.assetId,
  chainType: account.chainType,
  address: account.address,
  status: account.status,
  availableBalance: account.availableBalance,
  availableBalanceCad,
  createdAt: account.createdAt,
  updatedAt: account.updatedAt
})

export const toCreated = (account: Account): AccountCreated => ({
  id: account.id,
  name: account.name,
  workspace: account.workspace,
  assetId: account.assetId,
  role: account.role,
  address: account.address,
  description: account.description,
  status: account.status,
  createdAt: account.createdAt
})
