/** The SQLite statement cache: a statement is prepared once while kept, and the least recently used goes first. */
import { assert, describe, it } from "@effect/vitest"
import type { SqliteDatabase, SqliteStatement } from "kysely"
import { withStatementCache } from "../src/sqlite/StatementCache.js"

const counting = () => {
  const prepared: Array<string> = []
  let closed = false
  const statement: SqliteStatement = {
    reader: true,
    all: () => [],
    run: () => ({ changes: 0, lastInsertRowid: 0 }),
    iterate: () => [][Symbol.iterator]()
  }
  const database: SqliteDatabase = {
    close: () => {
      closed = true
    },
    prepare: (sql) => {
      prepared.push(sql)
      return statement
    }
  }
  return { database, prepared, isClosed: () => closed }
}

describe("StatementCache", () => {
  it("prepares a statement once while it is kept, and evicts the least recently used", () => {
    const { database, isClosed, prepared } = counting()
    const cached = withStatementCache(database, 2)
    cached.prepare("a")
    cached.prepare("b")
    cached.prepare("a")
    assert.deepStrictEqual(prepared, ["a", "b"])
    cached.prepare("c") // evicts b, the least recently used
    cached.prepare("a")
    cached.prepare("b")
    assert.deepStrictEqual(prepared, ["a", "b", "c", "b"])
    cached.close()
    assert.isTrue(isClosed())
  })
})
