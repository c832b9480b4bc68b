/**
 * The Storage (and RateLimiter) contract, written once and run against every implementation: the core's memory
 * store, SQLite in a file and in memory, and PostgreSQL. Lists are checked against the port's own definitions
 * (`Storage.accountMatches`, `whitelistMatches`, `transactionMatches`, `compareNewestFirst`, `Page.offset`), which
 * are what the memory store runs, so a SQL store that passes means exactly what the memory store means.
 *
 * One layer per suite: every test makes its own client(s), so tests share a database without meeting.
 */
import { assert, layer } from "@effect/vitest"
import { randomUUID } from "node:crypto"
import {
  Account,
  Money,
  type Page,
  Outbox,
  RateLimiter,
  Storage,
  type Timestamp,
  Transaction,
  type Webhook,
  type WhitelistedAddress
} from "@custody-relay/core"
import { Deferred, Effect, Exit, Fiber, type Layer, Option } from "effect"
import * as fc from "fast-check"
import { TestClock } from "effect/testing"
import * as Records from "./Records.js"

export type StorageLayer = Layer.Layer<Storage.Storage | RateLimiter.RateLimiter, unknown>

const write = <A, E>(work: (unit: Storage.StorageUnit) => Effect.Effect<A, E>) =>
  Storage.Storage.use((storage) => storage.transaction("write", work))

const read = <A, E>(work: (unit: Storage.StorageUnit) => Effect.Effect<A, E>) =>
  Storage.Storage.use((storage) => storage.transaction("read", work))

const lookup = <A, E>(work: (unit: Storage.StorageUnit) => Effect.Effect<A, E>) =>
  Storage.Storage.use((storage) => storage.transaction("lookup", work))

const ids = (items: ReadonlyArray<{ readonly id: string }>): ReadonlyArray<string> => items.map((item) => item.id)

/** What a page must hold: the port's definition, applied to everything the test stored. */
const expectedPage = <A extends { readonly createdAt: string; readonly id: string }>(
  all: ReadonlyArray<A>,
  matches: (a: A) => boolean,
  request: Page.PageRequest
) => {
  const sorted = all.filter(matches).sort(Storage.compareNewestFirst)
  const start = (request.page - 1) * request.limit
  return { ids: ids(sorted.slice(start, start + request.limit)), total: sorted.length }
}

/** Every page size and page number worth trying for `count` rows, past the end included. */
const pageRequests = (count: number): ReadonlyArray<Page.PageRequest> =>
  [1, 3, 7, 100].flatMap((limit) =>
    Array.from({ length: Math.ceil(count / limit) + 1 }, (_, i) => ({ page: i + 1, limit }))
  )

const reasonOf = (error: Storage.StorageError) => error.reason._tag

/** Balances and amounts that must survive storage digit for digit (issue 3: 18-decimal ETH, a 10^30 balance). */
const exactAmounts = [
  "1000000000000000000000000000000",
  "0.000000000000000001",
  "123456789012345678.123456789012345678",
  "999999999999999999999999999999.999999999999999999",
  "100.5",
  "0"
].map((amount) => Money.canonical(amount))

export const suite = (name: string, makeLayer: () => StorageLayer): void =>
  layer(makeLayer(), { excludeTestServices: true, timeout: "60 seconds" })(name, (it) => {
    it.effect("clients: insert, get, absent", () =>
      Effect.gen(function*() {
        const client = Records.client({ name: "Ärger & Söhne" })
        yield* write((unit) => unit.insertClient(client))
        assert.deepStrictEqual(yield* read((unit) => unit.getClient(client.id)), Option.some(client))
        assert.isTrue(Option.isNone(yield* read((unit) => unit.getClient(Records.client().id))))
      }))

    it.effect("api users: insert, get, find by key id, update", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const scoped = Records.apiUser(client.id)
        const unscoped = Records.apiUser(null, { permissions: [] })
        yield* write((unit) =>
          Effect.all([unit.insertClient(client), unit.insertApiUser(scoped), unit.insertApiUser(unscoped)])
        )
        assert.deepStrictEqual(yield* read((unit) => unit.getApiUser(scoped.id)), Option.some(scoped))
        assert.deepStrictEqual(yield* read((unit) => unit.findApiUserByKeyId(unscoped.keyId)), Option.some(unscoped))
        assert.isTrue(Option.isNone(yield* read((unit) => unit.findApiUserByKeyId("crk_unknown"))))
        const revoked = { ...scoped, permissions: [], revokedAt: Records.at(5), updatedAt: Records.at(5) }
        yield* write((unit) => unit.updateApiUser(revoked))
        assert.deepStrictEqual(yield* read((unit) => unit.getApiUser(scoped.id)), Option.some(revoked))
      }))

    it.effect("clients and api users: listed in id order (time order for the core's ids), api users by client or not client-scoped", () =>
      Effect.gen(function*() {
        const first = Records.client()
        const second = Records.client()
        const users = [Records.apiUser(first.id), Records.apiUser(second.id), Records.apiUser(first.id), Records.apiUser(null, { permissions: [] })]
        const byId = <A extends { readonly id: string }>(items: ReadonlyArray<A>) => [...items].sort((a, b) => (a.id < b.id ? -1 : 1))
        yield* write((unit) => Effect.all([unit.insertClient(first), unit.insertClient(second), ...users.map((user) => unit.insertApiUser(user))]))
        const clients = yield* read((unit) => unit.listClients())
        assert.deepStrictEqual(clients.filter((client) => client.id === first.id || client.id === second.id), byId([first, second]))
        assert.deepStrictEqual(clients.map((client) => client.id), byId(clients).map((client) => client.id))
        assert.deepStrictEqual(yield* read((unit) => unit.listApiUsers(first.id)), byId([users[0]!, users[2]!]))
        assert.deepStrictEqual(yield* read((unit) => unit.listApiUsers(second.id)), [users[1]!])
        const unscoped = yield* read((unit) => unit.listApiUsers(null))
        assert.isTrue(unscoped.some((user) => user.id === users[3]!.id) && unscoped.every((user) => user.clientId === null))
        const everyone = (yield* read((unit) => unit.listApiUsers())).map((user) => user.id)
        for (const user of users) assert.include(everyone, user.id)
      }))

    it.effect("accounts: insert, get, update; identity lookup skips rejected accounts and other clients", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const other = Records.client()
        const rejected = Records.account(client.id, { name: "Ops", status: "rejected" })
        const live = Records.account(client.id, { name: "Ops", status: "pending_approval", description: "first" })
        const othersTwin = Records.account(other.id, { name: "Ops", status: "pending_approval" })
        yield* write((unit) =>
          Effect.all([unit.insertClient(client), unit.insertClient(other)]).pipe(
            Effect.andThen(Effect.all([unit.insertAccount(rejected), unit.insertAccount(live), unit.insertAccount(othersTwin)]))
          )
        )
        const identity: Account.AccountIdentity = { name: "Ops", workspace: "custody", assetId: "ETH", role: "custody" }
        assert.deepStrictEqual(yield* read((unit) => unit.findAccountByIdentity(client.id, identity)), Option.some(live))
        for (const miss of [{ ...identity, name: "ops" }, { ...identity, role: "staking" as const }, { ...identity, assetId: "BTC" }]) {
          assert.isTrue(Option.isNone(yield* read((unit) => unit.findAccountByIdentity(client.id, miss))))
        }
        const activated = { ...live, status: "active" as const, address: "0xAbC", availableBalance: Money.canonical("12.25"), updatedAt: Records.at(9) }
        yield* write((unit) => unit.updateAccount(activated))
        assert.deepStrictEqual(yield* read((unit) => unit.getAccount(live.id)), Option.some(activated))
        assert.isTrue(Option.isNone(yield* read((unit) => unit.getAccount(Records.account(client.id).id))))
      }))

    it.effect("listAccounts: every filter, order and page exactly as the port defines them", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const other = Records.client()
        const names = ["Treasury", "TREASURY cold", "Ärger", "ärger klein", "İstanbul", "Straße", "50% fund", "a_b", "Ops"]
        const accounts: Array<Account.Account> = []
        let i = 0
        for (const name of names) {
          for (const assetId of ["ETH", "BTC", "USDC_ETH"]) {
            const n = i++
            accounts.push(Records.account(client.id, {
              name,
              assetId,
              workspace: n % 2 === 0 ? "custody" : "transactional",
              role: n % 3 === 0 ? "staking" : "custody",
              status: Account.statuses[n % 4] ?? "active",
              address: n % 5 === 0 ? null : `0xDeAd${n.toString(16)}BeeF`,
              // Several share one instant, so the id decides their order.
              createdAt: Records.at(Math.floor(n / 3))
            }))
          }
        }
        const foreign = Records.account(other.id, { name: "Treasury" })
        yield* write((unit) =>
          Effect.all([unit.insertClient(client), unit.insertClient(other)]).pipe(
            Effect.andThen(Effect.forEach([...accounts, foreign], unit.insertAccount, { discard: true }))
          )
        )
        const filters: ReadonlyArray<Account.AccountFilter> = [
          {},
          { search: "treasury" },
          { search: "TREASURY" },
          { search: "ÄRGER" },
          { search: "i̇stanbul" },
          { search: "STRASSE" },
          { search: "straße" },
          { search: "%" },
          { search: "_" },
          { search: "" },
          { search: "eth" },
          { search: "usdc_" },
          { search: "beef" },
          { search: "0xdead1" },
          { search: "nothing like it" },
          { search: "\u0000" },
          { assetId: "BTC" },
          { assetId: "btc" },
          { workspace: "transactional" },
          { roles: [] },
          { roles: ["staking"] },
          { roles: ["staking", "custody"] },
          { status: "rejected" },
          { search: "r", assetId: "ETH", workspace: "custody", roles: ["custody"], status: "active" }
        ]
        for (const filter of filters) {
          for (const request of pageRequests(accounts.length)) {
            const page = yield* read((unit) => unit.listAccounts(client.id, filter, request))
            const expected = expectedPage(accounts, (a) => Storage.accountMatches(a, filter), request)
            assert.deepStrictEqual({ ids: ids(page.items), total: page.total }, expected, JSON.stringify({ filter, request }))
          }
        }
        const first = yield* read((unit) => unit.listAccounts(client.id, {}, { page: 1, limit: 100 }))
        assert.deepStrictEqual(first.items, [...accounts].sort(Storage.compareNewestFirst))
      }))

    it.effect("listAccounts search folds case as JavaScript does: sampled names and needles from a hostile alphabet", () =>
      Effect.gen(function*() {
        // Letters whose case mappings differ between JavaScript and SQL engines, and LIKE's own metacharacters.
        const alphabet = ["a", "A", "i", "I", "İ", "ı", "s", "S", "ß", "ẞ", "σ", "ς", "Σ", "k", "K", "\u212A", "ä", "Ä", "e\u0301", "é", "%", "_", "\\", " "]
        const text = (maxLength: number) => fc.array(fc.constantFrom(...alphabet), { minLength: 0, maxLength }).map((parts) => parts.join(""))
        const cases = fc.sample(
          fc.record({
            names: fc.array(text(5).map((name) => `n${name}`), { minLength: 1, maxLength: 8 }),
            addresses: fc.array(fc.option(text(4), { nil: null }), { minLength: 8, maxLength: 8 }),
            needles: fc.array(text(3), { minLength: 1, maxLength: 6 })
          }),
          { numRuns: 25, seed: 20261122 }
        )
        for (const { addresses, names, needles } of cases) {
          const client = Records.client()
          const accounts = names.map((name, i) =>
            Records.account(client.id, { name: `${name}${i}`, address: addresses[i] ?? null, assetId: i % 2 === 0 ? "ETH" : "ßTC", createdAt: Records.at(i) })
          )
          yield* write((unit) => unit.insertClient(client).pipe(Effect.andThen(Effect.forEach(accounts, unit.insertAccount, { discard: true }))))
          for (const search of needles) {
            const page = yield* read((unit) => unit.listAccounts(client.id, { search }, { page: 1, limit: 100 }))
            const expected = expectedPage(accounts, (a) => Storage.accountMatches(a, { search }), { page: 1, limit: 100 })
            assert.deepStrictEqual({ ids: ids(page.items), total: page.total }, expected, JSON.stringify({ search, names, addresses }))
          }
        }
      }))

    it.effect("whitelisted addresses: insert, get, find skips archived, update, list as the port defines it", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const entries: Array<WhitelistedAddress.WhitelistedAddress> = []
        const statuses = ["PENDING", "APPROVED", "REJECTED", "ARCHIVED"] as const
        for (let n = 0; n < 24; n++) {
          entries.push(Records.whitelisted(client.id, {
            assetType: ["ETH", "BTC", "SOL"][n % 3] ?? "ETH",
            status: statuses[n % 4] ?? "PENDING",
            createdAt: Records.at(Math.floor(n / 4))
          }))
        }
        const archived = Records.whitelisted(client.id, { address: "0xsame", status: "ARCHIVED", createdAt: Records.at(100) })
        const live = Records.whitelisted(client.id, { address: "0xsame", status: "PENDING", createdAt: Records.at(101) })
        const all = [...entries, archived, live]
        yield* write((unit) =>
          unit.insertClient(client).pipe(Effect.andThen(Effect.forEach(all, unit.insertWhitelistedAddress, { discard: true })))
        )
        assert.deepStrictEqual(yield* read((unit) => unit.getWhitelistedAddress(live.id)), Option.some(live))
        assert.deepStrictEqual(yield* read((unit) => unit.findWhitelistedAddress(client.id, "ETH", ["0xsame"])), Option.some(live))
        assert.deepStrictEqual(yield* read((unit) => unit.findWhitelistedAddress(client.id, "ETH", ["0xother", "0xsame"])), Option.some(live))
        assert.isTrue(Option.isNone(yield* read((unit) => unit.findWhitelistedAddress(client.id, "ETH", ["0xSAME"]))))
        assert.isTrue(Option.isNone(yield* read((unit) => unit.findWhitelistedAddress(client.id, "ETH", []))))
        assert.isTrue(Option.isNone(yield* read((unit) => unit.findWhitelistedAddress(client.id, "BTC", ["0xsame"]))))
        assert.isTrue(Option.isNone(yield* read((unit) => unit.findWhitelistedAddress(Records.client().id, "ETH", ["0xsame"]))))
        const approved = { ...live, status: "APPROVED" as const, updatedAt: Records.at(200) }
        yield* write((unit) => unit.updateWhitelistedAddress(approved))
        assert.deepStrictEqual(yield* read((unit) => unit.getWhitelistedAddress(live.id)), Option.some(approved))
        const stored = all.map((e) => (e.id === live.id ? approved : e))
        const filters: ReadonlyArray<WhitelistedAddress.WhitelistFilter> = [
          {},
          { assetTypes: [] },
          { assetTypes: ["ETH"] },
          { assetTypes: ["ETH", "SOL"] },
          { statuses: ["ARCHIVED"] },
          { statuses: ["PENDING", "APPROVED"], assetTypes: ["BTC", "ETH"] }
        ]
        for (const filter of filters) {
          for (const request of pageRequests(stored.length)) {
            const page = yield* read((unit) => unit.listWhitelistedAddresses(client.id, filter, request))
            const expected = expectedPage(stored, (e) => Storage.whitelistMatches(e, filter), request)
            assert.deepStrictEqual({ ids: ids(page.items), total: page.total }, expected, JSON.stringify({ filter, request }))
          }
        }
      }))

    it.effect("transactions: insert, get, update with decisions; list (each item its summary, TXN-SHAPE-1) and open reservations as the port defines them", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const eth = Records.account(client.id, { assetId: "ETH" })
        const btc = Records.account(client.id, { assetId: "BTC" })
        const txs: Array<Transaction.Transaction> = []
        Records.transactionStatuses.forEach((status, s) => {
          for (const source of [eth, btc, eth]) {
            txs.push(Records.transaction(source, { status, createdAt: Records.at(s) }))
          }
        })
        yield* write((unit) =>
          unit.insertClient(client).pipe(
            Effect.andThen(unit.insertAccount(eth)),
            Effect.andThen(unit.insertAccount(btc)),
            Effect.andThen(Effect.forEach(txs, unit.insertTransaction, { discard: true }))
          )
        )
        const first = txs[0]
        assert.isDefined(first)
        if (first === undefined) return
        assert.deepStrictEqual(yield* read((unit) => unit.getTransaction(first.id)), Option.some(first))
        const decided: Transaction.Transaction = {
          ...first,
          status: "PENDING_PROVIDER_APPROVAL",
          subStatus: "PENDING_PROVIDER_POLICY",
          decisions: [
            { apiUserId: Records.apiUser(client.id).id, name: "Zoë", decision: "approve", at: Records.at(50) },
            { apiUserId: Records.apiUser(client.id).id, name: "Ann", decision: "reject", at: Records.at(51) }
          ],
          providerTransactionId: "provider-1",
          approvedAt: Records.at(51),
          updatedAt: Records.at(51)
        }
        yield* write((unit) => unit.updateTransaction(decided))
        assert.deepStrictEqual(yield* read((unit) => unit.getTransaction(first.id)), Option.some(decided))
        // Two more leave the pending group, so the totals below see transactions that moved between groups.
        const moved = txs.slice(1, 3).map((t, i): Transaction.Transaction => ({
          ...t,
          status: i === 0 ? "CANCELLED" : "COMPLETED",
          updatedAt: Records.at(60)
        }))
        yield* write((unit) => Effect.forEach(moved, unit.updateTransaction, { discard: true }))
        const stored = txs.map((t) => (t.id === decided.id ? decided : moved.find((m) => m.id === t.id) ?? t))
        const filters: ReadonlyArray<Transaction.TransactionFilter> = [
          {},
          { accountId: eth.id },
          { accountId: "not-an-id" },
          { assetType: "BTC" },
          { group: "pending" },
          { group: "completed" },
          { group: "failed" },
          { accountId: eth.id, group: "pending", assetType: "ETH" }
        ]
        // Each item is the transaction's summary, no more and no less (the port's rule): a first page as the API reads
        // it too, in a lookup (Storage.unitForPage).
        const summaries = new Map<string, Transaction.TransactionSummary>(stored.map((t) => [t.id, Transaction.summaryOf(t)]))
        for (const filter of filters) {
          for (const request of pageRequests(stored.length)) {
            const page = yield* read((unit) => unit.listTransactions(client.id, filter, request))
            const expected = expectedPage(stored, (t) => Storage.transactionMatches(t, filter), request)
            assert.deepStrictEqual({ ids: ids(page.items), total: page.total }, expected, JSON.stringify({ filter, request }))
            assert.deepStrictEqual<ReadonlyArray<Transaction.TransactionSummary | undefined>>(
              page.items,
              expected.ids.map((id) => summaries.get(id)),
              JSON.stringify({ filter, request })
            )
            if (request.page === 1) {
              assert.deepStrictEqual(yield* lookup((unit) => unit.listTransactions(client.id, filter, request)), page)
            }
          }
        }
        const open = yield* read((unit) => unit.listOpenTransactionsFrom(eth.id))
        const expectedOpen = stored.filter((t) => t.sourceAccountId === eth.id && ["AWAITING_SIGNATURE", "PENDING_PROVIDER_APPROVAL", "BROADCASTING", "CONFIRMING"].includes(t.status))
        assert.deepStrictEqual([...ids(open)].sort(), [...ids(expectedOpen)].sort())
        assert.deepStrictEqual(yield* read((unit) => unit.listTransactions(Records.client().id, {}, { page: 1, limit: 20 })), { items: [], total: 0 })
      }))

    it.effect("pagination is stable: walking the pages visits every record once, newest first", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const source = Records.account(client.id)
        const txs = Array.from({ length: 53 }, (_, n) => Records.transaction(source, { createdAt: Records.at(n % 7) }))
        yield* write((unit) =>
          unit.insertClient(client).pipe(
            Effect.andThen(unit.insertAccount(source)),
            Effect.andThen(Effect.forEach(txs, unit.insertTransaction, { discard: true }))
          )
        )
        const seen: Array<string> = []
        for (let page = 1; ; page++) {
          const found = yield* read((unit) => unit.listTransactions(client.id, {}, { page, limit: 10 }))
          assert.strictEqual(found.total, txs.length)
          if (found.items.length === 0) break
          seen.push(...ids(found.items))
        }
        assert.deepStrictEqual(seen, ids([...txs].sort(Storage.compareNewestFirst)))
      }))

    it.effect("ledger entries: insert and list by account", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const a = Records.account(client.id)
        const b = Records.account(client.id)
        const entries = [
          Records.ledgerEntry(a, { amount: Money.canonical("0.000000000000000001"), createdAt: Records.at(1) }),
          Records.ledgerEntry(a, { kind: "settlement", direction: "debit", transactionId: "tx-1", createdAt: Records.at(2) }),
          Records.ledgerEntry(b, { kind: "transfer_in", transactionId: "tx-2", createdAt: Records.at(3) })
        ]
        yield* write((unit) =>
          unit.insertClient(client).pipe(
            Effect.andThen(Effect.all([unit.insertAccount(a), unit.insertAccount(b)])),
            Effect.andThen(Effect.forEach(entries, unit.insertLedgerEntry, { discard: true }))
          )
        )
        const listed = yield* read((unit) => unit.listLedgerEntries(a.id))
        assert.deepStrictEqual([...listed].sort((x, y) => x.id.localeCompare(y.id)), entries.slice(0, 2).sort((x, y) => x.id.localeCompare(y.id)))
        assert.deepStrictEqual(yield* read((unit) => unit.listLedgerEntries(Records.account(client.id).id)), [])
      }))

    it.effect("idempotency keys: a claim and its result commit together; a rolled-back claim leaves nothing", () =>
      Effect.gen(function*() {
        const claim = Records.idempotencyClaim()
        // A unit that claims and then fails rolls its claim back: the key is free again.
        yield* Effect.flip(write((unit) => Effect.andThen(unit.claimIdempotencyKey(claim), Effect.fail("refused"))))
        assert.isTrue(Option.isNone(yield* read((unit) => unit.findIdempotencyRecord(claim.scope, claim.key, claim.createdAt))))
        const result = "{\"id\":\"ä\",\"amount\":\"0.000000000000000001\"}"
        assert.isTrue(Option.isNone(yield* write((unit) =>
          Effect.tap(unit.claimIdempotencyKey(claim), () => unit.completeIdempotencyKey(claim.scope, claim.key, result)))))
        const kept = { ...claim, result }
        assert.deepStrictEqual(yield* write((unit) => unit.claimIdempotencyKey({ ...claim, fingerprint: "other" })), Option.some(kept))
        assert.deepStrictEqual(yield* read((unit) => unit.findIdempotencyRecord(claim.scope, claim.key, claim.createdAt)), Option.some(kept))
        // Expired: no longer found, and claimed anew.
        const later = Records.at(86_400_001)
        assert.isTrue(Option.isNone(yield* read((unit) => unit.findIdempotencyRecord(claim.scope, claim.key, later))))
        const renewed = { ...claim, fingerprint: "renewed", createdAt: later, expiresAt: Records.at(2 * 86_400_000) }
        assert.isTrue(Option.isNone(yield* write((unit) =>
          Effect.tap(unit.claimIdempotencyKey(renewed), () => unit.completeIdempotencyKey(claim.scope, claim.key, "2")))))
        assert.deepStrictEqual(yield* read((unit) => unit.findIdempotencyRecord(claim.scope, claim.key, later)), Option.some({ ...renewed, result: "2" }))
        // Expiry sweeps are global: use instants far from every other test's keys.
        const old = Records.idempotencyClaim({ createdAt: Records.at(-10_000_000_001), expiresAt: Records.at(-10_000_000_000) })
        yield* write((unit) => Effect.andThen(unit.claimIdempotencyKey(old), unit.completeIdempotencyKey(old.scope, old.key, "1")))
        assert.isAtLeast(yield* write((unit) => unit.deleteExpiredIdempotencyRecords(Records.at(-9_500_000_000), 1000)), 1)
      }))

    it.effect("domain events: a unit that appends more than one insert's worth (EventLog.EVENTS_PER_INSERT) keeps them all, in order", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const entityId = Records.account(client.id).id
        // More than SQLite binds in one statement (32,766 values, ten an event).
        const count = 3_500
        const events = Array.from({ length: count }, (_, n) => Records.accountApproved(client.id, entityId, n))
        yield* write((unit) => Effect.forEach(events, (event) => unit.appendEvent(event), { discard: true }))
        const listed = yield* read((unit) => unit.listEvents({ entityId }, 0, count + 1))
        assert.deepStrictEqual(listed.map((event) => event.id), events.map((event) => event.id))
      }))

    it.effect("domain events: appended in a unit, listed in log order by client and entity, gone with a rollback", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const entityId = Records.account(client.id).id
        const event = (type: "account.created" | "account.approved", n: number) => ({
          id: `${String(n).padStart(8, "0")}-0000-7000-8000-${client.id.slice(-12)}`,
          type,
          clientId: client.id,
          entityType: "account" as const,
          entityId,
          statusBefore: n === 0 ? null : "pending_approval",
          statusAfter: n === 0 ? "pending_approval" : "approved",
          actor: { kind: "operator" as const },
          at: Records.at(n),
          data: n === 0 ? { name: "Ünïcode ✓", workspace: "custody", assetId: "BTC", role: "custody" } : {}
        })
        yield* write((unit) => unit.appendEvent(event("account.created", 0)))
        yield* Effect.flip(write((unit) => Effect.andThen(unit.appendEvent(event("account.approved", 9)), Effect.fail("refused"))))
        yield* write((unit) => unit.appendEvent(event("account.approved", 1)))
        const listed = yield* read((unit) => unit.listEvents({ clientId: client.id }, 0, 10))
        assert.deepStrictEqual(listed.map(({ position: _, ...rest }) => rest), [event("account.created", 0), event("account.approved", 1)])
        assert.isTrue(listed[0]!.position < listed[1]!.position)
        assert.deepStrictEqual(ids(yield* read((unit) => unit.listEvents({ entityId }, listed[0]!.position, 10))), [event("account.approved", 1).id])
        assert.deepStrictEqual(yield* read((unit) => unit.listEvents({ entityId: Records.account(client.id).id }, 0, 10)), [])
        // The audit trail's pages: newest first, filtered, with the total; another client sees none of them.
        const page = (filter: Parameters<Storage.StorageUnit["pageEvents"]>[1], limit = 10, clientId: string | null = client.id) =>
          read((unit) => unit.pageEvents(clientId, filter, { page: 1, limit }))
        const newestFirst = [event("account.approved", 1).id, event("account.created", 0).id]
        assert.deepStrictEqual(ids((yield* page({})).items), newestFirst)
        assert.strictEqual((yield* page({}, 1)).total, 2)
        assert.deepStrictEqual(ids((yield* page({}, 1)).items), newestFirst.slice(0, 1))
        // A later page reads from the nearer end of the log (SqlUnit.pageOf): page 2 of 2 is the oldest event.
        const nth = (n: number) => read((unit) => unit.pageEvents(client.id, {}, { page: n, limit: 1 }))
        assert.deepStrictEqual({ ids: ids((yield* nth(2)).items), total: (yield* nth(2)).total }, { ids: newestFirst.slice(1), total: 2 })
        assert.deepStrictEqual(yield* nth(3), { items: [], total: 2 })
        assert.deepStrictEqual(ids((yield* page({ types: ["account.created"], entityType: "account", entityId })).items), [event("account.created", 0).id])
        assert.deepStrictEqual(ids((yield* page({ from: Records.at(1), to: Records.at(1) })).items), [event("account.approved", 1).id])
        assert.deepStrictEqual((yield* page({ entityType: "transaction" })).total, 0)
        // One event by its id (a webhook redelivery's), only within its client.
        assert.deepStrictEqual(yield* page({ id: event("account.created", 0).id }), { items: [listed[0]!], total: 1 })
        assert.deepStrictEqual((yield* page({ id: event("account.created", 0).id }, 10, Records.client().id)).total, 0)
        assert.deepStrictEqual((yield* page({ entityId: "\u0000" })).total, 0)
        assert.deepStrictEqual((yield* page({}, 10, Records.client().id)).total, 0)
        assert.isAtLeast((yield* page({ entityId }, 10, null)).total, 2)

        // Several events of one unit: in the log in the order appended, and read back by the unit that appended them
        // (a list and a page, before it commits); a unit that fails after appending leaves none.
        const many = [2, 3, 4].map((n) => event("account.approved", n))
        const seenInside = yield* write((unit) =>
          Effect.gen(function*() {
            yield* unit.appendEvent(many[0]!)
            const listedInside = ids(yield* unit.listEvents({ entityId }, listed[1]!.position, 10))
            yield* unit.appendEvent(many[1]!)
            yield* unit.appendEvent(many[2]!)
            const pagedInside = ids((yield* unit.pageEvents(client.id, { entityId }, { page: 1, limit: 3 })).items)
            return { listedInside, pagedInside }
          }))
        assert.deepStrictEqual(seenInside, { listedInside: [many[0]!.id], pagedInside: [many[2]!.id, many[1]!.id, many[0]!.id] })
        const after = yield* read((unit) => unit.listEvents({ entityId }, listed[1]!.position, 10))
        assert.deepStrictEqual(ids(after), many.map((e) => e.id))
        assert.isTrue(after[0]!.position < after[1]!.position && after[1]!.position < after[2]!.position)
        const failing = [5, 6].map((n) => event("account.approved", n))
        yield* Effect.flip(write((unit) =>
          Effect.andThen(Effect.andThen(unit.appendEvent(failing[0]!), unit.appendEvent(failing[1]!)), Effect.fail("refused"))))
        assert.deepStrictEqual(ids(yield* read((unit) => unit.listEvents({ entityId }, after[2]!.position, 10))), [])
      }))

    it.effect("outbox: entries due by time and lease, oldest first, busy lanes skipped, by pool; updates kept; listed by subject, each with its lane", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const subjectId = Records.account(client.id).id
        // Due-time ordering is global: use instants before every other test's entries.
        const base = -20_000_000_000
        const first = Records.outboxEntry(client.id, { subjectId, nextAttemptAt: Records.at(base) })
        const second = Records.outboxEntry(client.id, { subjectId, nextAttemptAt: Records.at(base + 1), kind: "deliverWebhook", lane: randomUUID() })
        const leased = Records.outboxEntry(client.id, { nextAttemptAt: Records.at(base), leasedUntil: Records.at(base + 100) })
        const later = Records.outboxEntry(client.id, { nextAttemptAt: Records.at(base + 1000) })
        // An entry of a kind a later release added, as a newer node on the same database writes it: due before every
        // other, and never leased here (Outbox.kindsOf), so it takes no place of this release's own entries.
        const newerKind = Records.outboxEntry(client.id, { nextAttemptAt: Records.at(base - 1), kind: "settleOnChain" as Outbox.EffectKind })
        yield* write((unit) => Effect.forEach([second, first, leased, later, newerKind], unit.insertOutboxEntry, { discard: true }))
        const due = (at: number) => read((unit) => unit.dueOutboxEntries(Records.at(at), 100))
        const mine = (entries: ReadonlyArray<{ readonly id: string }>) =>
          ids(entries).filter((id) => [first.id, second.id, leased.id, later.id].includes(id))
        assert.deepStrictEqual(mine(yield* due(base + 10)), [first.id, second.id])
        for (const pool of [undefined, "provider", "deliveries"] as const) {
          const leasedFirst = yield* read((unit) => unit.dueOutboxEntries(Records.at(base + 10), 1, [], pool === undefined ? {} : { pool }))
          assert.deepStrictEqual(ids(leasedFirst), [pool === "deliveries" ? second.id : first.id], `pool ${pool}`)
        }
        // A lane still being carried out is skipped; entries of no lane never are.
        assert.deepStrictEqual(mine(yield* read((unit) => unit.dueOutboxEntries(Records.at(base + 10), 100, [second.lane!, "another lane"]))), [first.id])
        // Each of the worker's pools leases its own kinds (Outbox.poolOf): the deliveries, and the provider's effects.
        assert.deepStrictEqual(mine(yield* read((unit) => unit.dueOutboxEntries(Records.at(base + 10), 100, [], { pool: "deliveries" }))), [second.id])
        assert.deepStrictEqual(mine(yield* read((unit) => unit.dueOutboxEntries(Records.at(base + 10), 100, [], { pool: "provider" }))), [first.id])
        // A client holding its share of the deliveries' places is skipped; the others' entries are not.
        assert.deepStrictEqual(mine(yield* read((unit) => unit.dueOutboxEntries(Records.at(base + 10), 100, [], { skipClients: [client.id] }))), [])
        assert.deepStrictEqual(mine(yield* read((unit) => unit.dueOutboxEntries(Records.at(base + 10), 100, [], { skipClients: [Records.client().id] }))), [first.id, second.id])
        assert.deepStrictEqual(mine(yield* due(base + 100)), [...[first.id, leased.id].sort(), second.id])
        const settled = { ...first, state: "done" as const, attempts: 2, lastError: "provider said ä", updatedAt: Records.at(5) }
        yield* write((unit) => unit.updateOutboxEntry(settled))
        assert.deepStrictEqual(yield* read((unit) => unit.getOutboxEntry(first.id)), Option.some(settled))
        assert.deepStrictEqual(mine(yield* due(base + 10)), [second.id])
        assert.deepStrictEqual(yield* read((unit) => unit.listOutboxEntries(subjectId)), [settled, second].sort((a, b) => a.id < b.id ? -1 : 1))
        yield* write((unit) => Effect.forEach([second, leased, later, newerKind], (e) => unit.updateOutboxEntry({ ...e, state: "done" }), { discard: true }))
      }))

    it.effect("outbox: a lane held holds its pending entries no one has leased but the one named; resumed, they are due; nothing else changes", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const lane = randomUUID()
        const now = Records.at(1_000)
        const due = Records.outboxEntry(client.id, { kind: "deliverWebhook", lane, nextAttemptAt: Records.at(10) })
        const dueToo = Records.outboxEntry(client.id, { kind: "deliverWebhook", lane, nextAttemptAt: Records.at(20) })
        const leasedByAnother = Records.outboxEntry(client.id, { kind: "deliverWebhook", lane, nextAttemptAt: Records.at(10), leasedUntil: Records.at(2_000) })
        const leaseRanOut = Records.outboxEntry(client.id, { kind: "deliverWebhook", lane, nextAttemptAt: Records.at(10), leasedUntil: Records.at(500) })
        const dueLater = Records.outboxEntry(client.id, { kind: "deliverWebhook", lane, nextAttemptAt: Records.at(60_000) })
        const done = Records.outboxEntry(client.id, { kind: "deliverWebhook", lane, nextAttemptAt: Records.at(10), state: "done" })
        const otherLane = Records.outboxEntry(client.id, { kind: "deliverWebhook", lane: randomUUID(), nextAttemptAt: Records.at(10) })
        const failed = Records.outboxEntry(client.id, { kind: "deliverWebhook", lane, nextAttemptAt: Records.at(5_000), attempts: 1 })
        const all = [due, dueToo, leasedByAnother, leaseRanOut, dueLater, done, otherLane, failed]
        yield* write((unit) => Effect.forEach(all, unit.insertOutboxEntry, { discard: true }))
        const dueTimes = Effect.map(read((unit) => Effect.forEach(all, (entry) => unit.getOutboxEntry(entry.id))), (found) =>
          found.map((entry) => Option.getOrThrow(entry).nextAttemptAt))
        const held = Outbox.HELD
        assert.strictEqual(yield* write((unit) => unit.holdLane(lane, failed.id, now)), 4)
        assert.deepStrictEqual(yield* dueTimes, [held, held, Records.at(10), held, held, Records.at(10), Records.at(10), Records.at(5_000)])
        // Held again (the failed one failed again): nothing already held is written again.
        assert.strictEqual(yield* write((unit) => unit.holdLane(lane, failed.id, now)), 0)
        assert.deepStrictEqual(yield* read((unit) => unit.dueOutboxEntries(Records.at(9_000_000_000_000), 100, [], {})).pipe(
          Effect.map((entries) => entries.filter((entry) => entry.lane === lane).map((entry) => entry.id))
        ), [leasedByAnother.id, failed.id], "the held are never due; the one leased elsewhere once its lease ran out")
        assert.strictEqual(yield* write((unit) => unit.resumeLane(lane, Records.at(2_000))), 4)
        assert.deepStrictEqual(yield* dueTimes, [Records.at(2_000), Records.at(2_000), Records.at(10), Records.at(2_000), Records.at(2_000), Records.at(10), Records.at(10), Records.at(5_000)])
        const after = yield* read((unit) => Effect.forEach(all, (entry) => unit.getOutboxEntry(entry.id)))
        yield* write((unit) => Effect.forEach(all, (e) => unit.updateOutboxEntry({ ...Option.getOrThrow(after[all.indexOf(e)]!), state: "done" }), { discard: true }))
      }))

    it.effect("webhooks: housekeeping brings due the held deliveries of subscriptions that hold none, and only theirs", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const subscriptionOf = (deliveriesHeld: boolean) => ({
          id: randomUUID(), clientId: client.id, url: "https://hooks.example.com/h", eventTypes: [], enabled: true, disabledReason: null,
          secret: "whsec_c2VjcmV0", previousSecret: null, previousSecretUntil: null, deliveriesHeld, createdAt: Records.at(0), updatedAt: Records.at(0)
        })
        const holding = subscriptionOf(true)
        const notHolding = subscriptionOf(false)
        const entryOf = (lane: string, nextAttemptAt: Timestamp.Timestamp) => Records.outboxEntry(client.id, { kind: "deliverWebhook", lane, nextAttemptAt })
        const keptHeld = entryOf(holding.id, Outbox.HELD)
        const stray = entryOf(notHolding.id, Outbox.HELD)
        const untouched = entryOf(notHolding.id, Records.at(70_000))
        yield* write((unit) =>
          Effect.andThen(
            Effect.forEach([holding, notHolding], unit.insertWebhookSubscription, { discard: true }),
            Effect.forEach([keptHeld, stray, untouched], unit.insertOutboxEntry, { discard: true })
          ))
        const now = Records.at(80_000)
        assert.isAtLeast(yield* write((unit) => unit.resumeUnheldDeliveries(now)), 1)
        const after = yield* read((unit) => Effect.forEach([keptHeld, stray, untouched], (entry) => unit.getOutboxEntry(entry.id)))
        assert.deepStrictEqual(after.map((found) => Option.getOrThrow(found).nextAttemptAt), [Outbox.HELD, now, Records.at(70_000)])
        yield* write((unit) => Effect.forEach(after, (found) => unit.updateOutboxEntry({ ...Option.getOrThrow(found), state: "done" }), { discard: true }))
      }))

    it.effect("retention: settled outbox entries, settled webhook deliveries and expired idempotency keys deleted a batch at a time, the oldest first; pending and newer rows kept", () =>
      Effect.gen(function*() {
        // Deletes are global: instants long before every other test's rows.
        const t = (n: number) => Records.at(-30_000_000_000 + n)
        const before = t(1_000)
        const client = Records.client()
        const entry = (state: Outbox.EntryState, updatedAt: Timestamp.Timestamp, nextAttemptAt = t(0), kind: Outbox.EffectKind = "deliverWebhook") =>
          Records.outboxEntry(client.id, { kind, state, createdAt: t(0), nextAttemptAt, updatedAt })
        // The oldest first: given up at 1, done at 2, done at 3; pending ones (held, and due long ago), one settled at
        // the cut, and the kinds kept for good are kept: those a provider's callback names, and a later release's.
        const settled = [entry("done", t(3), t(0), "followTransfer"), entry("given_up", t(1)), entry("done", t(2), t(0), "followWhitelistedAddress")]
        const kept = [
          entry("pending", t(0), Outbox.HELD),
          entry("pending", t(0)),
          entry("done", before),
          entry("done", t(0), t(0), "submitTransfer"),
          entry("done", t(0), t(0), "registerWhitelistedAddress"),
          entry("done", t(0), t(0), "payoutBatch" as Outbox.EffectKind)
        ]
        // Migration 12's index is written with this list.
        assert.deepStrictEqual(Outbox.deletedOnceSettled, ["followTransfer", "followWhitelistedAddress", "deliverWebhook"])
        yield* write((unit) => Effect.forEach([...settled, ...kept], unit.insertOutboxEntry, { discard: true }))
        const remaining = (entries: ReadonlyArray<Outbox.OutboxEntry>) =>
          Effect.map(read((unit) => Effect.forEach(entries, (e) => unit.getOutboxEntry(e.id))), (found) => found.map(Option.isSome))
        assert.strictEqual(yield* write((unit) => unit.deleteSettledOutboxEntries(before, 2)), 2)
        assert.deepStrictEqual(yield* remaining(settled), [true, false, false])
        assert.strictEqual(yield* write((unit) => unit.deleteSettledOutboxEntries(before, 2)), 1)
        assert.strictEqual(yield* write((unit) => unit.deleteSettledOutboxEntries(before, 2)), 0)
        assert.deepStrictEqual(yield* remaining([...settled, ...kept]), [false, false, false, true, true, true, true, true, true])

        const delivery = (state: Webhook.WebhookDelivery["state"], updatedAt: Timestamp.Timestamp): Webhook.WebhookDelivery => ({
          id: randomUUID(), subscriptionId: randomUUID(), clientId: client.id, eventId: randomUUID(), entityId: randomUUID(),
          eventAt: t(0), payload: "{}", state, attempts: 1, lastStatus: null, lastError: null, lastLatencyMillis: null, createdAt: t(0), updatedAt
        })
        const settledDeliveries = [delivery("skipped", t(3)), delivery("delivered", t(1)), delivery("failed", t(2))]
        const keptDeliveries = [delivery("pending", t(0)), delivery("delivered", before)]
        yield* write((unit) => Effect.forEach([...settledDeliveries, ...keptDeliveries], unit.insertWebhookDelivery, { discard: true }))
        const deliveriesLeft = Effect.map(
          read((unit) => Effect.forEach([...settledDeliveries, ...keptDeliveries], (d) => unit.getWebhookDelivery(d.id))),
          (found) => found.map(Option.isSome)
        )
        assert.strictEqual(yield* write((unit) => unit.deleteSettledWebhookDeliveries(before, 2)), 2)
        assert.deepStrictEqual(yield* deliveriesLeft, [true, false, false, true, true])
        assert.strictEqual(yield* write((unit) => unit.deleteSettledWebhookDeliveries(before, 2)), 1)
        assert.deepStrictEqual(yield* deliveriesLeft, [false, false, false, true, true])

        const key = (expiresAt: Timestamp.Timestamp) => Records.idempotencyClaim({ createdAt: t(0), expiresAt })
        const expired = [key(t(3)), key(t(1)), key(t(2))]
        const unexpired = key(before)
        for (const claim of [...expired, unexpired]) {
          yield* write((unit) => Effect.andThen(unit.claimIdempotencyKey(claim), unit.completeIdempotencyKey(claim.scope, claim.key, "1")))
        }
        const keysLeft = Effect.map(
          read((unit) => Effect.forEach([...expired, unexpired], (c) => unit.findIdempotencyRecord(c.scope, c.key, t(0)))),
          (found) => found.map(Option.isSome)
        )
        assert.strictEqual(yield* write((unit) => unit.deleteExpiredIdempotencyRecords(before, 2)), 2)
        assert.deepStrictEqual(yield* keysLeft, [true, false, false, true])
        assert.strictEqual(yield* write((unit) => unit.deleteExpiredIdempotencyRecords(before, 2)), 1)
        assert.deepStrictEqual(yield* keysLeft, [false, false, false, true])
        // Nothing of this test's left due for another test's lease.
        yield* write((unit) => Effect.forEach(kept.slice(0, 2), (e) => unit.updateOutboxEntry({ ...e, state: "done" }), { discard: true }))
      }))

    it.effect("LIM-RATE-2: settings are kept by name and replaced; an API user's own budget round-trips", () =>
      Effect.gen(function*() {
        const name = `setting-${Records.client().id}`
        assert.isTrue(Option.isNone(yield* read((unit) => unit.getSetting(name))))
        yield* write((unit) => unit.putSetting(name, "{\"limit\":5}"))
        yield* write((unit) => unit.putSetting(name, "{\"limit\":7}"))
        assert.deepStrictEqual(yield* read((unit) => unit.getSetting(name)), Option.some("{\"limit\":7}"))
        const client = Records.client()
        const budgeted = Records.apiUser(client.id, { rateLimit: { limit: 3, windowSeconds: 9 } })
        const plain = Records.apiUser(client.id)
        yield* write((unit) => Effect.all([unit.insertClient(client), unit.insertApiUser(budgeted), unit.insertApiUser(plain)]))
        assert.deepStrictEqual(yield* read((unit) => unit.getApiUser(budgeted.id)), Option.some(budgeted))
        assert.deepStrictEqual(yield* read((unit) => unit.getApiUser(plain.id)), Option.some(plain))
      }))

    it.effect("webhooks: subscriptions kept and listed per client; deliveries logged newest first; the order check per record", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const subscription = {
          id: Records.client().id,
          clientId: client.id,
          url: "https://hooks.example.com/ä",
          eventTypes: ["account.created"],
          enabled: true,
          disabledReason: null,
          secret: "whsec_c2VjcmV0",
          previousSecret: null,
          previousSecretUntil: null,
          deliveriesHeld: false,
          createdAt: Records.at(0),
          updatedAt: Records.at(0)
        }
        yield* write((unit) => unit.insertWebhookSubscription(subscription))
        const disabled = { ...subscription, enabled: false, disabledReason: "dead", previousSecret: "whsec_b2xk", previousSecretUntil: Records.at(9), deliveriesHeld: true }
        yield* write((unit) => unit.updateWebhookSubscription(disabled))
        assert.deepStrictEqual(yield* read((unit) => unit.getWebhookSubscription(subscription.id)), Option.some(disabled))
        assert.deepStrictEqual(yield* read((unit) => unit.listWebhookSubscriptions(client.id)), [disabled])
        assert.deepStrictEqual(yield* read((unit) => unit.listWebhookSubscriptions(Records.client().id)), [])
        // Within one write unit, a list follows the unit's own writes to the subscriptions, and a later unit sees the commit.
        const added = { ...subscription, id: Records.client().id, url: "https://hooks.example.com/2" }
        const seen = yield* write((unit) =>
          Effect.gen(function*() {
            const before = yield* unit.listWebhookSubscriptions(client.id)
            yield* unit.insertWebhookSubscription(added)
            const afterInsert = yield* unit.listWebhookSubscriptions(client.id)
            yield* unit.updateWebhookSubscription({ ...added, enabled: false })
            const afterUpdate = yield* unit.listWebhookSubscriptions(client.id)
            return { before: before.length, afterInsert: afterInsert.length, enabledAfterUpdate: afterUpdate.find((s) => s.id === added.id)?.enabled }
          }))
        assert.deepStrictEqual(seen, { before: 1, afterInsert: 2, enabledAfterUpdate: false })
        yield* write((unit) => unit.updateWebhookSubscription({ ...added, enabled: true }))
        const later = yield* write((unit) => unit.listWebhookSubscriptions(client.id))
        assert.strictEqual(later.find((s) => s.id === added.id)?.enabled, true)
        // Each delivery's event, appended in the order of `n`, each stamped with the time `at`: a record's deliveries go
        // in the order of the log, whatever the times the nodes that wrote them stamped.
        const delivery = (n: number, entityId: string, at: number) => ({
          id: `0000000${n}-0000-7000-8000-${client.id.slice(-12)}`,
          subscriptionId: subscription.id,
          clientId: client.id,
          eventId: `0000000${n}-0000-7000-9000-${client.id.slice(-12)}`,
          entityId,
          eventAt: Records.at(at),
          payload: `{"n":${n}}`,
          state: "pending" as const,
          attempts: 0,
          lastStatus: null,
          lastError: null,
          lastLatencyMillis: null,
          createdAt: Records.at(n),
          updatedAt: Records.at(n)
        })
        // The second event of record "a" was stamped a second before the first: its node's clock ran behind.
        const [first, second, other] = [delivery(1, "a", 2000), delivery(2, "a", 1000), delivery(3, "b", 3000)]
        for (const d of [first, second, other]) {
          yield* write((unit) =>
            unit.appendEvent({
              id: d.eventId,
              type: "account.approved",
              clientId: client.id,
              entityType: "account",
              entityId: d.entityId,
              statusBefore: "pending_approval",
              statusAfter: "approved",
              actor: { kind: "operator" },
              at: d.eventAt,
              data: {}
            })
          )
        }
        yield* write((unit) => Effect.forEach([second, first, other], unit.insertWebhookDelivery, { discard: true }))
        assert.isFalse(yield* read((unit) => unit.hasEarlierPendingDelivery(first)))
        assert.isTrue(yield* read((unit) => unit.hasEarlierPendingDelivery(second)))
        assert.isFalse(yield* read((unit) => unit.hasEarlierPendingDelivery(other)))
        const delivered = { ...first, state: "delivered" as const, attempts: 2, lastStatus: 200, lastLatencyMillis: 12, updatedAt: Records.at(5) }
        yield* write((unit) => unit.updateWebhookDelivery(delivered))
        assert.isFalse(yield* read((unit) => unit.hasEarlierPendingDelivery(second)))
        assert.deepStrictEqual(yield* read((unit) => unit.getWebhookDelivery(first.id)), Option.some(delivered))
        assert.deepStrictEqual(ids(yield* read((unit) => unit.listWebhookDeliveries(subscription.id, 2))), [other.id, second.id])
      }))

    it.effect("GEN-5XX-1: a list filter holding U+0000 matches nothing, the same on every engine", () =>
      Effect.gen(function*() {
        const client = Records.client()
        yield* write((unit) => unit.insertClient(client))
        const page = { page: 1, limit: 10 }
        const empty = { items: [], total: 0 }
        for (const filter of [{ assetId: "BTC\u0000" }, { search: "\u0000" }, { search: "a\u0000b" }]) {
          assert.deepStrictEqual(yield* read((unit) => unit.listAccounts(client.id, filter, page)), empty)
        }
        assert.deepStrictEqual(yield* read((unit) => unit.listWhitelistedAddresses(client.id, { assetTypes: ["BTC", "\u0000"] }, page)), empty)
        assert.deepStrictEqual(yield* read((unit) => unit.listTransactions(client.id, { assetType: "\u0000" }, page)), empty)
        // The same filters without the NUL still run as usual afterwards (nothing cached for the NUL case).
        yield* write((unit) => unit.insertAccount(Records.account(client.id)))
        assert.strictEqual((yield* read((unit) => unit.listAccounts(client.id, { assetId: Records.account(client.id).assetId }, page))).total, 1)
      }))

    it.effect("money round-trips digit for digit: a 10^30 balance, 18-decimal amounts", () =>
      Effect.gen(function*() {
        const client = Records.client()
        yield* write((unit) => unit.insertClient(client))
        for (const amount of exactAmounts) {
          const account = Records.account(client.id, { availableBalance: amount })
          const tx = Records.transaction(account, { amount, networkFee: amount, reserved: amount })
          const entry = Records.ledgerEntry(account, { amount })
          yield* write((unit) =>
            unit.insertAccount(account).pipe(
              Effect.andThen(unit.insertTransaction(tx)),
              Effect.andThen(unit.insertLedgerEntry(entry))
            )
          )
          const stored = yield* read((unit) =>
            Effect.all([unit.getAccount(account.id), unit.getTransaction(tx.id), unit.listLedgerEntries(account.id)])
          )
          assert.strictEqual(Option.getOrThrow(stored[0]).availableBalance, amount)
          const storedTx = Option.getOrThrow(stored[1])
          assert.deepStrictEqual([storedTx.amount, storedTx.networkFee, storedTx.reserved], [amount, amount, amount])
          assert.strictEqual(stored[2][0]?.amount, amount)
        }
      }))

    it.effect("a failed unit writes nothing: error, defect and interruption all roll back", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const account = Records.account(client.id)
        const failed = yield* Effect.exit(write((unit) =>
          unit.insertClient(client).pipe(Effect.andThen(unit.insertAccount(account)), Effect.andThen(Effect.fail("refused" as const)))
        ))
        assert.isTrue(Exit.isFailure(failed))
        const died = yield* Effect.exit(write((unit) =>
          unit.insertClient(client).pipe(Effect.andThen(Effect.die(new Error("boom"))))
        ))
        assert.isTrue(Exit.hasDies(died))
        const started = yield* Deferred.make<void>()
        const fiber = yield* Effect.forkChild(write((unit) =>
          unit.insertClient(client).pipe(Effect.andThen(Deferred.succeed(started, undefined)), Effect.andThen(Effect.never))
        ))
        yield* Deferred.await(started)
        yield* Fiber.interrupt(fiber)
        assert.isTrue(Option.isNone(yield* read((unit) => unit.getClient(client.id))))
        assert.isTrue(Option.isNone(yield* read((unit) => unit.getAccount(account.id))))
        // The store is still usable after all three.
        yield* write((unit) => unit.insertClient(client))
        assert.isTrue(Option.isSome(yield* read((unit) => unit.getClient(client.id))))
      }))

    it.effect("a read unit and a lookup refuse every write and write nothing", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const account = Records.account(client.id)
        yield* write((unit) => unit.insertClient(client))
        const attempts: ReadonlyArray<(unit: Storage.StorageUnit) => Effect.Effect<unknown, Storage.StorageError>> = [
          (unit) => unit.insertClient(Records.client()),
          (unit) => unit.insertAccount(account),
          (unit) => unit.updateApiUser(Records.apiUser(client.id)),
          (unit) => unit.insertLedgerEntry(Records.ledgerEntry(account)),
          (unit) => unit.claimIdempotencyKey(Records.idempotencyClaim()),
          (unit) => unit.appendEvent({ id: Records.client().id, type: "client.created", clientId: client.id, entityType: "client", entityId: client.id, statusBefore: null, statusAfter: null, actor: { kind: "operator" }, at: Records.at(0), data: {} }),
          (unit) => unit.insertOutboxEntry(Records.outboxEntry(client.id)),
          (unit) => unit.deleteExpiredIdempotencyRecords(Records.at(0), 10),
          (unit) => unit.deleteSettledOutboxEntries(Records.at(0), 10),
          (unit) => unit.deleteSettledWebhookDeliveries(Records.at(0), 10)
        ]
        for (const attempt of attempts) {
          assert.isTrue(Exit.hasDies(yield* Effect.exit(read(attempt))))
          assert.isTrue(Exit.hasDies(yield* Effect.exit(lookup(attempt))))
        }
        assert.isTrue(Option.isNone(yield* read((unit) => unit.getAccount(account.id))))
        // The store is still usable: a lookup holds nothing open after it ends.
        assert.isTrue(Option.isSome(yield* lookup((unit) => unit.getClient(client.id))))
        yield* write((unit) => unit.insertAccount(account))
        assert.isTrue(Option.isSome(yield* lookup((unit) => unit.getAccount(account.id))))
      }))

    it.effect("a unit sees its own writes before it commits", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const account = Records.account(client.id)
        const seen = yield* write((unit) =>
          unit.insertClient(client).pipe(
            Effect.andThen(unit.insertAccount(account)),
            Effect.andThen(unit.updateAccount({ ...account, availableBalance: Money.canonical("7") })),
            Effect.andThen(unit.getAccount(account.id))
          )
        )
        assert.strictEqual(Option.getOrThrow(seen).availableBalance, "7")
      }))

    it.effect("Storage.run inside a write unit joins it: it sees the unit's writes and commits or rolls back with it", () =>
      Effect.gen(function*() {
        const kept = Records.client()
        const keptAccount = Records.account(kept.id)
        const seen = yield* Storage.run("write", (unit) =>
          unit.insertClient(kept).pipe(
            Effect.andThen(Storage.run("read", (inner) => inner.getClient(kept.id))),
            Effect.tap(() => Storage.run("write", (inner) => inner.insertAccount(keptAccount)))
          ))
        assert.isTrue(Option.isSome(seen))
        assert.isTrue(Option.isSome(yield* read((unit) => unit.getAccount(keptAccount.id))))

        const dropped = Records.client()
        const droppedAccount = Records.account(dropped.id)
        const failed = yield* Effect.exit(Storage.run("write", (unit) =>
          unit.insertClient(dropped).pipe(
            Effect.andThen(Storage.run("write", (inner) => inner.insertAccount(droppedAccount))),
            Effect.andThen(Effect.fail("refused" as const))
          )))
        assert.isTrue(Exit.isFailure(failed) && !Exit.hasDies(failed))
        assert.isTrue(Option.isNone(yield* read((unit) => unit.getClient(dropped.id))))
        assert.isTrue(Option.isNone(yield* read((unit) => unit.getAccount(droppedAccount.id))))
      }))

    it.effect("Storage.run inside a read unit joins it for a read and dies for a write, which writes nothing", () =>
      Effect.gen(function*() {
        const client = Records.client()
        yield* write((unit) => unit.insertClient(client))
        const found = yield* Storage.run("read", () => Storage.run("read", (inner) => inner.getClient(client.id)))
        assert.isTrue(Option.isSome(found))
        const account = Records.account(client.id)
        const attempted = yield* Effect.exit(
          Storage.run("read", () => Storage.run("write", (inner) => inner.insertAccount(account)))
        )
        assert.isTrue(Exit.hasDies(attempted))
        assert.isTrue(Option.isNone(yield* read((unit) => unit.getAccount(account.id))))
        // The unit is closed once its run ends: the next run opens its own, and a write is allowed again.
        yield* Storage.run("write", (unit) => unit.insertAccount(account))
        assert.isTrue(Option.isSome(yield* read((unit) => unit.getAccount(account.id))))
      }))

    it.effect("duplicate ids and key ids are refused with StorageConstraintViolated", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const account = Records.account(client.id)
        const user = Records.apiUser(client.id)
        const entry = Records.whitelisted(client.id)
        const tx = Records.transaction(account)
        yield* write((unit) =>
          Effect.all([unit.insertClient(client), unit.insertAccount(account), unit.insertApiUser(user), unit.insertWhitelistedAddress(entry), unit.insertTransaction(tx)])
        )
        const duplicates: ReadonlyArray<(unit: Storage.StorageUnit) => Effect.Effect<void, Storage.StorageError>> = [
          (unit) => unit.insertClient(client),
          (unit) => unit.insertAccount(account),
          (unit) => unit.insertApiUser({ ...Records.apiUser(client.id), keyId: user.keyId }),
          (unit) => unit.insertWhitelistedAddress({ ...entry, status: "ARCHIVED" }),
          (unit) => unit.insertTransaction(tx)
        ]
        for (const duplicate of duplicates) {
          const error = yield* Effect.flip(write(duplicate))
          assert.strictEqual(reasonOf(error), "StorageConstraintViolated")
          assert.isTrue(error.isRetryable)
        }
      }))

    it.effect("write units never interleave: concurrent read-modify-write loses no update", () =>
      Effect.gen(function*() {
        const client = Records.client()
        const account = Records.account(client.id)
        yield* write((unit) => unit.insertClient(client).pipe(Effect.andThen(unit.insertAccount(account))))
        yield* Effect.forEach(
          Array.from({ length: 25 }),
          () =>
            write((unit) =>
              Effect.gen(function*() {
                const current = Option.getOrThrow(yield* unit.getAccount(account.id))
                yield* Effect.yieldNow
                yield* unit.updateAccount({ ...current, availableBalance: Money.add(current.availableBalance, Money.canonical("0.1")) })
              })
            ),
          { concurrency: "unbounded", discard: true }
        )
        const final = Option.getOrThrow(yield* read((unit) => unit.getAccount(account.id)))
        assert.strictEqual(final.availableBalance, "2.5")
      }))

    it.effect("concurrent claims of one idempotency key: one unit runs, every other one sees its committed result", () =>
      Effect.gen(function*() {
        const claim = Records.idempotencyClaim()
        const outcomes = yield* Effect.forEach(
          Array.from({ length: 10 }, (_, i) => i),
          (i) =>
            write((unit) =>
              Effect.flatMap(unit.claimIdempotencyKey(claim), (found) =>
                Option.isSome(found)
                  ? Effect.succeed(found.value.result)
                  : Effect.as(unit.completeIdempotencyKey(claim.scope, claim.key, `ran ${i}`), `ran ${i}`))),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(new Set(outcomes).size, 1, `every claim answers the one result: ${outcomes.join(", ")}`)
      }))

    it.effect("rate limiter: a fixed window per key, aligned to the epoch", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.RateLimiter
        const key = `crk_${Records.client().id}`
        const policy = { limit: 2, windowSeconds: 60 }
        yield* TestClock.setTime(Date.UTC(2026, 0, 1, 12, 0, 10))
        const decisions = yield* Effect.forEach([1, 2, 3], () => limiter.consume(key, policy))
        assert.deepStrictEqual(decisions.map((d) => [d.allowed, d.remaining]), [[true, 1], [true, 0], [false, 0]])
        assert.strictEqual(decisions[2]?.resetAt, Date.UTC(2026, 0, 1, 12, 1, 0) / 1000)
        assert.strictEqual(decisions[2]?.retryAfterSeconds, 50)
        assert.isTrue((yield* limiter.consume(`${key}-other`, policy)).allowed)
        yield* TestClock.adjust("60 seconds")
        const next = yield* limiter.consume(key, policy)
        assert.deepStrictEqual([next.allowed, next.remaining], [true, 1])
      }).pipe(Effect.provide(TestClock.layer())))
  })
