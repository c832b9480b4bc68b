/** A whitelisted address as a `whitelisted_addresses` row and back. */
import type { WhitelistedAddress } from "@custody-relay/core"
import type { WhitelistedAddressesTable } from "../schema/Database.js"

export const encode = (entry: WhitelistedAddress.WhitelistedAddress): WhitelistedAddressesTable => ({
  id: entry.id,
  client_id: entry.clientId,
  provider_id: entry.providerId,
  name: entry.name,
  address: entry.address,
  description: entry.description,
  status: entry.status,
  asset_type: entry.assetType,
  created_at: entry.createdAt,
  updated_at: entry.updatedAt
})

export const decode = (row: WhitelistedAddressesTable): WhitelistedAddress.WhitelistedAddress => ({
  id: row.id,
  clientId: row.client_id,
  providerId: row.provider_id,
  name: row.name,
  address: row.address,
  description: row.description,
  status: row.status,
  assetType: row.asset_type,
  createdAt: row.created_at,
  updatedAt: row.updated_at
})
