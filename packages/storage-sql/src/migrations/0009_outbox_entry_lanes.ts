/**
 * Migration 9: an outbox entry names the lane it is carried out in (core `Outbox.OutboxEntry.lane`): a webhook
 * delivery's is its subscription, so the worker keeps one subscription's deliveries in order while another's go on
 * beside them. Null for every other entry, and for deliveries written before: those keep their client's lane.
 */
import type { Kysely } from "kysely"
import type { EngineName } from "../SqlEngine.js"
import { columnTypesFor } from "./ColumnTypes.js"

export const up = async (db: Kysely<unknown>, engine: EngineName): Promise<void> => {
  await db.schema.alterTable("outbox_entries").addColumn("lane", columnTypesFor(engine).key).execute()
}
