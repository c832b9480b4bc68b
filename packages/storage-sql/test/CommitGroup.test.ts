/**
 * Write units on a SQLite file that run in the same turn of the event loop share one COMMIT (CommitGroup): each
 * in the group's transaction, none answered before the group is committed, a failing one leaving no trace (alone
 * when it changed nothing, with its group run again when it did), a failing commit failing them all, and nothing
 * else on the connection ever seeing the group's writes uncommitted. A second connection (better-sqlite3, as
 * another process would open the file) says what is committed.
 */
import { assert, describe, it } from "@effect/vitest"
import { type Client, Storage } from "@custody-relay/core"
import BetterSqlite3 from "better-sqlite3"
import { Effect, Exit, Fiber, Option } from "effect"
import { CompiledQuery } from "kysely"
import { statSync } from "node:fs"
import { join } from "node:path"
import { migrateToLatest } from "../src/migrations/migrateToLatest.js"
import { openSqlite, type SqliteOptions } from "../src/sqlite/layerSqlite.js"
import { SqliteEngine } from "../src/sqlite/SqliteEngine.js"
import { handleOf } from "../src/sqlite/SqliteSession.js"
import * as SqlStorage from "../src/SqlStorage.js"
import { isWanted, temporaryDirectory } from "./Dialects.js"
import * as Records from "./Records.js"

/** A migrated file with its storage, and a plain connection to it that reads what is committed. */
const openStore = (options: Partial<SqliteOptions> = {}) =>
  Effect.gen(function*() {
    const filename = join(yield* temporaryDirectory, "group.db")
    // No checkpoint worker: the WAL keeps every frame the test's commits append.
    const db = yield* Effect.acquireRelease(
      Effect.promise(() => openSqlite({ filename, checkpointIntervalMillis: 0, ...options })),
      (db) => Effect.promise(() => db.destroy())
    )
    yield* Effect.promise(() => migrateToLatest(db))
    const other = yield* Effect.acquireRelease(Effect.sync(() => new BetterSqlite3(filename, { readonly: true })), (other) => Effect.sync(() => other.close()))
    const committed = (id: string) => other.prepare("select count(*) as n from clients where id = ?").get(id) as { n: number }
    return {
      db,
      storage: SqlStorage.make(db, SqliteEngine),
      isCommitted: (client: Client.Client) => committed(client.id).n === 1,
      walFrames: () => Math.max(0, Math.floor((statSync(`${filename}-wal`).size - 32) / (4096 + 24)))
    }
  })

const insert = (storage: Storage.Storage["Service"], client: Client.Client) => storage.transaction("write", (unit) => unit.insertClient(client))

describe.skipIf(!isWanted("sqlite-file"))("SQLite write units in one turn share a commit (CommitGroup)", () => {
  it.live("units started together commit once: fewer WAL frames than the same units one after another", () =>
    Effect.gen(function*() {
      const { storage, walFrames } = yield* openStore()
      const start = walFrames()
      for (const client of Array.from({ length: 8 }, () => Records.client())) yield* insert(storage, client)
      const apart = walFrames() - start
      const together = Array.from({ length: 8 }, () => Records.client())
      yield* Effect.all(together.map((client) => insert(storage, client)), { concurrency: "unbounded" })
      const grouped = walFrames() - start - apart
      // Eight commits append the clients' page (and its index's) eight times; one commit appends them once.
      assert.isAtLeast(apart, 8)
      assert.isAtMost(grouped, apart / 4)
      const found = yield* storage.transaction("read", (unit) => unit.listClients())
      assert.strictEqual(found.length, 16)
    }))

  it.live("a unit is answered only once its group is committed, and lookups meanwhile read what is committed", () =>
    Effect.gen(function*() {
      const { storage, isCommitted } = yield* openStore()
      const client = Records.client()
      // Runs synchronously up to the wait for the group's commit, which comes at the end of this turn.
      const fiber = Effect.runFork(insert(storage, client))
      assert.isUndefined(fiber.pollUnsafe())
      assert.isFalse(isCommitted(client))
      const looked = Effect.runSyncExit(storage.transaction("lookup", (unit) => unit.getClient(client.id)))
      assert.isTrue(Exit.isSuccess(looked) && looked.value._tag === "None")
      yield* Fiber.join(fiber)
      assert.isTrue(isCommitted(client))
    }))

  it.live("a read unit and kysely's statements commit the open group first, and are not part of it", () =>
    Effect.gen(function*() {
      const { db, storage, isCommitted } = yield* openStore()
      const first = Records.client()
      const waiting = Effect.runFork(insert(storage, first))
      assert.isFalse(isCommitted(first))
      // A read unit in the same turn: its snapshot comes after the group's commit.
      const read = Effect.runSyncExit(storage.transaction("read", (unit) => unit.getClient(first.id)))
      assert.isTrue(Exit.isSuccess(read) && read.value._tag === "Some")
      assert.isTrue(isCommitted(first))
      yield* Fiber.join(waiting)

      const second = Records.client()
      const next = Effect.runFork(insert(storage, second))
      assert.isFalse(isCommitted(second))
      yield* Effect.promise(() => db.insertInto("rate_limit_windows").values({ key: "k", window_start: 0, window_end: 1, count: 1 }).execute())
      assert.isTrue(isCommitted(second))
      yield* Fiber.join(next)
    }))

  it.live("a unit that fails before changing anything leaves its group alone: the others commit, none runs again", () =>
    Effect.gen(function*() {
      const { storage, isCommitted } = yield* openStore()
      const [kept, alsoKept, existing] = [Records.client(), Records.client(), Records.client()]
      yield* insert(storage, existing)
      let runs = 0
      const first = storage.transaction("write", (unit) => Effect.andThen(Effect.sync(() => runs++), unit.insertClient(kept)))
      // A refusal decided on what the unit read, as the core's are; then one whose only write SQLite refused (a
      // duplicate id): SQLite undoes a failed statement itself, so neither changed anything.
      const refused = storage.transaction("write", (unit) => Effect.andThen(unit.getClient(kept.id), Effect.fail("refused" as const)))
      const duplicate = storage.transaction("write", (unit) => unit.insertClient(existing))
      const [a, b, c, d] = yield* Effect.all(
        [Effect.exit(first), Effect.exit(refused), Effect.exit(duplicate), Effect.exit(insert(storage, alsoKept))],
        { concurrency: "unbounded" }
      )
      assert.isTrue(Exit.isSuccess(a) && Exit.isSuccess(d))
      assert.deepStrictEqual(b, Exit.fail("refused"))
      assert.isTrue(Exit.isFailure(c))
      assert.isTrue(isCommitted(kept) && isCommitted(alsoKept))
      // A rollback of the group would have run the first unit again.
      assert.strictEqual(runs, 1)
    }))

  it.live("TXN-INIT-1: a unit that joined a group and failed is answered only once the group's writes it read are committed", () =>
    Effect.gen(function*() {
      const { storage, isCommitted } = yield* openStore()
      const kept = Records.client()
      // A refusal decided on an earlier unit's write, as a refusal for want of funds rests on another initiation's
      // reservation. Answered before that write commits, it would stand if the process died before the COMMIT.
      let seen = false
      let committedWhenAnswered: boolean | undefined
      const refused = storage.transaction("write", (unit) =>
        Effect.flatMap(unit.getClient(kept.id), (found) => {
          seen = Option.isSome(found)
          return Effect.fail("refused" as const)
        })).pipe(Effect.tapError(() => Effect.sync(() => (committedWhenAnswered = isCommitted(kept)))))
      const [a, b] = yield* Effect.all([Effect.exit(insert(storage, kept)), Effect.exit(refused)], { concurrency: "unbounded" })
      assert.isTrue(Exit.isSuccess(a))
      assert.deepStrictEqual(b, Exit.fail("refused"))
      assert.isTrue(seen, "the refused unit joined the group and read its uncommitted write")
      assert.isTrue(committedWhenAnswered)
    }))

  it.live("TXN-INIT-1: when the group a failed unit read from does not commit, the unit fails with the group, not with what it decided", () =>
    Effect.gen(function*() {
      const { db, storage, isCommitted } = yield* openStore()
      const handle = handleOf(db)
      const client = Records.client()
      // The group's COMMIT fails (a foreign key checked only at COMMIT, as in the test below), after a second unit
      // refused on the first one's client.
      const orphan = storage.transaction("write", (unit) =>
        Effect.andThen(
          Effect.sync(() => handle?.database.prepare("pragma defer_foreign_keys = on").run([])),
          Effect.andThen(unit.insertClient(client), unit.insertAccount(Records.account(Records.client().id)))
        ))
      const refusedOnIt = storage.transaction("write", (unit) =>
        Effect.flatMap(unit.getClient(client.id), (found) => Option.isSome(found) ? Effect.fail("exists" as const) : Effect.succeed("absent" as const)))
      const [failed, decided] = yield* Effect.all([Effect.exit(orphan), Effect.exit(refusedOnIt)], { concurrency: "unbounded" })
      assert.isTrue(Exit.isFailure(failed))
      assert.isFalse(isCommitted(client))
      // Answered "exists" here, the refusal would rest on a client that never existed.
      assert.notDeepEqual(decided, Exit.fail("exists"))
    }))

  it.live("a unit under an idempotency key that is refused writes nothing, so its group's other units commit without running again", () =>
    Effect.gen(function*() {
      const { storage, isCommitted } = yield* openStore()
      const kept = Records.client()
      const claim = Records.idempotencyClaim()
      let runs = 0
      const first = storage.transaction("write", (unit) => Effect.andThen(Effect.sync(() => runs++), unit.insertClient(kept)))
      const refused = storage.transaction("write", (unit) => Effect.andThen(unit.claimIdempotencyKey(claim), Effect.fail("refused" as const)))
      const [a, b] = yield* Effect.all([Effect.exit(first), Effect.exit(refused)], { concurrency: "unbounded" })
      assert.isTrue(Exit.isSuccess(a))
      assert.deepStrictEqual(b, Exit.fail("refused"))
      assert.isTrue(isCommitted(kept))
      // A claim that inserted the key's row would have rolled the group back, and the first unit would have run twice.
      assert.strictEqual(runs, 1)
      const found = yield* storage.transaction("lookup", (unit) => unit.findIdempotencyRecord(claim.scope, claim.key, claim.createdAt))
      assert.isTrue(Option.isNone(found))
    }))

  it.live("a unit that fails after changing rows is undone with its group; the group's other units run again and commit", () =>
    Effect.gen(function*() {
      const { storage, isCommitted } = yield* openStore()
      const [kept, undone, alsoKept] = [Records.client(), Records.client(), Records.client()]
      let runs = 0
      const first = storage.transaction("write", (unit) => Effect.andThen(Effect.sync(() => runs++), unit.insertClient(kept)))
      const failing = storage.transaction("write", (unit) => Effect.andThen(unit.insertClient(undone), Effect.fail("refused" as const)))
      const [a, b, c] = yield* Effect.all([Effect.exit(first), Effect.exit(failing), Effect.exit(insert(storage, alsoKept))], {
        concurrency: "unbounded"
      })
      assert.isTrue(Exit.isSuccess(a) && Exit.isSuccess(c))
      assert.deepStrictEqual(b, Exit.fail("refused"))
      assert.isTrue(isCommitted(kept) && isCommitted(alsoKept))
      assert.isFalse(isCommitted(undone))
      // Run once in the group that was rolled back, once more after: its first insert was undone, or the second
      // would have failed on the duplicate id.
      assert.strictEqual(runs, 2)
    }))

  it.live("a unit's statement that returns rows and writes (RETURNING) counts as a change: undoing the unit runs the group again", () =>
    Effect.gen(function*() {
      const { db, storage, isCommitted } = yield* openStore()
      const [kept, returned] = [Records.client(), Records.client()]
      let runs = 0
      const waiting = Effect.runFork(storage.transaction("write", (unit) => Effect.andThen(Effect.sync(() => runs++), unit.insertClient(kept))))
      // A second write unit of the same group, straight on a session: one statement that inserts and returns, then
      // the unit fails (released without commit).
      const session = Effect.runSync(SqliteEngine.sessions(db)("write"))
      const rows = Effect.runSync(session.execute(
        CompiledQuery.raw("insert into clients (id, name, created_at) values (?, ?, ?) returning id", [returned.id, returned.name, returned.createdAt])
      )).rows
      assert.strictEqual(rows.length, 1)
      Effect.runSync(session.release)
      assert.isTrue(Exit.isSuccess(yield* Effect.exit(Fiber.join(waiting))))
      assert.isTrue(isCommitted(kept))
      assert.isFalse(isCommitted(returned))
      assert.strictEqual(runs, 2)
    }))

  it.live("a commit that fails fails every unit of the group, and none of their writes is kept", () =>
    Effect.gen(function*() {
      const { db, storage, isCommitted } = yield* openStore()
      const handle = handleOf(db)
      assert.isDefined(handle)
      const [client, other] = [Records.client(), Records.client()]
      // An account of a client that does not exist, with the foreign key checked only at COMMIT: the group's
      // COMMIT fails, after both units were kept.
      const orphan = storage.transaction("write", (unit) =>
        Effect.andThen(
          Effect.sync(() => handle?.database.prepare("pragma defer_foreign_keys = on").run([])),
          Effect.andThen(unit.insertClient(client), unit.insertAccount(Records.account(Records.client().id)))
        ))
      const [failed, alsoFailed] = yield* Effect.all([Effect.exit(orphan), Effect.exit(insert(storage, other))], { concurrency: "unbounded" })
      assert.isTrue(Exit.isFailure(failed) && Exit.isFailure(alsoFailed))
      assert.isFalse(isCommitted(client) || isCommitted(other))
      assert.isFalse(handle?.inTransaction())
      // The connection is usable again.
      yield* insert(storage, other)
      assert.isTrue(isCommitted(other))
    }))

  it.live("a unit whose transaction SQLite ended fails, and is not reported kept by a later unit's commit", () =>
    Effect.gen(function*() {
      const { db, storage, isCommitted } = yield* openStore()
      const handle = handleOf(db)
      const [lost, next] = [Records.client(), Records.client()]
      // What SQLite does on a full disk or an I/O error: the whole transaction ends; the unit goes on regardless.
      const ended = storage.transaction("write", (unit) =>
        Effect.andThen(unit.insertClient(lost), Effect.sync(() => handle?.database.prepare("rollback").run([]))))
      const [failed, kept] = yield* Effect.all([Effect.exit(ended), Effect.exit(insert(storage, next))], { concurrency: "unbounded" })
      assert.isTrue(Exit.isFailure(failed))
      assert.isTrue(Exit.isSuccess(kept))
      assert.isFalse(isCommitted(lost))
      assert.isTrue(isCommitted(next))
    }))

  it.live("a unit interrupted while its group commits is committed, and its caller waits for it", () =>
    Effect.gen(function*() {
      const { storage, isCommitted } = yield* openStore()
      const client = Records.client()
      const fiber = Effect.runFork(insert(storage, client))
      yield* Fiber.interrupt(fiber)
      assert.isTrue(isCommitted(client))
    }))

  it.live("turned off (groupCommits: false), a unit whose connection is free commits before it returns, synchronously", () =>
    Effect.gen(function*() {
      const { storage, isCommitted } = yield* openStore({ groupCommits: false })
      const client = Records.client()
      assert.isTrue(Exit.isSuccess(Effect.runSyncExit(insert(storage, client))))
      assert.isTrue(isCommitted(client))
    }))
})
