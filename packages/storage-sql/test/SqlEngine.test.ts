import { assert, describe, it } from "@effect/vitest"
import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from "kysely"
import type { Database } from "../src/schema/Database.js"
import { literalParameters } from "../src/SqlEngine.js"

/** A kysely instance that compiles PostgreSQL's statements and runs none. */
const compiler = new Kysely<Database>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler()
  }
})

const compiled = (text: string, position: number) =>
  compiler.selectFrom("domain_events").select("id")
    .where((eb) => eb.and([eb("client_id", "=", literalParameters.text(text)), eb("position", ">", literalParameters.integer(position))]))
    .compile()

describe("values written into a statement (PostgreSQL's counts planned for their values)", () => {
  it("an id, an event type, an instant and a position are written in, and the statement binds nothing", () => {
    assert.include(compiled("", -3).sql, `"client_id" = '' and "position" > -3`)
    for (const text of ["01a22ffd-1cc9-7227-9ef7-2b7133303efc", "funds.reserved", "2026-01-31T12:00:00.000Z", "transaction"]) {
      const query = compiled(text, 4_096)
      assert.include(query.sql, `"client_id" = '${text}'`)
      assert.include(query.sql, `"position" > 4096`)
      assert.deepStrictEqual(query.parameters, [])
    }
  })

  it("any other value (an embedder's filter no HTTP layer checked) is bound as a parameter, never written into the SQL", () => {
    for (const text of ["x' or '1'='1", "a\\' or true --", "2026-01-01 00:00:00+01", "é"]) {
      const query = compiled(text, 1)
      assert.notInclude(query.sql, text)
      assert.deepStrictEqual(query.parameters, [text])
    }
    for (const position of [1.5, 2 ** 53, 1e21, Number.NaN]) assert.deepStrictEqual(compiled("a", position).parameters, [position])
    // A number where a string was promised (a caller without type checks) is not written in as a number.
    assert.deepStrictEqual(compiled(5 as unknown as string, 1).parameters, [5])
  })
})
