-- Publishing (issue #3): renderings of changes.xml, shortChanges.xml and the hourly archives, stored so that
-- every instance serves the same bytes and validators; which rendering of each path is current; the cut
-- points of RFC 3229 feed deltas; and how far finished hours have been closed.

-- One rendering of one document. Its bytes are in rendering_chunks; it becomes visible when completed and
-- pointed to by published_documents (one transaction). Kept after being superseded as a delta base.
create table renderings (
  id bigint generated always as identity primary key,
  path text not null,
  document text not null,
  content_type text not null,
  -- The document's `updated` attribute and Last-Modified (whole seconds).
  updated_at timestamptz not null,
  -- Every ping stamped at or before this instant (µs since the epoch) is in this rendering or an earlier one.
  cursor_us bigint not null,
  -- Signature of the rows it was rendered from: unchanged means no new rendering is needed.
  fingerprint text not null,
  entries integer not null default 0,
  -- A closed hourly archive never changes again (served immutable).
  closed boolean not null default false,
  complete boolean not null default false,
  identity_length bigint not null default 0,
  identity_stored boolean not null default false,
  gzip_length bigint not null default 0,
  br_length bigint not null default 0,
  -- The bytes after the last entry (appended to every delta).
  footer bytea not null default ''::bytea,
  sha256 text not null default '',
  render_ms integer not null default 0,
  created_at timestamptz not null default now(),
  superseded_at timestamptz
);

-- Delta bases: the recent renderings of a path, by cursor.
create index renderings_path_cursor on renderings (path, cursor_us);
create index renderings_superseded_at on renderings (superseded_at) where superseded_at is not null;

-- Stored bytes, in chunks of 1 MiB per variant: identity, gzip, br, and the delta streams dgzip/dbr.
create table rendering_chunks (
  rendering_id bigint not null references renderings (id) on delete cascade,
  variant text not null check (variant in ('identity', 'gzip', 'br', 'dgzip', 'dbr')),
  seq integer not null,
  data bytea not null,
  primary key (rendering_id, variant, seq)
);

-- Where the delta from each recent base ends in a rendering's identity and delta streams.
create table rendering_deltas (
  rendering_id bigint not null references renderings (id) on delete cascade,
  base_id bigint not null,
  base_cursor_us bigint not null,
  entries integer not null,
  identity_end bigint not null,
  gzip_end bigint not null,
  -- CRC-32 of identity bytes [0, identity_end): the gzip trailer of the delta.
  gzip_crc bigint not null,
  br_end bigint not null,
  primary key (rendering_id, base_id)
);

-- The current rendering of every published path ('/changes.xml', '/2026/11/22/08.xml', …).
create table published_documents (
  path text primary key,
  document text not null,
  rendering_id bigint not null references renderings (id),
  closed boolean not null default false,
  -- The hour an archive holds (null for live documents): archive retention deletes by it.
  hour_start timestamptz
);

create index published_documents_hour_start on published_documents (hour_start) where hour_start is not null;

-- Progress markers, e.g. archives_closed_before: every hour before it is closed.
create table publish_watermarks (
  name text primary key,
  at timestamptz not null
);
