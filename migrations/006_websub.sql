-- WebSub hub (the W3C WebSub Recommendation): subscribers subscribe to the live documents (/changes.xml,
-- /shortChanges.xml, /updates.xml) at POST /websub; pingd verifies their intent and POSTs each new rendering
-- to their callbacks.

-- One row per confirmed subscription (WebSub §5.3: stored only once the callback echoed the challenge),
-- keyed by the topic URL as the subscriber named it and the callback. `path` is the document the topic
-- names. Deleted when unsubscribed (confirmed) or by the hub's sweep once expires_at has passed.
create table websub_subscriptions (
  id bigint generated always as identity primary key,
  topic text not null,
  path text not null,
  callback text not null,
  -- The subscriber's hub.secret (WebSub §8: the key of X-Hub-Signature); null when none was given.
  secret text,
  lease_seconds integer not null,
  created_at timestamptz not null default now(),
  renewed_at timestamptz not null default now(),
  expires_at timestamptz not null,
  -- Delivery health, for the operator: failing after several failed deliveries in a row (then retried
  -- hourly), active again after a success.
  state text not null default 'active' check (state in ('active', 'failing')),
  failures integer not null default 0,
  last_status integer,
  last_error text,
  last_attempt_at timestamptz,
  last_success_at timestamptz,
  -- The rendering last received by the subscriber: an older one is never sent after it.
  delivered_rendering_id bigint,
  unique (topic, callback)
);

-- The fan-out when a document is published: unexpired subscriptions of one document.
create index websub_subscriptions_path on websub_subscriptions (path, expires_at);
-- The sweep of expired leases.
create index websub_subscriptions_expires_at on websub_subscriptions (expires_at);

-- The hub's durable queue, claimed like ping_verifications (FOR UPDATE SKIP LOCKED under a lease): a task
-- is committed before the subscriber hears 202, and survives a crash. Kinds: `verify` (verification of
-- intent, WebSub §5.3), `deny` (a denial, §5.2), `deliver` (content distribution, §7). At most one task per
-- coalesce_key: one per (topic, callback) for intents (the latest request wins), one per subscription for
-- deliveries (the newest content is sent once); seq counts the requests folded into it, so a task that
-- changed while it ran is run again instead of being deleted.
create table websub_tasks (
  id bigint generated always as identity primary key,
  kind text not null check (kind in ('verify', 'deny', 'deliver')),
  coalesce_key text not null unique,
  seq integer not null default 0,
  -- Intents: what the subscriber asked.
  topic text,
  path text,
  callback text,
  mode text check (mode in ('subscribe', 'unsubscribe')),
  lease_seconds integer,
  secret text,
  reason text,
  -- Deliveries: the subscription, and the newest rendering queued for it.
  subscription_id bigint references websub_subscriptions (id) on delete cascade,
  rendering_id bigint,
  attempts integer not null default 0,
  created_at timestamptz not null default now(),
  -- When the task may be claimed next; a claim pushes it one lease ahead (and sets leased_until), so the
  -- task of an instance that died is claimed again once the lease runs out.
  due_at timestamptz not null default now(),
  leased_until timestamptz
);

create index websub_tasks_due_at on websub_tasks (due_at);
-- Pending subscriptions, counted against WEBSUB_MAX_SUBSCRIPTIONS.
create index websub_tasks_pending on websub_tasks (topic, callback) where kind = 'verify' and mode = 'subscribe';
-- The cascade from a deleted subscription.
create index websub_tasks_subscription on websub_tasks (subscription_id) where subscription_id is not null;
