-- RSS Ping (seed 003): the payload carried by each accepted rss_ping, the publishers registered for
-- publisher-side authentication, and their single-use endpoint tokens.

-- One row per accepted rss_ping, keyed by the pings row it was committed with (same transaction). No
-- foreign key to pings: retention may prune or repartition pings independently; rows here are pruned by
-- received_at.
create table rssping_payloads (
  ping_id bigint primary key,
  received_at timestamptz not null,
  site_url text not null,
  site_name text not null,
  -- [{"uri": …, "type": …}] in document order; the first one is also the ping's rss_url.
  feeds jsonb not null,
  auth text not null check (auth in ('none', 'pingserver_side', 'publisher_side')),
  auth_note text,
  payload_type text,
  payload_encoding text,
  -- Attributes of the <payload> start tag (namespace declarations are needed to read the payload).
  payload_attributes jsonb not null,
  payload_format text not null,
  -- The payload exactly as received, decoded to UTF-8 (what pingserver-side authentication hashed).
  payload text not null,
  payload_sha1 text not null,
  payload_hash text,
  payload_hash_algorithm text,
  payload_hash_uri text,
  publisher_mbox_hash text,
  publisher_mbox_hash_algorithm text,
  headline text not null,
  item_link text,
  item_guid text,
  item_uri text not null,
  summary text,
  tokenized boolean not null default false
);

-- updates.xml: the payloads of the last hour, newest first.
create index rssping_payloads_received_at on rssping_payloads (received_at);

create table rssping_publishers (
  id bigint generated always as identity primary key,
  site_url text not null unique,
  -- AES-256-GCM under a key derived from RSSPING_SECRET (never stored here): the server needs the
  -- password itself to compute sha1(site_uri + password + token), so it cannot be a one-way hash.
  password_sealed bytea not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

-- A token's endpoints are precomputed when it is issued; using one is a single DELETE … RETURNING, so
-- two concurrent uses cannot both succeed.
create table rssping_tokens (
  endpoint_sha1 text primary key,
  endpoint_md5 text not null unique,
  publisher_id bigint not null references rssping_publishers (id) on delete cascade,
  issued_at timestamptz not null default now(),
  expires_at timestamptz not null
);

create index rssping_tokens_publisher on rssping_tokens (publisher_id, issued_at);
create index rssping_tokens_expires_at on rssping_tokens (expires_at);
