-- What the status page and GET /api/stats chart: counts per UTC minute, added by each instance from memory
-- every few seconds (one upsert per series and minute, never one write per ping), so a day is ~1,440 rows
-- per series however many pings arrived, and a chart is an index range read, not a scan of the ping log.

-- series: 'accepted', 'refused:<reason>' or 'verification:<outcome>'.
create table stats_minutes (
  minute timestamptz not null,
  series text not null,
  n bigint not null,
  primary key (minute, series)
);

-- The hosts that sent the most pings in each flush (each instance keeps its 20 busiest): enough to name the
-- top hosts of the last hour without counting the log.
create table stats_minute_hosts (
  minute timestamptz not null,
  host text not null,
  accepted bigint not null,
  refused bigint not null,
  primary key (minute, host)
);

-- "Did my ping arrive?": a weblog's latest pings, newest first, without reading the others.
create index pings_weblog_id on pings (weblog_id, id);
