/**
 * Statements compiled once per column set (StatementTemplate) compile to exactly what kysely compiles per call:
 * the same SQL and the same parameters in the same order, on both engines' compilers, for any set of columns and
 * any values; a value bound at several places is bound at each from one template; an insert of several rows is
 * compiled once per number of rows and binds each row's values; and a statement with a value kysely inlines, or
 * rows that name different columns, is compiled per call. An idempotency key's statements, kept once by the store,
 * compile to what kysely compiles per call.
 */
import { describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { type CompiledQuery, DummyDriver, Kysely, sql, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler, SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler } from "kysely"
import { assert } from "vitest"
import { PostgresEngine } from "../src/postgres/PostgresEngine.js"
import type { AccountsTable, Database, DomainEventsTable, IdempotencyKeysTable, TransactionsTable } from "../src/schema/Database.js"
import { SqliteEngine } from "../src/sqlite/SqliteEngine.js"
import { byColumns, byKey, byRows } from "../src/StatementTemplate.js"
import { idempotencyKeyStatements, storeStatementsOf } from "../src/StoreStatements.js"

const compilersOnly = (dialect: "sqlite" | "postgres") =>
  new Kysely<Database>({
    dialect: dialect === "sqlite"
      ? {
        createAdapter: () => new SqliteAdapter(),
        createDriver: () => new DummyDriver(),
        createIntrospector: (db) => new SqliteIntrospector(db),
        createQueryCompiler: () => new SqliteQueryCompiler()
      }
      : {
        createAdapter: () => new PostgresAdapter(),
        createDriver: () => new DummyDriver(),
        createIntrospector: (db) => new PostgresIntrospector(db),
        createQueryCompiler: () => new PostgresQueryCompiler()
      }
  })

const accountColumns = [
  "name", "name_folded", "description", "workspace", "role", "asset_id", "asset_id_folded", "chain_type", "address",
  "address_folded", "status", "available_balance", "required_approvals", "updated_at"
] as const

// Values of every kind a row holds, including ones that look like the template's own markers.
const value = fc.oneof(fc.string(), fc.constant("\u0000name"), fc.integer(), fc.constant(null), fc.constant(undefined))

const changes = fc.record({
  id: fc.uuid(),
  values: fc.dictionary(fc.constantFrom(...accountColumns), value, { minKeys: 1 })
})

describe("StatementTemplate", () => {
  for (const dialect of ["sqlite", "postgres"] as const) {
    const db = compilersOnly(dialect)
    type Update = Partial<AccountsTable> & Pick<AccountsTable, "id">
    const build = ({ id, ...set }: Update) => db.updateTable("accounts").set(set).where("id", "=", id)

    it(`${dialect}: an update compiled once per column set is what kysely compiles per call`, () => {
      const update = byColumns(build)
      fc.assert(
        fc.property(changes, ({ id, values }) => {
          const row = { ...values, id } as Update
          // Every value undefined leaves nothing to set: kysely refuses that either way.
          if (Object.keys(values).every((column) => (values as Record<string, unknown>)[column] === undefined)) return
          const once = update(row).compile()
          const each = build(row).compile()
          assert.strictEqual(once.sql, each.sql)
          assert.deepStrictEqual(once.parameters, each.parameters)
        }),
        { numRuns: 500 }
      )
    })

    it(`${dialect}: an insert of a whole row is what kysely compiles per call`, () => {
      const insertRow = (row: TransactionsTable) => db.insertInto("transactions").values(row)
      const insert = byColumns(insertRow)
      fc.assert(
        fc.property(fc.uuid(), fc.string(), fc.integer(), fc.option(fc.string()), (id, text, count, maybe) => {
          const row = {
            id, client_id: text, source_account_id: id, destination_id: text, destination_type: "external",
            destination_address: text, amount: "1.5", asset_type: "BTC", network_fee: "0.0001", fee_asset_id: "BTC",
            reserved: "1.5001", status: "SUBMITTED", status_group: "pending", sub_status: maybe, required_approvals: count,
            created_by_api_user_id: id, created_by_name: text, decisions: "[]", provider_transaction_id: maybe,
            approved_at: null, provider_approved_at: null, created_at: text, updated_at: text
          } as unknown as TransactionsTable
          const once = insert(row).compile()
          const each = insertRow(row).compile()
          assert.strictEqual(once.sql, each.sql)
          assert.deepStrictEqual(once.parameters, each.parameters)
        }),
        { numRuns: 200 }
      )
    })

    it(`${dialect}: a value bound twice is bound at both places from one template`, () => {
      let built = 0
      const twice = byColumns((row: { readonly id: string; readonly name: string }) => {
        built++
        return db.updateTable("accounts").set({ name: row.name, name_folded: row.name }).where("id", "=", row.id as AccountsTable["id"])
      })
      const first = twice({ id: "a", name: "x" }).compile()
      const second = twice({ id: "b", name: "y" }).compile()
      assert.deepStrictEqual(first.parameters, ["x", "x", "a"])
      assert.deepStrictEqual(second.parameters, ["y", "y", "b"])
      assert.strictEqual(second.sql, db.updateTable("accounts").set({ name: "y", name_folded: "y" }).where("id", "=", "b" as AccountsTable["id"]).compile().sql)
      // The template, compiled once.
      assert.strictEqual(built, 1)
    })

    it(`${dialect}: a value kysely inlines is compiled per call, never from a template`, () => {
      let built = 0
      const inlined = byColumns((row: { readonly id: string; readonly name: string }) => {
        built++
        return db.updateTable("accounts").set({ name: sql.lit(row.name) }).where("id", "=", row.id as AccountsTable["id"])
      })
      assert.deepStrictEqual(inlined({ id: "a", name: "x" }).compile().parameters, ["a"])
      assert.include(inlined({ id: "b", name: "y" }).compile().sql, "'y'")
      // One template attempt, then one build per call.
      assert.strictEqual(built, 3)
    })

    it(`${dialect}: an insert of several rows is what kysely compiles per call, one template per number of rows`, () => {
      type EventRow = Omit<DomainEventsTable, "position">
      let built = 0
      const insertRows = (rows: ReadonlyArray<EventRow>) => db.insertInto("domain_events").values(rows)
      const insert = byRows((rows: ReadonlyArray<EventRow>) => {
        built++
        return insertRows(rows)
      })
      const text = fc.oneof(fc.string(), fc.constant("\u00000#id"), fc.constant("\u0000key"))
      const event = fc.record({
        id: text, type: text, client_id: fc.option(text), entity_type: text, entity_id: text,
        status_before: fc.option(text), status_after: fc.option(text), actor: text, at: text, data: text
      }) as fc.Arbitrary<EventRow>
      fc.assert(
        fc.property(fc.array(event, { minLength: 1, maxLength: 4 }), (rows) => {
          const once = insert(rows).compile()
          const each = insertRows(rows).compile()
          assert.strictEqual(once.sql, each.sql)
          assert.deepStrictEqual(once.parameters, each.parameters)
        }),
        { numRuns: 300 }
      )
      // One template for each number of rows (1 to 4), each built once.
      assert.strictEqual(built, 4)
    })

    it(`${dialect}: rows that name different columns are compiled per call, as kysely fills them in`, () => {
      type LooseRow = Readonly<Record<string, unknown>>
      const insertRows = (rows: ReadonlyArray<LooseRow>) => db.insertInto("domain_events").values(rows as unknown as ReadonlyArray<Omit<DomainEventsTable, "position">>)
      const insert = byRows(insertRows)
      const full = { id: "a", type: "t", client_id: null, entity_type: "e", entity_id: "x", status_before: null, status_after: null, actor: "{}", at: "now", data: "{}" }
      const { status_before: _, ...short } = { ...full, id: "b" }
      const rowSets: ReadonlyArray<ReadonlyArray<LooseRow>> = [[full, short], [short, full], [full, { ...short, status_before: undefined }]]
      for (const rows of rowSets) {
        const once = insert(rows).compile()
        const each = insertRows(rows).compile()
        assert.strictEqual(once.sql, each.sql)
        assert.deepStrictEqual(once.parameters, each.parameters)
      }
    })

    it(`${dialect}: a lookup by key is compiled once and run with each key`, () => {
      let built = 0
      const lookup = byKey((id: AccountsTable["id"]) => {
        built++
        return db.selectFrom("accounts").selectAll().where("id", "=", id)
      })
      for (const id of ["a", "b", "\u0000key"] as Array<AccountsTable["id"]>) {
        const compiled = lookup(id).compile()
        assert.deepStrictEqual(compiled.parameters, [id])
        assert.strictEqual(compiled.sql, db.selectFrom("accounts").selectAll().where("id", "=", id).compile().sql)
      }
      assert.strictEqual(built, 1)
    })

    it(`${dialect}: an idempotency key's statements compiled once (StoreStatements) are what kysely compiles per call`, () => {
      const { lookups, writes } = storeStatementsOf(db, dialect === "sqlite" ? SqliteEngine : PostgresEngine)
      const perCall = idempotencyKeyStatements(db)
      const text = fc.oneof(fc.string(), fc.constant("\u0000scope"), fc.constant("\u0000key"))
      fc.assert(
        fc.property(fc.record({ scope: text, key: text, fingerprint: text, result: fc.option(text), created_at: text, expires_at: text, now: text }), (values) => {
          const { now, ...row } = values
          const kept = row as IdempotencyKeysTable
          const same = (once: CompiledQuery, each: CompiledQuery) => {
            assert.strictEqual(once.sql, each.sql)
            assert.deepStrictEqual(once.parameters, each.parameters)
          }
          same(writes.keepIdempotencyKey(kept).compile(), perCall.keep(kept).compile())
          same(writes.claimIdempotencyKey(kept).compile(), perCall.claim(kept).compile())
          same(lookups.idempotencyRecord({ scope: row.scope, key: row.key, now }).compile(), perCall.record({ scope: row.scope, key: row.key, now }).compile())
          same(lookups.idempotencyKey[1]({ scope: row.scope, key: row.key }).compile(), perCall.row({ scope: row.scope, key: row.key }).forUpdate().compile())
          same(
            writes.updateIdempotencyKey({ scope: row.scope, key: row.key, result: row.result }).compile(),
            perCall.update({ scope: row.scope, key: row.key, result: row.result }).compile()
          )
        }),
        { numRuns: 200 }
      )
    })
  }
})
