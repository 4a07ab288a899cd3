-- Verification: after a ping is accepted, pingd fetches the weblog's feed, remembers the feed's HTTP state
-- (the RSS Feed State document), decides whether anything new was published, and keeps the new items.

-- One row per accepted ping whose verification is wanted, written by the same statement as the ping (so it
-- commits with it and survives a crash): queued while outcome is null, then the verification's outcome.
-- No foreign key to pings: retention prunes both by received_at, independently.
create table ping_verifications (
  ping_id bigint primary key,
  weblog_id bigint not null,
  received_at timestamptz not null,
  -- When the job may be claimed next: now() when queued; a claim pushes it one lease ahead, so the job
  -- of an instance that died is claimed again once the lease runs out.
  due_at timestamptz not null default now(),
  attempts integer not null default 0,
  outcome text check (outcome in ('verified', 'unchanged', 'not_modified', 'unreachable', 'not_a_feed', 'gone', 'refused', 'too_large')),
  done_at timestamptz,
  http_status integer,
  feed_id bigint
);

-- The queue: open jobs by when they are due (claims walk it with FOR UPDATE SKIP LOCKED).
create index ping_verifications_queue on ping_verifications (due_at) where outcome is null;
-- The open jobs of one weblog: one fetch settles all of them.
create index ping_verifications_open_weblog on ping_verifications (weblog_id) where outcome is null;
-- Retention, and the pings of an hour that were verified (archives under VERIFY_PINGS=require).
create index ping_verifications_received_at on ping_verifications (received_at);

-- Every feed pingd has fetched or tried to, keyed by the URL it was named by (a ping's rssUrl, a weblog's
-- remembered feed or an autodiscovered link). fetch_url is where it is fetched now: it differs from url
-- once a permanent redirect has been confirmed.
create table feeds (
  id bigint generated always as identity primary key,
  url text not null unique,
  fetch_url text not null,
  -- A permanent redirect (301, 308, or an XML redirect) seen but not yet confirmed, and how many fetches
  -- in a row have seen it.
  moved_to text,
  moved_seen integer not null default 0,
  etag text,
  last_modified text,
  last_status integer,
  last_outcome text,
  last_fetch_at timestamptz,
  last_success_at timestamptz,
  -- No request for this feed before then (backoff after failures).
  next_fetch_after timestamptz,
  failures integer not null default 0,
  gone boolean not null default false,
  -- The feed's own polling hints: ttl, skipHours, skipDays, sy:updatePeriod, sy:updateFrequency.
  hints jsonb not null default '{}',
  title text,
  -- Identities of the most recent items seen (newest first, bounded): what makes an item "new".
  seen text[] not null default '{}'
);

-- The weblog's remembered feed, and what its latest verification found.
alter table weblogs add column feed_id bigint;
-- The receive time of the latest ping of this weblog that was verified (changes.xml under VERIFY_PINGS=require).
alter table weblogs add column last_verified_at timestamptz;
-- { outcome, at, httpStatus, feedUrl, newItems: [{ title, link, guid }] } of the latest verification.
alter table weblogs add column verification jsonb;
create index weblogs_last_verified_at on weblogs (last_verified_at) where last_verified_at is not null;

-- Per host, across instances: the earliest instant the next request may start (a minimum gap between
-- requests to one host) and, after a 429 or 503 with Retry-After, when the host may be asked again.
create table fetch_hosts (
  host text primary key,
  next_slot_at timestamptz not null,
  blocked_until timestamptz
);

-- Items verification found new in a feed, published in /updates.xml beside RSS Ping payloads.
create table feed_items (
  id bigint generated always as identity primary key,
  feed_id bigint not null,
  weblog_id bigint not null,
  ping_id bigint,
  received_at timestamptz not null,
  weblog_url text not null,
  weblog_name text not null,
  feed_url text not null,
  title text,
  link text,
  guid text,
  published_at timestamptz,
  summary text
);

create index feed_items_received_at on feed_items (received_at);
