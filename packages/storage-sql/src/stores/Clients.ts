/** Clients and their API users (core `Storage.ClientStore`) on SQL. */
import type { Storage } from "@custody-relay/core"
import { Effect, Option } from "effect"
import * as ApiUserRow from "../rows/ApiUserRow.js"
import * as ClientRow from "../rows/ClientRow.js"
import { keepingRead, optional, type StoreArguments, updating } from "../SqlUnit.js"

export const store = (
  { db, engine, statements: { first, rows, writeLater }, mode, compiled: { lookups, writes }, read, locking, keptApiUsers, apiUsersAtVersion }: StoreArguments
): Storage.ClientStore => {
  const apiUserById = keepingRead(mode, read.api_users, ApiUserRow.decode)
  const decodeApiUser = optional(ApiUserRow.decode)
  const update = updating(writeLater, locking)
  return {
    insertClient(client) {
      return writeLater(db.insertInto("clients").values(ClientRow.encode(client)), 1, `clients ${client.id}`, true)
    },
    getClient(id) {
      return Effect.map(first(lookups.client[locking](id)), optional(ClientRow.decode))
    },

    insertApiUser(user) {
      return writeLater(db.insertInto("api_users").values(ApiUserRow.encode(user)), 1, `api_users ${user.id}`, true)
    },
    getApiUser(id) {
      return Effect.map(first(lookups.apiUser[locking](id)), apiUserById)
    },
    findApiUserByKeyId(keyId) {
      const rowByKeyId = () => first(lookups.apiUserByKeyId(keyId))
      const byKeyId = () => Effect.map(rowByKeyId(), decodeApiUser)
      if (mode !== "lookup") return byKeyId()
      // A lookup is the authentication's read (see ApiUsersAtVersion and KeptApiUsers).
      if (apiUsersAtVersion !== undefined) return apiUsersAtVersion.find(keyId, byKeyId)
      if (keptApiUsers === undefined) return byKeyId()
      return Effect.map(rowByKeyId(), (row) => {
        if (row === undefined) return Option.none()
        const user = ApiUserRow.decode(row)
        keptApiUsers.remember(keyId, row, user)
        return Option.some(user)
      })
    },
    updateApiUser(user) {
      const { created_at: _, ...next } = ApiUserRow.encode(user)
      return update(read.api_users, next, writes.updateApiUser, "api_users")
    },
    listClients() {
      return Effect.map(rows(db.selectFrom("clients").selectAll().orderBy("id")), (found) => found.map(ClientRow.decode))
    },
    listApiUsers(clientId) {
      const all = db.selectFrom("api_users").selectAll().orderBy("id")
      const query = clientId === undefined ? all : clientId === null ? all.where("client_id", "is", null) : all.where("client_id", "=", engine.opaque.text(clientId))
      return Effect.map(rows(query), (found) => found.map(ApiUserRow.decode))
    }
  }
}
