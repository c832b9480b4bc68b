/**
 * API users kept between requests, by key id (core Storage.KeptCredentials), on an engine whose sessions confirm a
 * kept one in the round trip of a request's first statement (PostgreSQL's pipelined sessions; see
 * SessionOpener.confirmsCredentials). A GET by id then waits for one round trip, not two: the credential's re-read
 * goes with the record's read instead of before it.
 *
 * What is kept is only ever a guess: every request on it is confirmed against the row as it is when the request's
 * first statement runs, whatever wrote the row (another node, the operator CLI, SQL by hand). So keeping needs no
 * invalidation, and a kept row that is out of date costs the one request that meets it a second run.
 *
 * A row is kept when a lookup by key id reads it (the core's authentication does, for every request not run on a
 * kept one), not revoked. Unknown key ids are never kept, so made-up ones cannot fill the map; it holds at most
 * `capacity` rows, the least recently read leaving first.
 */
import { type ApiUser, Storage } from "@custody-relay/core"
import type { CompiledQuery } from "kysely"
import { setRecent } from "./RecentlyUsed.js"
import type { ApiUsersTable } from "./schema/Database.js"
import type { CredentialCheck } from "./SqlSession.js"

export const DEFAULT_KEPT_API_USERS = 10_000

/** The row as its lookup read it, in text form; a change to any column changes it. */
const stampOf = (row: unknown): string => JSON.stringify(row)

export class KeptApiUsers implements Storage.KeptCredentials {
  private readonly users = new Map<string, Storage.KeptApiUser>()

  constructor(
    /** The lookup by key id, the same statement whose rows are kept. */
    private readonly lookup: (keyId: string) => CompiledQuery,
    private readonly capacity: number = DEFAULT_KEPT_API_USERS
  ) {}

  get(keyId: string): Storage.KeptApiUser | undefined {
    return this.users.get(keyId)
  }

  /** Keeps what a lookup by key id read. */
  remember(keyId: string, row: ApiUsersTable, user: ApiUser.ApiUser): void {
    if (user.revokedAt !== null) this.users.delete(keyId)
    else setRecent(this.users, keyId, { user, stamp: stampOf(row) }, this.capacity)
  }

  /** What a session sends and judges to confirm `pending` (see SqlSession.CredentialCheck). */
  checkOf(pending: Storage.PendingCredential): CredentialCheck {
    return {
      query: this.lookup(pending.keyId),
      pending: () => !pending.confirmed,
      judge: (rows) => {
        // Confirmed meanwhile by another unit of the request: the request stood on it as of then.
        if (pending.confirmed) return undefined
        const [row] = rows
        if (row !== undefined && stampOf(row) === pending.stamp) {
          pending.confirmed = true
          return undefined
        }
        return new Storage.StorageError({
          reason: new Storage.CredentialChanged({ message: `API user of key ${pending.keyId} changed since it was kept` })
        })
      }
    }
  }
}
