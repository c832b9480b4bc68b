/**
 * Operations on custody accounts: the interface's list, get, create, approve and reject, and the provider and
 * administration steps around them (activation with a deposit address, deposits, the approval policy).
 */
import { Effect, Option } from "effect"
import * as Account from "./Account.js"
import { type Asset, requireAsset } from "./Asset.js"
import { answeredInTime, CustodyProvider } from "./CustodyProvider.js"
import * as DomainEvent from "./DomainEvent.js"
import * as Idempotency from "./Idempotency.js"
import { AccountId, canonicalUuid, Ids, isUuid, LedgerEntryId } from "./Ids.js"
import * as Money from "./Money.js"
import { operation } from "./Operation.js"
import * as Page from "./Page.js"
import { authorize, type ClientPrincipal, type Principal, requireOwned } from "./Principal.js"
import * as Rates from "./Rates.js"
import { RelayConfig, type RelayConfigShape } from "./RelayConfig.js"
import { DuplicateAccount, InvalidAmount, InvalidRequest, NotFound, TransitionNotAllowed } from "./RelayError.js"
import * as StateMachine from "./StateMachine.js"
import * as Storage from "./Storage.js"
import * as Timestamp from "./Timestamp.js"

const toView = (account: Account.Account) =>
  Effect.map(Rates.valueInCad(account.assetId, account.availableBalance), (cad) => Account.toView(account, cad))

/**
 * The id a request names, in its canonical form (see Ids), or a 400 naming the field (GEN: malformed ids are
 * invalid requests, not absent records).
 */
export const requireUuid = (field: string, value: string) =>
  isUuid(value) ? Effect.succeed(canonicalUuid(value)) : Effect.fail(InvalidRequest.field(field, "must be a UUID"))

/** The caller's account with this id, or NotFound whether it is absent or another client's (SCOPE-1). */
export const findOwned = (unit: Storage.StorageUnit, principal: ClientPrincipal, id: string) =>
  Effect.flatMap(unit.getAccount(AccountId.make(id)), requireOwned(principal, "account", id))

const findAny = (unit: Storage.StorageUnit, id: string) =>
  Effect.flatMap(unit.getAccount(AccountId.make(id)), NotFound.unlessFound("account", id))

const step = (account: Account.Account, event: Account.AccountEvent, action: string = event) =>
  StateMachine.transition(Account.machine, account.status, event).pipe(
    Effect.fromResult,
    Effect.mapError(() => new TransitionNotAllowed({ entity: "account", id: account.id, status: account.status, action }))
  )

export const list = operation("Accounts.list")(function*(
  principal: Principal,
  filter: Account.AccountFilter,
  page: Page.PageRequest
) {
  const caller = yield* authorize(principal, "accounts.list")
  const found = yield* Storage.run(Storage.unitForPage(page), (unit) => unit.listAccounts(caller.clientId, filter, page))
  const items = yield* Effect.forEach(found.items, toView)
  return Page.envelope({ items, total: found.total }, page)
})

export const get = operation("Accounts.get")(function*(principal: Principal, id: string) {
  const caller = yield* authorize(principal, "accounts.get")
  id = yield* requireUuid("id", id)
  const account = yield* Storage.run("lookup", (unit) => findOwned(unit, caller, id))
  return yield* toView(account)
})

export const create = operation("Accounts.create")(function*(principal: Principal, input: Account.CreateAccountInput) {
  const caller = yield* authorize(principal, "accounts.create")
  const asset = yield* requireAsset(input.assetId)
  const config = yield* RelayConfig
  const id = AccountId.make(yield* (yield* Ids).next)
  const now = yield* Timestamp.now
  const identity: Account.AccountIdentity = {
    name: input.name,
    workspace: input.workspace,
    assetId: asset.assetId,
    role: input.role ?? "custody"
  }
  return yield* Idempotency.write(Account.AccountCreated, (unit) => createIn(unit, caller, identity, id, input, asset, config, now))
})

/** Creation's unit of work: the identity checked for a duplicate, the account stored pending approval. */
const createIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  caller: ClientPrincipal,
  identity: Account.AccountIdentity,
  id: AccountId,
  input: Account.CreateAccountInput,
  asset: Asset,
  config: RelayConfigShape,
  now: Timestamp.Timestamp
) {
  const existing = yield* DomainEvent.readingAhead(unit, caller.clientId, unit.findAccountByIdentity(caller.clientId, identity))
  if (Option.isSome(existing)) return yield* new DuplicateAccount({ existingAccountId: existing.value.id })
  const account: Account.Account = {
    id,
    clientId: caller.clientId,
    ...identity,
    description: input.description ?? "",
    chainType: asset.chain.chainType,
    address: null,
    status: "pending_approval",
    availableBalance: Money.ZERO,
    requiredApprovals: config.defaultRequiredApprovals,
    createdAt: now,
    updatedAt: now
  }
  yield* unit.insertAccount(account)
  yield* DomainEvent.append(unit, {
    type: "account.created",
    clientId: caller.clientId,
    entityId: id,
    statusAfter: account.status,
    actor: DomainEvent.apiUser(caller),
    data: { name: identity.name, workspace: identity.workspace, assetId: identity.assetId, role: identity.role }
  })
  return Account.toCreated(account)
})

/**
 * The provider's deposit address for an account that may be activated: asked before the unit of work that
 * activates it, so no lock is held while the provider answers (the provider gives one account one address,
 * however often it is asked), and answered in time as a fee estimate is.
 */
const depositAddressFor = (account: Account.Account) =>
  Effect.flatMap(requireAsset(account.assetId), (asset) =>
    CustodyProvider.use((provider) => provider.createDepositAddress(account.id, asset)).pipe(answeredInTime("createDepositAddress")))

/** Gives an approved account its deposit address and makes it active (the provider's step, ACC-ACTIVE-1). */
const activateIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  account: Account.Account,
  address: string,
  actor: DomainEvent.Actor
) {
  const status = yield* step(account, "activate")
  const activated: Account.Account = { ...account, status, address, updatedAt: yield* Timestamp.now }
  yield* unit.updateAccount(activated)
  yield* DomainEvent.append(unit, {
    type: "account.activated",
    clientId: account.clientId,
    entityId: account.id,
    statusBefore: account.status,
    statusAfter: status,
    actor,
    data: { address }
  })
  return activated
})

const decide = (action: "accounts.approve" | "accounts.reject", event: "approve" | "reject") =>
  operation(`Accounts.${event}`)(function*(principal: Principal, input: Account.AccountDecisionInput) {
    const caller = yield* authorize(principal, action)
    const accountId = yield* requireUuid("accountId", input.accountId)
    const replay = yield* Idempotency.earlyReplay(Account.AccountDecision)
    if (Option.isSome(replay)) return replay.value
    const config = yield* RelayConfig
    // With activation on approval the address is asked for first, outside the unit, and only for an account
    // that this approval may activate; a provider failure then refuses the approval and changes nothing.
    let address: string | undefined
    if (event === "approve" && config.activateOnApproval) {
      const account = yield* Storage.run("lookup", (unit) => findOwned(unit, caller, accountId))
      if (Account.machine.transitions.some((t) => t.from === account.status && t.event === "approve")) {
        address = yield* depositAddressFor(account)
      }
    }
    return yield* Idempotency.write(Account.AccountDecision, (unit) => decideIn(unit, event, caller, accountId, address))
  })

/** A decision's unit of work (see `decide`); with an address, the approved account is activated in it too. */
const decideIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  event: "approve" | "reject",
  caller: ClientPrincipal,
  accountId: string,
  address: string | undefined
) {
  const account = yield* DomainEvent.readingAhead(unit, caller.clientId, findOwned(unit, caller, accountId))
  const status = yield* step(account, event)
  const decided: Account.Account = { ...account, status, updatedAt: yield* Timestamp.now }
  yield* unit.updateAccount(decided)
  yield* DomainEvent.append(unit, {
    type: event === "approve" ? "account.approved" : "account.rejected",
    clientId: account.clientId,
    entityId: account.id,
    statusBefore: account.status,
    statusAfter: status,
    actor: DomainEvent.apiUser(caller),
    data: {}
  })
  if (address !== undefined) yield* activateIn(unit, decided, address, DomainEvent.provider)
  // The answer names the decision itself (ACC-APPR-1), even when activation followed at once.
  return { accountId: account.id, status } satisfies Account.AccountDecision
})

export const approve = decide("accounts.approve", "approve")
export const reject = decide("accounts.reject", "reject")

/** Provider step: activates an approved account. An account that is already active is answered as it is. */
export const activate = operation("Accounts.activate")(function*(accountId: string) {
  accountId = yield* requireUuid("accountId", accountId)
  const account = yield* Storage.run("read", (unit) => findAny(unit, accountId))
  if (account.status === "active") return account
  yield* step(account, "activate")
  const address = yield* depositAddressFor(account)
  return yield* Storage.run("write", (unit) => activateAfresh(unit, accountId, address))
})

/** Activates the account with this id unless it already is, in `unit`. */
const activateAfresh = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  accountId: string,
  address: string
) {
  const current = yield* findAny(unit, accountId)
  return current.status === "active" ? current : yield* activateIn(unit, current, address, DomainEvent.provider)
})

/** Provider step: a deposit arrived at an active account's address. Credits the balance and records it. */
export const deposit = operation("Accounts.deposit")(function*(accountId: string, amount: string) {
  accountId = yield* requireUuid("accountId", accountId)
  const entryId = LedgerEntryId.make(yield* (yield* Ids).next)
  const now = yield* Timestamp.now
  return yield* Storage.run("write", (unit) => depositIn(unit, accountId, amount, entryId, now))
})

/** A deposit's unit of work: the balance credited, the event and the ledger entry recorded. */
const depositIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  accountId: string,
  amount: string,
  entryId: LedgerEntryId,
  now: Timestamp.Timestamp
) {
  const account = yield* findAny(unit, accountId)
  if (!Account.isActive(account)) {
    return yield* new TransitionNotAllowed({ entity: "account", id: account.id, status: account.status, action: "deposit" })
  }
  // An asset taken out of the registry since the account was opened is named as such, not guessed at.
  const { precision } = yield* requireAsset(account.assetId)
  const credited = yield* Effect.fromResult(Money.parseAmount(amount, precision, account.assetId)).pipe(
    Effect.mapError(InvalidAmount.of)
  )
  const updated: Account.Account = {
    ...account,
    availableBalance: Money.add(account.availableBalance, credited),
    updatedAt: now
  }
  yield* unit.updateAccount(updated)
  yield* DomainEvent.append(unit, {
    type: "funds.credited",
    clientId: account.clientId,
    entityId: account.id,
    actor: DomainEvent.provider,
    data: { accountId: account.id, amount: credited, transactionId: null }
  })
  yield* unit.insertLedgerEntry({
    id: entryId,
    clientId: account.clientId,
    accountId: account.id,
    kind: "deposit",
    direction: "credit",
    amount: credited,
    transactionId: null,
    createdAt: now
  })
  return updated
})

/** Administration: how many distinct approvers a transaction from this account needs (0 to 10). */
export const setApprovalPolicy = operation("Accounts.setApprovalPolicy")(function*(
  accountId: string,
  requiredApprovals: number
) {
  accountId = yield* requireUuid("accountId", accountId)
  if (!Number.isInteger(requiredApprovals) || requiredApprovals < 0 || requiredApprovals > 10) {
    return yield* InvalidRequest.field("requiredApprovals", "must be an integer from 0 to 10")
  }
  return yield* Storage.run("write", (unit) => setApprovalPolicyIn(unit, accountId, requiredApprovals))
})

const setApprovalPolicyIn = Effect.fnUntraced(function*(
  unit: Storage.StorageUnit,
  accountId: string,
  requiredApprovals: number
) {
  const account = yield* findAny(unit, accountId)
  const updated: Account.Account = { ...account, requiredApprovals, updatedAt: yield* Timestamp.now }
  yield* unit.updateAccount(updated)
  yield* DomainEvent.append(unit, {
    type: "account.approval_policy_changed",
    clientId: account.clientId,
    entityId: account.id,
    actor: DomainEvent.operator,
    data: { requiredApprovals }
  })
  return updated
})

/** The account as stored, for administration and tests: no client scope. */
export const inspect = operation("Accounts.inspect")(function*(accountId: string) {
  accountId = yield* requireUuid("accountId", accountId)
  return yield* Storage.run("read", (unit) => findAny(unit, accountId))
})
