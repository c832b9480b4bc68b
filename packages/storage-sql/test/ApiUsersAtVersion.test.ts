/**
 * API users kept on a SQLite file while nothing commits (ApiUsersAtVersion), under AUTH-PERM-2: a lookup by key id
 * (the authentication's read) answers the row as it is when the lookup runs, whatever committed a change: another
 * connection (as the operator CLI or a second server would), or this storage's own write unit. While nothing
 * commits, it reads no row: better-sqlite3's statements are counted. A model (fast-check) interleaves lookups with
 * changes from both sides, and unrelated commits, against the row another connection reads.
 */
import { assert, describe, it } from "@effect/vitest"
import { type ApiUser, type Ids, type Permission, Timestamp } from "@custody-relay/core"
import BetterSqlite3 from "better-sqlite3"
import { Effect, Option } from "effect"
import * as fc from "fast-check"
import { join } from "node:path"
import { migrateToLatest } from "../src/migrations/migrateToLatest.js"
import * as ApiUserRow from "../src/rows/ApiUserRow.js"
import { openSqlite } from "../src/sqlite/layerSqlite.js"
import { SqliteEngine } from "../src/sqlite/SqliteEngine.js"
import * as SqlStorage from "../src/SqlStorage.js"
import type { ApiUsersTable } from "../src/schema/Database.js"
import { countedStatements } from "./CountedStatements.js"
import { isWanted, temporaryDirectory } from "./Dialects.js"
import * as Records from "./Records.js"

/** How many times a statement reading an API user by key id ran, on any connection of this process. */
const keyIdReads = countedStatements("all", (statement) => statement.source.includes(`from "api_users" where "key_id"`))

/** A migrated file, its storage, and a plain connection to it (another process, as far as SQLite can tell). */
const openStore = (options: SqlStorage.SqlStorageOptions = {}, groupCommits = true) =>
  Effect.gen(function*() {
    const filename = join(yield* temporaryDirectory, "kept.db")
    const db = yield* Effect.acquireRelease(
      Effect.promise(() => openSqlite({ filename, checkpointIntervalMillis: 0, groupCommits })),
      (db) => Effect.promise(() => db.destroy())
    )
    yield* Effect.promise(() => migrateToLatest(db))
    const other = yield* Effect.acquireRelease(Effect.sync(() => new BetterSqlite3(filename)), (other) => Effect.sync(() => other.close()))
    const storage = SqlStorage.make(db, SqliteEngine, options)
    const client = Records.client()
    const users = Array.from({ length: 3 }, () => Records.apiUser(client.id))
    yield* storage.transaction("write", (unit) =>
      Effect.andThen(unit.insertClient(client), Effect.forEach(users, (user) => unit.insertApiUser(user), { discard: true })))
    return {
      storage,
      client,
      users,
      other,
      lookup: (keyId: string) => storage.transaction("lookup", (unit) => unit.findApiUserByKeyId(keyId)),
      /** The row as another connection reads it now, decoded as the store decodes it. */
      committed: (keyId: string): Option.Option<ApiUser.ApiUser> => {
        const row = other.prepare("select * from api_users where key_id = ?").get(keyId) as ApiUsersTable | undefined
        return row === undefined ? Option.none() : Option.some(ApiUserRow.decode(row))
      },
      /** A change of this storage's own, through a write unit. */
      ownChange: (id: Ids.ApiUserId, change: (user: ApiUser.ApiUser) => ApiUser.ApiUser) =>
        storage.transaction("write", (unit) =>
          Effect.flatMap(unit.getApiUser(id), (found) => Option.isSome(found) ? unit.updateApiUser(change(found.value)) : Effect.void))
    }
  })

const permissionsOf = (found: Option.Option<ApiUser.ApiUser>) => Option.getOrUndefined(Option.map(found, (user) => user.permissions))

describe.skipIf(!isWanted("sqlite-file"))("API users kept on a SQLite file while nothing commits (ApiUsersAtVersion)", () => {
  it.live("AUTH-PERM-2: a lookup answers the kept API user while nothing commits, and the row as changed after a commit by another connection or by the storage itself", () =>
    Effect.gen(function*() {
      const counter = yield* keyIdReads
      const { users, other, lookup, ownChange, storage } = yield* openStore()
      const user = users[0]!
      assert.deepStrictEqual(yield* lookup(user.keyId), Option.some(user))
      const before = counter.calls
      for (let i = 0; i < 5; i++) assert.deepStrictEqual(yield* lookup(user.keyId), Option.some(user))
      assert.strictEqual(counter.calls, before, "an unchanged file reads no API user")

      // Another connection (the operator CLI, another server) takes a permission away, then revokes the key.
      other.prepare("update api_users set permissions = ? where key_id = ?").run(JSON.stringify(["Approve transaction"]), user.keyId)
      assert.deepStrictEqual(permissionsOf(yield* lookup(user.keyId)), ["Approve transaction"])
      other.prepare("update api_users set revoked_at = ? where key_id = ?").run("2026-02-01T00:00:00.000Z", user.keyId)
      const revoked = yield* lookup(user.keyId)
      assert.isTrue(Option.isSome(revoked) && revoked.value.revokedAt !== null)

      // This storage's own write unit.
      const second = users[1]!
      assert.deepStrictEqual(yield* lookup(second.keyId), Option.some(second))
      yield* ownChange(second.id, (found) => ({ ...found, permissions: ["View custody account"], updatedAt: Timestamp.fromMillis(Date.UTC(2026, 1, 1)) }))
      assert.deepStrictEqual(permissionsOf(yield* lookup(second.keyId)), ["View custody account"])

      // Any commit moves the version, so the next lookup reads the row again (and finds it unchanged).
      const reads = counter.calls
      yield* storage.transaction("write", (unit) => unit.insertClient(Records.client()))
      assert.deepStrictEqual(permissionsOf(yield* lookup(second.keyId)), ["View custody account"])
      assert.strictEqual(counter.calls, reads + 1)
    }))

  it.live("an unknown key id is read on every lookup and never kept; keepCredentials: false, and a file without a read-only connection, read every time", () =>
    Effect.gen(function*() {
      const counter = yield* keyIdReads
      const { lookup } = yield* openStore()
      const unknown = Records.apiUser(null).keyId
      const start = counter.calls
      for (let i = 0; i < 3; i++) assert.isTrue(Option.isNone(yield* lookup(unknown)))
      assert.strictEqual(counter.calls, start + 3)

      // Without grouped commits the one connection's data version never moves with its own commits.
      for (const reading of [yield* openStore({ keepCredentials: false }), yield* openStore({}, false)]) {
        const user = reading.users[0]!
        const from = counter.calls
        for (let i = 0; i < 3; i++) assert.deepStrictEqual(yield* reading.lookup(user.keyId), Option.some(user))
        assert.strictEqual(counter.calls, from + 3)
      }
    }))

  type Step =
    | { readonly kind: "lookup"; readonly which: number }
    | { readonly kind: "foreign"; readonly which: number; readonly permissions: ReadonlyArray<Permission.Permission>; readonly revoke: boolean }
    | { readonly kind: "own"; readonly which: number; readonly permissions: ReadonlyArray<Permission.Permission> }
    | { readonly kind: "unrelated" }
    | { readonly kind: "foreignKey"; readonly which: number }

  const permissions = fc.subarray<Permission.Permission>(["View custody account", "Approve transaction", "Initiate new custody account"])
  const which = fc.nat({ max: 2 })
  const step: fc.Arbitrary<Step> = fc.oneof(
    { weight: 5, arbitrary: fc.record({ kind: fc.constant("lookup" as const), which }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant("foreign" as const), which, permissions, revoke: fc.boolean() }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant("own" as const), which, permissions }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("unrelated" as const) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("foreignKey" as const), which }) }
  )

  it.live("AUTH-PERM-2 (model): every lookup answers what another connection reads at that moment, whichever side changed the row", () =>
    Effect.gen(function*() {
      const { users, other, lookup, committed, ownChange, storage } = yield* openStore()
      // Key ids as the model knows them: a foreign change may move a user to a new key id (a rotated key).
      const keyIds = users.map((user) => user.keyId)
      const retired: Array<string> = []
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 25 }), (steps) =>
            Effect.runPromise(Effect.gen(function*() {
              for (const next of steps) {
                const user = users[next.kind === "unrelated" ? 0 : next.which]!
                const index = users.indexOf(user)
                switch (next.kind) {
                  case "lookup": {
                    for (const keyId of [keyIds[index]!, ...retired.slice(-2)]) {
                      assert.deepStrictEqual(yield* lookup(keyId), committed(keyId))
                    }
                    break
                  }
                  case "foreign":
                    other.prepare("update api_users set permissions = ?, revoked_at = ? where id = ?")
                      .run(JSON.stringify(next.permissions), next.revoke ? "2026-02-01T00:00:00.000Z" : null, user.id)
                    break
                  case "own":
                    yield* ownChange(user.id, (found) => ({ ...found, permissions: next.permissions }))
                    break
                  case "unrelated":
                    yield* storage.transaction("write", (unit) => unit.insertClient(Records.client()))
                    break
                  case "foreignKey": {
                    const keyId = Records.apiUser(null).keyId
                    other.prepare("update api_users set key_id = ? where id = ?").run(keyId, user.id)
                    retired.push(keyIds[index]!)
                    keyIds[index] = keyId
                    break
                  }
                }
              }
            }))
          ),
          { numRuns: 60 }
        )
      )
    }))
})
