-- The open hour's archive as one gzip stream appended render by render (issue 42: a render that costs what
-- changed; src/publishing/render/open-hour-stream.ts). The stream's compressed bytes, in full 1 MiB chunks,
-- are written once and shared by every rendering of the hour made from it: a rendering stores only its own
-- head (the gzip header and the root element, whose count changes) and its tail (the stream's bytes past the
-- last full chunk, the newest pings, the foot and the gzip trailer). A stream no rendering names is deleted
-- with the renderings' housekeeping (pruneRenderings).
create table archive_streams (
  id bigint generated always as identity primary key,
  path text not null,
  created_at timestamptz not null default now()
);

create table archive_stream_chunks (
  stream_id bigint not null references archive_streams (id) on delete cascade,
  seq integer not null,
  data bytea not null,
  primary key (stream_id, seq)
);

-- A rendering made from a stream: its gzip is its own bytes [0, gzip_head_length), then the stream's first
-- stream_chunks chunks, then the rest of its own bytes.
alter table renderings
  add column stream_id bigint references archive_streams (id),
  add column stream_chunks integer not null default 0,
  add column gzip_head_length integer not null default 0;

create index renderings_stream on renderings (stream_id) where stream_id is not null;
