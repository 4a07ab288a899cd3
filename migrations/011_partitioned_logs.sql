-- expect: about 4 s per million pings already stored; 11 s for 3 million when measured
-- The append-only logs (pings, RSS Ping payloads, found feed items) become partitioned by received_at, one
-- partition per UTC day, so that retention drops a whole day (one catalog change) instead of deleting its
-- rows in batches, and no query of the ping or render path ever costs more as the log ages: each reads the
-- days its time window names (partition pruning) through the same indexes as before.
--
-- Shape of each log after this migration (src/operations/retention/partitions.ts keeps it up):
--   <log>_dYYYYMMDD      the rows received on that UTC day, created days ahead by the scheduler;
--   <log>_default        rows no day partition holds (a clock far off, a test's invented dates); retention
--                        deletes its old rows in batches, and creating a day moves that day's rows out;
--   <log>_before_YYYYMMDD  the rows this migration found, kept in place (attached, never copied: a big log
--                        migrates in one scan and one index build), everything received before that day;
--                        dropped whole once that day is older than RETENTION_DAYS. Only made when the log
--                        held rows.
--
-- PostgreSQL 15 allows no identity column on a partitioned table: ids come from a sequence owned by the
-- column (so pg_get_serial_sequence still names it), continuing exactly where the identity stopped. A unique
-- key on a partitioned table must include the partition key: the primary keys become (id, received_at);
-- ids are still unique because one sequence draws them. Same SQL on PostgreSQL and PGlite.

create function pg_temp.pingd_partition_log(log text, key text, has_identity boolean, bound timestamptz) returns void
language plpgsql as $fn$
declare
  empty boolean;
  legacy text := log || '_before_' || to_char(bound at time zone 'UTC', 'YYYYMMDD');
  old text := log || '_unpartitioned';
  seq_state record;
  idx record;
begin
  execute format('select not exists (select 1 from %I)', log) into empty;
  if has_identity then
    execute format('select last_value, is_called from %s', pg_get_serial_sequence(log, key)) into seq_state;
  end if;

  execute format('alter table %I rename to %I', log, old);
  -- Free the index and key names for the partitioned table.
  execute format('alter table %I rename constraint %I to %I', old, log || '_pkey', legacy || '_pkey');
  for idx in select indexname from pg_indexes where schemaname = current_schema() and tablename = old and indexname <> legacy || '_pkey' loop
    execute format('alter index %I rename to %I', idx.indexname, legacy || substr(idx.indexname, length(log) + 1));
  end loop;
  if has_identity then
    execute format('alter table %I alter column %I drop identity', old, key);
  end if;
  -- No foreign keys on a log (pings.weblog_id had one): adding or dropping a partition of a table with one
  -- locks the referenced table (weblogs) against intake's upsert, and deadlocked with it when measured.
  -- Intake writes a ping and its weblog in one statement, and weblogs are never deleted.
  for idx in select conname from pg_constraint where conrelid = old::regclass and contype = 'f' loop
    execute format('alter table %I drop constraint %I', old, idx.conname);
  end loop;

  execute format('create table %I (like %I including defaults including constraints including storage) partition by range (received_at)', log, old);
  if has_identity then
    execute format('create sequence %I as bigint owned by %I.%I', log || '_' || key || '_seq', log, key);
    if seq_state.last_value is not null then
      perform setval(format('%I', log || '_' || key || '_seq')::regclass, seq_state.last_value, seq_state.is_called);
    end if;
    execute format('alter table %I alter column %I set default nextval(%L)', log, key, log || '_' || key || '_seq');
  end if;
  execute format('alter table %I add primary key (%I, received_at)', log, key);
  execute format('create table %I partition of %I default', log || '_default', log);

  if empty then
    execute format('drop table %I', old);
  else
    execute format('alter table %I rename to %I', old, legacy);
    -- Attaching checks every row against the bound in one scan, and builds the (key, received_at) key in
    -- place of the old one.
    execute format('alter table %I drop constraint %I', legacy, legacy || '_pkey');
    execute format('alter table %I attach partition %I for values from (minvalue) to (%L)', log, legacy, bound);
  end if;
end
$fn$;

do $$
declare
  -- The legacy partitions end at the next UTC midnight after every row they hold (and after now).
  bound timestamptz := date_trunc('day', greatest(
    now(),
    (select max(received_at) from pings),
    (select max(received_at) from rssping_payloads),
    (select max(received_at) from feed_items)
  ) at time zone 'UTC') at time zone 'UTC' + interval '1 day';
begin
  perform pg_temp.pingd_partition_log('pings', 'id', true, bound);
  perform pg_temp.pingd_partition_log('rssping_payloads', 'ping_id', false, bound);
  perform pg_temp.pingd_partition_log('feed_items', 'id', true, bound);
end
$$;

-- The indexes every log had, now on the partitioned tables (attached partitions that already have an
-- equal index keep theirs; the others get one built).
create index pings_received_at on pings (received_at);
create index pings_weblog_id on pings (weblog_id, id);
create index rssping_payloads_received_at on rssping_payloads (received_at);
create index feed_items_received_at on feed_items (received_at);
