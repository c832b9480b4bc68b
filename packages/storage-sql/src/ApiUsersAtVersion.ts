/**
 * API users kept between requests where the lookup session can say, in one statement that reads no row, whether
 * anything has been committed to the database since (SessionOpener.commitVersion): SQLite's `PRAGMA data_version`
 * on the file's read-only connection, which moves with every commit of any other connection, this process's writer
 * and every other process on the file (the operator CLI, a second server, SQL by hand) alike. A lookup by key id then
 * answers with the kept API user while the version stands, and reads the row only when something committed since it
 * was kept. Unlike PostgreSQL's kept credentials (KeptApiUsers), nothing is a guess: an answer from here is the row as
 * it is when the lookup runs, so a change committed anywhere applies to the next request (AUTH-PERM-2).
 *
 * The version is read before the row: a commit between the two leaves a row newer than its version, which only costs
 * the next lookup a read, never the reverse. Unknown key ids are never kept, so made-up ones cannot fill the map; it
 * holds at most `capacity` API users, the least recently read leaving first.
 */
import type { ApiUser } from "@custody-relay/core"
import { Effect, Option } from "effect"
import { DEFAULT_KEPT_API_USERS } from "./KeptApiUsers.js"
import { setRecent } from "./RecentlyUsed.js"
import type { Op } from "./SqlUnit.js"

interface Kept {
  readonly version: number
  readonly found: Option.Option<ApiUser.ApiUser>
}

export class ApiUsersAtVersion {
  private readonly users = new Map<string, Kept>()

  constructor(
    /** The commit version, read on the lookup session (SessionOpener.commitVersion). */
    private readonly version: Op<number>,
    private readonly capacity: number = DEFAULT_KEPT_API_USERS
  ) {}

  /** The API user of `keyId` as it is now: the kept one while nothing committed since it was read, else `read()`. */
  find(keyId: string, read: () => Op<Option.Option<ApiUser.ApiUser>>): Op<Option.Option<ApiUser.ApiUser>> {
    return Effect.flatMap(this.version, (version) => {
      const kept = this.users.get(keyId)
      if (kept !== undefined && kept.version === version) return Effect.succeed(kept.found)
      return Effect.map(read(), (found) => {
        this.keep(keyId, { version, found })
        return found
      })
    })
  }

  private keep(keyId: string, kept: Kept): void {
    if (Option.isNone(kept.found)) this.users.delete(keyId)
    else setRecent(this.users, keyId, kept, this.capacity)
  }
}
