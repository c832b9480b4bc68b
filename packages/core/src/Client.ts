/**
 * A client: the organisation that owns accounts, transactions, whitelisted addresses and API users. Every read
 * and write of client data is scoped to one client (SCOPE-1).
 */
import { Schema } from "effect"
import { ClientId } from "./Ids.js"
import { Timestamp } from "./Timestamp.js"

export const Client = Schema.Struct({
  id: ClientId,
  name: Schema.String,
  createdAt: Timestamp
})
export type Client = typeof Client.Type
