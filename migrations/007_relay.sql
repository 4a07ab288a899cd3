-- Relay: every accepted (or, by choice, verified) ping passed on to other ping services (RELAY_TARGETS)
-- with weblogUpdates.extendedPing / weblogUpdates.ping, through a durable outbox.

-- One row per target (its XML-RPC endpoint URL), shared by the instances: the spacing of its requests
-- (next_at: the next free turn, so RELAY_RATE_PER_MIN holds across instances), what it was found to accept
-- (ping_only: it answered a fault to extendedPing, so it is sent weblogUpdates.ping, as WordPress does), its
-- circuit breaker (failures in a row; open_until: no request before then, also set by Retry-After), and
-- counts for `pingd relay status`.
create table relay_targets (
  url text primary key,
  gap_ms integer not null default 1000,
  next_at timestamptz not null default now(),
  ping_only boolean not null default false,
  failures integer not null default 0,
  open_until timestamptz,
  delivered bigint not null default 0,
  refused bigint not null default 0,
  failed bigint not null default 0,
  last_error text,
  last_attempt_at timestamptz,
  last_success_at timestamptz
);

-- Where the deriver stands: every ping (or released ping, rule 'require') up to `position` has been turned
-- into jobs. Ping ids become visible in id order (the intake's order lock), so "after position" never skips
-- one; the row is locked while a page is derived, so one instance derives at a time.
create table relay_cursor (
  id integer primary key check (id = 1),
  rule text not null check (rule in ('listed', 'require')),
  position bigint not null,
  derived_at timestamptz not null default now()
);

-- The outbox: one job per (target, weblog) waiting (state 'pending', claimed under a lease: leased_until),
-- later ones of the same weblog folded into it (seq counts them, the newest ping's fields win); finished
-- jobs stay as history (delivered, refused, dead) until retention deletes them, and tell when a weblog was
-- last relayed to a target (at most once per PING_MIN_INTERVAL).
create table relay_jobs (
  id bigint generated always as identity primary key,
  target text not null,
  weblog_url text not null,
  name text not null,
  changes_url text,
  rss_url text,
  tags text[],
  ping_id bigint not null,
  state text not null default 'pending' check (state in ('pending', 'delivered', 'refused', 'dead')),
  seq integer not null default 0,
  attempts integer not null default 0,
  created_at timestamptz not null default now(),
  due_at timestamptz not null default now(),
  leased_until timestamptz,
  finished_at timestamptz,
  last_error text
);

-- Coalescing: at most one waiting job per target and weblog.
create unique index relay_jobs_pending on relay_jobs (target, weblog_url) where state = 'pending';
-- Claims: a target's due jobs, oldest first.
create index relay_jobs_due on relay_jobs (target, due_at) where state = 'pending';
-- The last relay of a weblog to a target.
create index relay_jobs_sent on relay_jobs (target, weblog_url, finished_at) where state in ('delivered', 'refused');
-- Retention of finished jobs, and dead letters by target.
create index relay_jobs_finished on relay_jobs (finished_at) where state <> 'pending';
