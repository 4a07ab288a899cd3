-- Weblogs the operator removed from the published lists (`pingd weblogs remove`): a marker beside the
-- weblog, never a deletion. Its pings stay stored (the blogger's "did my ping arrive?" still finds them and
-- says the operator removed the weblog), and every read that lists pings (changes.xml, shortChanges.xml,
-- the hourly archives, /updates.xml) leaves out the weblogs named here, so later pings of a removed weblog
-- are not listed either, until `pingd weblogs restore` deletes the row. A few rows at most: the reads
-- anti-join it by weblog id (or, for RSS Ping payloads, which carry no weblog id, by URL).
create table weblog_removals (
  weblog_id bigint primary key,
  url text not null unique,
  removed_at timestamptz not null default now()
);
