/**
 * Migration 8 (PostgreSQL only): a log of the changes that move a transaction into, out of or within a client's
 * lists, written by the database itself. Page boundaries (PageBoundaries) count rows from the oldest end of a list
 * and stay exact only while no row at or before them enters or leaves; on PostgreSQL other nodes write, so a node
 * learns what they changed from here. A trigger, not the store, writes it: every insert, change of status group or
 * delete is logged whoever makes it (another node, an older node, an operator's SQL).
 *
 * `xid` is the writing transaction's id: a reader asks for the changes of the transactions the snapshot its
 * boundaries are exact in did not see committed (from that snapshot's next id on, and those running in it), which
 * covers every commit since. `recorded_at`
 * is for pruning (SqlLayer prunes entries older than `PageBoundaries.LIST_CHANGES_KEPT_MILLIS`); the log is
 * append-only in that order, which a BRIN index serves at almost no write cost. SQLite needs none: one file, and
 * `PRAGMA data_version` says when another connection committed.
 */
import { type Kysely, sql } from "kysely"
import type { EngineName } from "../SqlEngine.js"

export const up = async (db: Kysely<unknown>, engine: EngineName): Promise<void> => {
  if (engine !== "postgres") return
  await sql`
    create table transaction_list_changes (
      xid xid8 not null default pg_current_xact_id(),
      client_id text collate "C" not null,
      created_at text collate "C" not null,
      id text collate "C" not null,
      recorded_at timestamptz not null default statement_timestamp()
    )
  `.execute(db)
  await sql`create index transaction_list_changes_client_xid on transaction_list_changes (client_id, xid)`.execute(db)
  await sql`create index transaction_list_changes_recorded on transaction_list_changes using brin (recorded_at)`.execute(db)
  await sql`
    create function custody_relay_transaction_list_change() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' then
        insert into transaction_list_changes (client_id, created_at, id) values (old.client_id, old.created_at, old.id);
      elsif tg_op = 'INSERT' or new.status_group is distinct from old.status_group then
        insert into transaction_list_changes (client_id, created_at, id) values (new.client_id, new.created_at, new.id);
      end if;
      return null;
    end
    $$
  `.execute(db)
  await sql`
    create trigger transaction_list_change after insert or delete or update of status_group on transactions
    for each row execute function custody_relay_transaction_list_change()
  `.execute(db)
}
