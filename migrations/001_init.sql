-- The weblogs that ever pinged us (one row per normalised URL) and the append-only log of accepted pings.

create table weblogs (
  id bigint generated always as identity primary key,
  url text not null unique,
  name text not null,
  changes_url text,
  rss_url text,
  first_ping_at timestamptz not null,
  last_ping_at timestamptz not null,
  ping_count bigint not null default 1
);

-- changes.xml / shortChanges.xml: the weblogs whose latest ping falls in the last hour / 5 minutes.
create index weblogs_last_ping_at on weblogs (last_ping_at);

create table pings (
  id bigint generated always as identity primary key,
  weblog_id bigint not null references weblogs (id),
  received_at timestamptz not null,
  method text not null,
  name text not null,
  url text not null,
  changes_url text,
  rss_url text,
  tags text[],
  client_addr text,
  user_agent text
);

-- Hourly archives and retention: every ping of an hour, oldest first.
create index pings_received_at on pings (received_at);
