/**
 * Migration 10 (PostgreSQL only): migration 8's log of list changes is written when the writing transaction commits,
 * and its `recorded_at` is that moment. The log is pruned by `recorded_at` (entries older than
 * `PageBoundaries.LIST_CHANGES_KEPT_MILLIS`), and a node learns of a transaction's changes on its first deep page after
 * that transaction commits. Written while the transaction ran, an entry carried the time of its statement: a
 * transaction open for longer than the log keeps its entries (an operator's session, a backfill script) committed
 * entries that the next prune removed before any node had read them, and a node's page boundaries then stayed off by
 * the rows it changed. A deferred constraint trigger fires at COMMIT, with the row as it was written, so an entry is
 * kept for the whole time from its commit, however long its transaction ran.
 */
import { type Kysely, sql } from "kysely"
import type { EngineName } from "../SqlEngine.js"

export const up = async (db: Kysely<unknown>, engine: EngineName): Promise<void> => {
  if (engine !== "postgres") return
  await sql`
    create or replace function custody_relay_transaction_list_change() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' then
        insert into transaction_list_changes (client_id, created_at, id, recorded_at)
          values (old.client_id, old.created_at, old.id, clock_timestamp());
      elsif tg_op = 'INSERT' or new.status_group is distinct from old.status_group then
        insert into transaction_list_changes (client_id, created_at, id, recorded_at)
          values (new.client_id, new.created_at, new.id, clock_timestamp());
      end if;
      return null;
    end
    $$
  `.execute(db)
  await sql`drop trigger transaction_list_change on transactions`.execute(db)
  await sql`
    create constraint trigger transaction_list_change after insert or delete or update of status_group on transactions
    deferrable initially deferred
    for each row execute function custody_relay_transaction_list_change()
  `.execute(db)
}
