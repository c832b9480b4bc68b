/** A client as a `clients` row and back. */
import type { Client } from "@custody-relay/core"
import type { ClientsTable } from "../schema/Database.js"

export const encode = (client: Client.Client): ClientsTable => ({
  id: client.id,
  name: client.name,
  created_at: client.createdAt
})

export const decode = (row: ClientsTable): Client.Client => ({
  id: row.id,
  name: row.name,
  createdAt: row.created_at
})
