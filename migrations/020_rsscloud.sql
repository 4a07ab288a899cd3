-- rssCloud (the RSS 2.0 <cloud> element; rsscloud-server is the reference): subscribers ask at
-- POST /rsscloud/pleaseNotify (or rssCloud.pleaseNotify on /RPC2) to be told when a feed changes; pingd
-- keeps the subscription 25 hours (renewed by asking again) and, when a verification finds the feed changed,
-- POSTs url=<feed> to the subscriber's endpoint from a durable queue.

-- One row per (resource, endpoint): the feed as the subscriber named it (normalised), the feed row it is
-- (feeds.id: verification's outcomes name it, redirects and moves included), and the endpoint
-- protocol://domain-or-requester-address:port/path. Deleted by the sweep once expires_at has passed.
create table rsscloud_subscriptions (
  id bigint generated always as identity primary key,
  feed_id bigint not null,
  resource_url text not null,
  notify_url text not null,
  -- The endpoint's host name or address literal, lower case, without the port (the bounds and the one
  -- notification in flight per host count under it).
  endpoint_host text not null,
  protocol text not null check (protocol in ('http-post', 'https-post')),
  -- The client that asked (the last renewal's): its address, IPv6 by its /64 (RSSCLOUD_MAX_PER_REQUESTER).
  requested_by text,
  created_at timestamptz not null default now(),
  renewed_at timestamptz not null default now(),
  expires_at timestamptz not null,
  -- Notification health, shown as counts on /weblog (never the endpoint): delivered, failed tries, dropped
  -- after the last try, failures in a row, and the last try's result.
  delivered integer not null default 0,
  failed integer not null default 0,
  dropped integer not null default 0,
  failures integer not null default 0,
  last_status integer,
  last_error text,
  last_attempt_at timestamptz,
  last_success_at timestamptz,
  unique (resource_url, notify_url)
);

-- The fan-out when a feed changed: unexpired subscriptions of one feed.
create index rsscloud_subscriptions_feed on rsscloud_subscriptions (feed_id, expires_at);
-- An endpoint host's unexpired subscriptions (RSSCLOUD_MAX_PER_HOST).
create index rsscloud_subscriptions_host on rsscloud_subscriptions (endpoint_host, expires_at);
-- A requester's unexpired subscriptions (RSSCLOUD_MAX_PER_REQUESTER).
create index rsscloud_subscriptions_requester on rsscloud_subscriptions (requested_by, expires_at);
-- The sweep, and the total (RSSCLOUD_MAX_SUBSCRIPTIONS).
create index rsscloud_subscriptions_expires_at on rsscloud_subscriptions (expires_at);

-- The notification queue, written in the verification's own transaction: at most one waiting notification
-- per subscription (a change while one waits folds into it: seq counts them, so one that changed while it
-- ran is sent again instead of deleted). Claimed FOR UPDATE SKIP LOCKED under a lease (due_at pushed one
-- lease ahead, leased_until set), so the task of an instance that died is claimed again.
create table rsscloud_notifications (
  id bigint generated always as identity primary key,
  subscription_id bigint not null unique references rsscloud_subscriptions (id) on delete cascade,
  endpoint_host text not null,
  seq integer not null default 0,
  attempts integer not null default 0,
  created_at timestamptz not null default now(),
  due_at timestamptz not null default now(),
  leased_until timestamptz
);

create index rsscloud_notifications_due_at on rsscloud_notifications (due_at);
-- One notification in flight per endpoint host across instances: the hosts with a leased task.
create index rsscloud_notifications_leased on rsscloud_notifications (endpoint_host) where leased_until is not null;

-- An rssCloud ping names only its feed: the weblog that remembers that feed is found by it.
create index weblogs_feed_id on weblogs (feed_id) where feed_id is not null;
