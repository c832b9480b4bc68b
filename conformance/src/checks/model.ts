/**
 * The kit's own reference model of the interface and the model-based check: `fc.asyncModelRun` runs random
 * command sequences (create, approve, reject, activate, fund, whitelist, initiate, advance, list, get) against the
 * target and the model, comparing every answer. Each run (and each shrink) starts from a fresh tenant.
 *
 * Funds follow the profile's funds model (TXN-FLOW-1, docs/control-protocol.md "funds"): initiation reserves the
 * amount, and the network fee when it is paid in the same asset ("amount-and-fee") or only the amount, the fee
 * being charged at completion ("amount"); failure releases the reservation; completion credits an internal
 * destination. A profile that declares no funds model is held to whichever reading its answers fit: the model
 * follows every reading and drops each one an observed balance contradicts, failing only when none is left.
 * An initiation beyond the available balance is refused with 400, 409 or 422.
 */
import { Decimal } from "decimal.js"
import fc from "fast-check"
import { defineCheck, type CheckContext } from "../Check.js"
import { ControlError } from "../Control.js"
import type { Tenant } from "../Fixtures.js"
import { fundsReadings, groupOf, readingsOf, type AssetProfile, type FundsReading, type TransactionGroup } from "../Profile.js"
import { isRecord } from "../Shape.js"
import type { HttpResult } from "../Transport.js"
import { envelopeOf, estimatedFeeText } from "./records.js"

export type AccountState = "pending_approval" | "approved" | "rejected" | "active"
export type WhitelistState = "PENDING" | "APPROVED" | "REJECTED" | "ARCHIVED"

/** An available balance under each funds reading the model still follows. */
export type Balances = Record<FundsReading, Decimal>

export const balances = (value: Decimal.Value): Balances => ({ "amount-and-fee": new Decimal(value), amount: new Decimal(value) })

export interface ModelAccount {
  readonly id: string
  readonly assetId: string
  status: AccountState
  balance: Balances
}
export interface ModelWhitelist {
  readonly id: string
  readonly assetType: string
  status: WhitelistState
}
export interface ModelTransaction {
  readonly id: string
  readonly sourceId: string
  readonly destinationId: string
  readonly destinationType: "internal" | "external"
  readonly amount: Decimal
  /** The network fee when it is paid in the transfer's own asset, else 0. */
  readonly fee: Decimal
  group: TransactionGroup
}

/** The reference model: plain data and the rules the kit expects the target to follow. */
export class RelayModel {
  /** The funds readings not yet contradicted by the target: the declared one, or all of them. */
  readings: ReadonlyArray<FundsReading>
  constructor(declared: FundsReading | undefined) {
    this.readings = readingsOf({ funds: declared })
  }
  readonly accounts: Array<ModelAccount> = []
  readonly whitelist: Array<ModelWhitelist> = []
  readonly transactions: Array<ModelTransaction> = []

  account(index: number): ModelAccount | undefined {
    return this.accounts.length === 0 ? undefined : this.accounts[index % this.accounts.length]
  }
  whitelistEntry(index: number): ModelWhitelist | undefined {
    return this.whitelist.length === 0 ? undefined : this.whitelist[index % this.whitelist.length]
  }
  transaction(index: number): ModelTransaction | undefined {
    return this.transactions.length === 0 ? undefined : this.transactions[index % this.transactions.length]
  }
  accountById(id: string): ModelAccount | undefined {
    return this.accounts.find((account) => account.id === id)
  }

  /** Approve or reject: only a pending account moves; anything else is refused and changes nothing. */
  decide(account: ModelAccount, to: "approved" | "rejected"): boolean {
    if (account.status !== "pending_approval") return false
    account.status = to
    return true
  }

  /** What initiation must answer, before funds: 201, or the refusal statuses the interface allows. */
  expectedInitiation(source: ModelAccount, destination: { readonly kind: "internal"; readonly account: ModelAccount } | { readonly kind: "external"; readonly entry: ModelWhitelist }): "ok" | "inactive-source" | "bad-destination" {
    if (source.status !== "active") return "inactive-source"
    if (destination.kind === "internal" && destination.account.status !== "active") return "bad-destination"
    if (destination.kind === "external" && destination.entry.status !== "APPROVED") return "bad-destination"
    return "ok"
  }

  /** What a reading holds back at initiation. */
  static reservation(reading: FundsReading, transaction: Pick<ModelTransaction, "amount" | "fee">): Decimal {
    return reading === "amount-and-fee" ? transaction.amount.plus(transaction.fee) : transaction.amount
  }

  reserve(transaction: ModelTransaction): void {
    const source = this.accountById(transaction.sourceId)
    if (source !== undefined) for (const reading of fundsReadings) source.balance[reading] = source.balance[reading].minus(RelayModel.reservation(reading, transaction))
    this.transactions.push(transaction)
  }

  credit(account: ModelAccount, amount: Decimal): void {
    for (const reading of fundsReadings) account.balance[reading] = account.balance[reading].plus(amount)
  }

  /** Keeps the readings under which the account's balance is the observed one; false when none is left. */
  observe(account: ModelAccount, observed: Decimal): boolean {
    const left = this.readings.filter((reading) => account.balance[reading].eq(observed))
    if (left.length === 0) return false
    this.readings = left
    return true
  }

  describeBalance(account: ModelAccount): string {
    return this.readings.map((reading) => `${account.balance[reading].toString()} (${reading})`).join(" or ")
  }

  /** Advance a pending transaction; false when it is no longer pending (the target answers 409). */
  advance(transaction: ModelTransaction, to: "completed" | "failed"): boolean {
    if (transaction.group !== "pending") return false
    transaction.group = to
    const source = this.accountById(transaction.sourceId)
    if (to === "failed" && source !== undefined) {
      for (const reading of fundsReadings) source.balance[reading] = source.balance[reading].plus(RelayModel.reservation(reading, transaction))
    }
    if (to === "completed" && source !== undefined) source.balance.amount = source.balance.amount.minus(transaction.fee)
    if (to === "completed" && transaction.destinationType === "internal") {
      const destination = this.accountById(transaction.destinationId)
      if (destination !== undefined) this.credit(destination, transaction.amount)
    }
    return true
  }
}

export interface Real {
  readonly context: CheckContext
  readonly tenant: Tenant
}

export interface ModelStats {
  executed: number
  discarded: number
}

const fail = (real: Real, requirementIds: ReadonlyArray<string>, message: string, ...evidence: ReadonlyArray<HttpResult>): never => real.context.fail(requirementIds, message, ...evidence)

const statusIs = (real: Real, result: HttpResult, allowed: ReadonlyArray<number>, requirementIds: ReadonlyArray<string>, what: string): void => {
  if (!allowed.includes(result.status)) fail(real, requirementIds, `${what}: the model expects ${allowed.join(" or ")}, the target answered ${result.status}`, result)
}

const field = (result: HttpResult, name: string): unknown => (isRecord(result.json) ? result.json[name] : undefined)

const readBalance = async (real: Real, model: RelayModel, account: ModelAccount, what: string): Promise<void> => {
  const result = await real.tenant.client.getAccount(account.id)
  statusIs(real, result, [200], ["ACC-GET-1"], `GET account (${what})`)
  const status = field(result, "status")
  if (status !== account.status) fail(real, ["ACC-APPR-1", "ACC-ACTIVE-1"], `${what}: the model has the account ${account.status}, the target ${String(status)}`, result)
  const address = field(result, "address")
  if ((account.status === "active") !== (typeof address === "string" && address.length > 0)) fail(real, ["ACC-ADDR-1"], `${what}: an account in ${account.status} has address ${JSON.stringify(address)}`, result)
  const balance = field(result, "availableBalance")
  if (typeof balance !== "string" || !/^-?\d+(\.\d+)?$/.test(balance)) return fail(real, ["GEN-DEC-1"], `${what}: availableBalance ${JSON.stringify(balance)} is not a decimal string`, result)
  const expected = model.describeBalance(account)
  if (!model.observe(account, new Decimal(balance))) fail(real, ["TXN-FLOW-1"], `${what}: the model's available balance is ${expected}, the target's ${balance}`, result)
}

type Cmd = fc.AsyncCommand<RelayModel, Real>

class CreateAccount implements Cmd {
  constructor(readonly asset: AssetProfile, readonly workspace: "custody" | "transactional", readonly stats: ModelStats) {}
  check(): boolean {
    return true
  }
  async run(model: RelayModel, real: Real): Promise<void> {
    this.stats.executed += 1
    const result = await real.tenant.client.createAccount({ name: real.context.fixtures.uniqueName("model"), workspace: this.workspace, assetId: this.asset.assetId })
    statusIs(real, result, [201], ["ACC-CREATE-1"], "create account")
    if (field(result, "status") !== "pending_approval" || field(result, "address") !== null) fail(real, ["ACC-CREATE-1"], "a new account is not pending_approval with a null address", result)
    model.accounts.push({ id: String(field(result, "id")), assetId: this.asset.assetId, status: "pending_approval", balance: balances(0) })
  }
  toString(): string {
    return `createAccount(${this.asset.assetId}, ${this.workspace})`
  }
}

class Decide implements Cmd {
  constructor(readonly index: number, readonly to: "approved" | "rejected", readonly stats: ModelStats) {}
  check(model: Readonly<RelayModel>): boolean {
    const ok = model.accounts.length > 0
    if (!ok) this.stats.discarded += 1
    return ok
  }
  async run(model: RelayModel, real: Real): Promise<void> {
    this.stats.executed += 1
    const account = model.account(this.index)
    if (account === undefined) return
    const result = this.to === "approved" ? await real.tenant.client.approveAccount(account.id) : await real.tenant.client.rejectAccount(account.id)
    if (model.decide(account, this.to)) {
      statusIs(real, result, [200, 201], ["ACC-APPR-1"], `${this.to === "approved" ? "approve" : "reject"} a pending account`)
      if (field(result, "status") !== this.to || field(result, "accountId") !== account.id) fail(real, ["ACC-APPR-1"], `the answer should be {accountId, status: ${this.to}}`, result)
      if (this.to === "approved") {
        // When an approved account turns active is the profile's (ACC-ACTIVE-1): some activate on approval.
        const read = await real.tenant.client.getAccount(account.id)
        if (field(read, "status") === "active") account.status = "active"
      }
    } else statusIs(real, result, [400, 409], ["ACC-APPR-2"], `${this.to === "approved" ? "approve" : "reject"} an account already ${account.status}`)
    await readBalance(real, model, account, "after a decision")
  }
  toString(): string {
    return `${this.to === "approved" ? "approve" : "reject"}Account(#${this.index})`
  }
}

class Activate implements Cmd {
  constructor(readonly index: number, readonly stats: ModelStats) {}
  check(model: Readonly<RelayModel>): boolean {
    const ok = model.accounts.some((account) => account.status === "approved")
    if (!ok) this.stats.discarded += 1
    return ok
  }
  async run(model: RelayModel, real: Real): Promise<void> {
    this.stats.executed += 1
    const candidates = model.accounts.filter((account) => account.status === "approved")
    const account = candidates[this.index % candidates.length]
    if (account === undefined) return
    await real.context.control.activateAccount(account.id)
    account.status = "active"
    await readBalance(real, model, account, "after activation")
  }
  toString(): string {
    return `activate(approved #${this.index})`
  }
}

class Fund implements Cmd {
  constructor(readonly index: number, readonly amount: Decimal, readonly stats: ModelStats) {}
  check(model: Readonly<RelayModel>): boolean {
    const ok = model.accounts.some((account) => account.status === "active")
    if (!ok) this.stats.discarded += 1
    return ok
  }
  async run(model: RelayModel, real: Real): Promise<void> {
    this.stats.executed += 1
    const candidates = model.accounts.filter((account) => account.status === "active")
    const account = candidates[this.index % candidates.length]
    if (account === undefined) return
    const answer = await real.context.control.creditAccount(account.id, this.amount.toFixed())
    model.credit(account, this.amount)
    const expected = model.describeBalance(account)
    if (!model.observe(account, new Decimal(answer.availableBalance))) fail(real, ["TXN-FLOW-1"], `after a credit of ${this.amount.toFixed()} the control reports ${answer.availableBalance}, the model ${expected}`)
  }
  toString(): string {
    return `fund(active #${this.index}, ${this.amount.toFixed()})`
  }
}

class CreateWhitelist implements Cmd {
  constructor(readonly asset: AssetProfile, readonly stats: ModelStats) {}
  /** Each sample address once per client: an implementation may refuse duplicates. */
  check(model: Readonly<RelayModel>): boolean {
    const ok = model.whitelist.filter((entry) => entry.assetType === this.asset.assetId).length < this.asset.sampleAddresses.valid.length
    if (!ok) this.stats.discarded += 1
    return ok
  }
  async run(model: RelayModel, real: Real): Promise<void> {
    this.stats.executed += 1
    const address = this.asset.sampleAddresses.valid[model.whitelist.filter((entry) => entry.assetType === this.asset.assetId).length] ?? ""
    const result = await real.tenant.client.createWhitelist({ name: real.context.fixtures.uniqueName("wl"), address, assetType: this.asset.assetId })
    statusIs(real, result, [200, 201], ["WL-CREATE-1"], "create whitelisted address")
    if (field(result, "status") !== "PENDING") fail(real, ["WL-CREATE-2"], "a new whitelisted address is not PENDING", result)
    model.whitelist.push({ id: String(field(result, "id")), assetType: this.asset.assetId, status: "PENDING" })
  }
  toString(): string {
    return `createWhitelist(${this.asset.assetId})`
  }
}

class SetWhitelistStatus implements Cmd {
  constructor(readonly index: number, readonly to: "APPROVED" | "REJECTED" | "ARCHIVED", readonly stats: ModelStats) {}
  private target(model: Readonly<RelayModel>): ModelWhitelist | undefined {
    const from = this.to === "ARCHIVED" ? "APPROVED" : "PENDING"
    const candidates = model.whitelist.filter((entry) => entry.status === from)
    return candidates[this.index % Math.max(1, candidates.length)]
  }
  check(model: Readonly<RelayModel>): boolean {
    const ok = this.target(model) !== undefined
    if (!ok) this.stats.discarded += 1
    return ok
  }
  async run(model: RelayModel, real: Real): Promise<void> {
    this.stats.executed += 1
    const entry = this.target(model)
    if (entry === undefined) return
    await real.context.control.setWhitelistStatus(entry.id, this.to)
    entry.status = this.to
    const read = await real.tenant.client.getWhitelist(entry.id)
    if (field(read, "status") !== this.to) fail(real, ["WL-FLOW-1", "WL-STATE-1"], `the whitelisted address should read ${this.to}`, read)
  }
  toString(): string {
    return `whitelist(#${this.index} -> ${this.to})`
  }
}

class Initiate implements Cmd {
  constructor(readonly sourceIndex: number, readonly destinationIndex: number, readonly external: boolean, readonly amount: Decimal, readonly stats: ModelStats) {}
  private pick(model: Readonly<RelayModel>): { source: ModelAccount; destination: { kind: "internal"; account: ModelAccount } | { kind: "external"; entry: ModelWhitelist } } | undefined {
    const source = model.account(this.sourceIndex)
    if (source === undefined) return undefined
    if (this.external) {
      const entries = model.whitelist.filter((entry) => entry.assetType === source.assetId)
      const entry = entries[this.destinationIndex % Math.max(1, entries.length)]
      return entry === undefined ? undefined : { source, destination: { kind: "external", entry } }
    }
    const accounts = model.accounts.filter((account) => account.assetId === source.assetId && account.id !== source.id)
    const account = accounts[this.destinationIndex % Math.max(1, accounts.length)]
    return account === undefined ? undefined : { source, destination: { kind: "internal", account } }
  }
  check(model: Readonly<RelayModel>): boolean {
    const ok = this.pick(model) !== undefined
    if (!ok) this.stats.discarded += 1
    return ok
  }
  async run(model: RelayModel, real: Real): Promise<void> {
    this.stats.executed += 1
    const picked = this.pick(model)
    if (picked === undefined) return
    const { source, destination } = picked
    const destinationId = destination.kind === "internal" ? destination.account.id : destination.entry.id
    const body = { sourceAccountId: source.id, destinationId, destinationType: destination.kind, amount: this.amount.toFixed(), assetType: source.assetId }
    const expected = model.expectedInitiation(source, destination)
    if (expected === "inactive-source") {
      const result = await real.tenant.client.initiate(body)
      if (!(result.status >= 400 && result.status < 500) || result.status === 401 || result.status === 429) fail(real, ["TXN-VAL-3"], `initiate from a source in ${source.status} answered ${result.status}`, result)
      return
    }
    if (expected === "bad-destination") {
      const result = await real.tenant.client.initiate(body)
      statusIs(real, result, [404], [destination.kind === "internal" ? "TXN-DEST-2" : "TXN-DEST-1"], `initiate to a ${destination.kind} destination that is not usable`)
      return
    }
    const fee = await real.tenant.client.calculateFee(body)
    statusIs(real, fee, [200, 400, 409, 422], ["TXN-FEE-1"], "calculate-fee of a well-formed transfer")
    const feeAsset = field(fee, "feeAssetType")
    const estimate = field(fee, "estimatedFee")
    const estimatedFee = feeAsset === source.assetId && typeof estimate === "number" ? new Decimal(estimatedFeeText(fee)) : new Decimal(0)
    const estimatedCost = this.amount.plus(estimatedFee)
    const available = model.describeBalance(source)
    // Affordable under every reading left: amount and fee are both covered. Beyond it under every reading: not even
    // the amount is. In between, whether the fee must be covered at initiation is the funds model's, and both pass.
    const affordable = fee.status === 200 && model.readings.every((reading) => estimatedCost.lte(source.balance[reading]))
    const beyond = fee.status !== 200 || model.readings.every((reading) => this.amount.gt(source.balance[reading]))
    const result = await real.tenant.client.initiate(body)
    if (beyond || (!affordable && result.status !== 201)) {
      if (result.status === 201) fail(real, ["TXN-FLOW-1"], `initiate of ${estimatedCost.toString()} (amount with fee) succeeded with ${available} available`, fee, result)
      statusIs(real, result, [400, 409, 422], ["TXN-FLOW-1"], "initiate beyond the available balance")
      return
    }
    statusIs(real, result, [201], ["TXN-INIT-1"], `initiate ${this.amount.toFixed()} with ${available} available`)
    const id = String(field(result, "id"))
    const status = String(field(result, "status"))
    if (groupOf(real.context.profile, status.toUpperCase()) !== "pending") fail(real, ["TXN-INIT-2", "TXN-FLOW-1"], `a new transaction is ${status}, not in the pending group`, result)
    const detail = await real.tenant.client.getTransaction(id)
    statusIs(real, detail, [200], ["TXN-GET-1"], "GET the new transaction")
    const networkFee = field(detail, "networkFee")
    const fees = typeof networkFee === "string" && /^\d+(\.\d+)?$/.test(networkFee) ? new Decimal(networkFee) : new Decimal(0)
    model.reserve({ id, sourceId: source.id, destinationId, destinationType: destination.kind, amount: this.amount, fee: feeAsset === source.assetId ? fees : new Decimal(0), group: "pending" })
    await readBalance(real, model, source, "after initiation")
  }
  toString(): string {
    return `initiate(#${this.sourceIndex} -> ${this.external ? "whitelist" : "account"} #${this.destinationIndex}, ${this.amount.toFixed()})`
  }
}

class Advance implements Cmd {
  constructor(readonly index: number, readonly to: "completed" | "failed", readonly stats: ModelStats) {}
  check(model: Readonly<RelayModel>): boolean {
    const ok = model.transactions.length > 0
    if (!ok) this.stats.discarded += 1
    return ok
  }
  async run(model: RelayModel, real: Real): Promise<void> {
    this.stats.executed += 1
    const transaction = model.transaction(this.index)
    if (transaction === undefined) return
    const wasPending = transaction.group === "pending"
    let answered: number
    try {
      await real.context.control.advanceTransaction(transaction.id, this.to)
      answered = 200
    } catch (error) {
      if (!(error instanceof ControlError)) throw error
      answered = error.status
    }
    const moved = model.advance(transaction, this.to)
    if (moved !== wasPending || (moved && answered !== 200) || (!moved && answered !== 409)) {
      fail(real, ["TXN-FLOW-1"], `advance to ${this.to} of a transaction in ${transaction.group} answered ${answered}; the model expects ${wasPending ? 200 : 409}`)
    }
    const read = await real.tenant.client.getTransactionStatus(transaction.id)
    const status = String(field(read, "status"))
    if (groupOf(real.context.profile, status) !== transaction.group) fail(real, ["TXN-FLOW-1", "TXN-LIST-2"], `the transaction reads ${status}; the model has it ${transaction.group}`, read)
    for (const id of [transaction.sourceId, transaction.destinationId]) {
      const account = model.accountById(id)
      if (account !== undefined) await readBalance(real, model, account, `after advancing to ${this.to}`)
    }
  }
  toString(): string {
    return `advance(tx #${this.index} -> ${this.to})`
  }
}

class ListAccounts implements Cmd {
  constructor(readonly stats: ModelStats) {}
  check(): boolean {
    return true
  }
  async run(model: RelayModel, real: Real): Promise<void> {
    this.stats.executed += 1
    const page = envelopeOf(real.context, await real.tenant.client.listAccounts({ limit: "100" }), ["SCOPE-2", "PAGE-1"], "GET /accounts")
    if (page.total !== model.accounts.length) fail(real, ["SCOPE-2"], `the list total is ${page.total}, the model holds ${model.accounts.length} account(s)`)
    for (const account of model.accounts) {
      const item = page.items.find((candidate) => candidate["id"] === account.id)
      if (item === undefined) return fail(real, ["SCOPE-2"], `account ${account.id} is missing from the list`)
      if (item["status"] !== account.status) fail(real, ["ACC-APPR-1"], `account ${account.id} lists as ${String(item["status"])}, the model has ${account.status}`)
      const expected = model.describeBalance(account)
      if (typeof item["availableBalance"] !== "string" || !/^-?\d+(\.\d+)?$/.test(item["availableBalance"]) || !model.observe(account, new Decimal(item["availableBalance"]))) fail(real, ["TXN-FLOW-1"], `account ${account.id} lists balance ${String(item["availableBalance"])}, the model ${expected}`)
    }
  }
  toString(): string {
    return "listAccounts()"
  }
}

class ListTransactions implements Cmd {
  constructor(readonly group: "all" | TransactionGroup, readonly stats: ModelStats) {}
  check(): boolean {
    return true
  }
  async run(model: RelayModel, real: Real): Promise<void> {
    this.stats.executed += 1
    const page = envelopeOf(real.context, await real.tenant.client.listTransactions({ status: this.group, limit: "100" }), ["TXN-LIST-1"], `GET /transactions?status=${this.group}`)
    const want = model.transactions.filter((transaction) => this.group === "all" || transaction.group === this.group).map((transaction) => transaction.id)
    const got = page.items.map((item) => String(item["id"]))
    if (got.length !== want.length || !want.every((id) => got.includes(id))) fail(real, ["TXN-LIST-1", "TXN-LIST-2"], `status=${this.group} lists [${got.join(", ")}], the model [${want.join(", ")}]`)
  }
  toString(): string {
    return `listTransactions(${this.group})`
  }
}

export const modelCommands = (assets: ReadonlyArray<AssetProfile>, stats: ModelStats): Array<fc.Arbitrary<Cmd>> => {
  const asset = fc.constantFrom(...assets.slice(0, 3))
  const index = fc.nat({ max: 7 })
  // Amounts are decimals with up to two places, made as strings: a JS number never carries an amount.
  const amount = (maxWhole: number) =>
    fc.tuple(fc.integer({ min: 0, max: maxWhole }), fc.integer({ min: 0, max: 99 })).filter(([whole, cents]) => whole + cents > 0).map(([whole, cents]) => new Decimal(`${whole}.${String(cents).padStart(2, "0")}`))
  return [
    fc.tuple(asset, fc.constantFrom("custody" as const, "transactional" as const)).map(([a, workspace]) => new CreateAccount(a, workspace, stats)),
    fc.tuple(index, fc.constantFrom("approved" as const, "approved" as const, "rejected" as const)).map(([i, to]) => new Decide(i, to, stats)),
    index.map((i) => new Activate(i, stats)),
    fc.tuple(index, amount(50)).map(([i, value]) => new Fund(i, value, stats)),
    asset.map((a) => new CreateWhitelist(a, stats)),
    fc.tuple(index, fc.constantFrom("APPROVED" as const, "APPROVED" as const, "REJECTED" as const, "ARCHIVED" as const)).map(([i, to]) => new SetWhitelistStatus(i, to, stats)),
    // Initiation is listed twice: it is the command with the most rules behind it.
    fc.tuple(index, index, fc.boolean(), amount(40)).map(([s, d, external, value]) => new Initiate(s, d, external, value, stats)),
    fc.tuple(index, index, fc.boolean(), amount(40)).map(([s, d, external, value]) => new Initiate(s, d, external, value, stats)),
    fc.tuple(index, fc.constantFrom("completed" as const, "failed" as const)).map(([i, to]) => new Advance(i, to, stats)),
    fc.constant(null).map(() => new ListAccounts(stats)),
    fc.constantFrom("all" as const, "pending" as const, "completed" as const, "failed" as const).map((group) => new ListTransactions(group, stats))
  ]
}

export const modelSequences = defineCheck({
  id: "model.sequences",
  title: "Random command sequences agree with the kit's reference model, answer by answer",
  requirements: ["ACC-APPR-1", "ACC-APPR-2", "ACC-ADDR-1", "ACC-ACTIVE-1", "GEN-DEC-1", "TXN-INIT-2", "TXN-DEST-1", "TXN-DEST-2", "TXN-VAL-3", "TXN-FLOW-1", "TXN-LIST-1", "TXN-LIST-2", "WL-FLOW-1", "WL-STATE-1", "SCOPE-2"],
  tags: ["model", "property", "workflow"],
  needs: ["control", "accounts.activate", "accounts.credit", "whitelisted-addresses.status", "transactions.advance"],
  expectsWork: true,
  async run(context) {
    const stats: ModelStats = { executed: 0, discarded: 0 }
    const assets = context.profile.assets.filter((asset) => asset.feeEstimation)
    const property = fc.asyncProperty(fc.commands(modelCommands(assets, stats), { maxCommands: 30, size: "medium", ...(context.settings.replayPath === undefined ? {} : { replayPath: context.settings.replayPath }) }), (commands) =>
      context.tracked(async () => {
        // A fresh tenant for every run and every shrink step: isolation without resets.
        await fc.asyncModelRun(async () => {
          const tenant = await context.fixtures.tenant()
          const model = new RelayModel(context.profile.funds)
          // A funded starting point, so that most generated commands find something to act on.
          const asset = assets[0]
          if (asset !== undefined) {
            for (const balance of ["100", "0"]) {
              const account = await context.fixtures.activeAccount(tenant, asset.assetId, balance)
              model.accounts.push({ id: account.id, assetId: asset.assetId, status: "active", balance: balances(balance) })
            }
            const entry = await context.fixtures.whitelist(tenant, asset.assetId, "APPROVED")
            model.whitelist.push({ id: entry.id, assetType: asset.assetId, status: "APPROVED" })
          }
          return { model, real: { context, tenant } }
        }, commands)
      })
    )
    await context.runProperty(["TXN-FLOW-1"], property as unknown as fc.IAsyncProperty<unknown>, context.settings.numRuns)
    if (stats.discarded > stats.executed) context.warn(`vacuous run: ${stats.discarded} generated command(s) were discarded by preconditions, ${stats.executed} ran`)
  }
})

export const modelChecks = [modelSequences]
