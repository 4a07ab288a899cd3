-- The open hub (W3C WebSub for any feed): a subscription's topic may be any feed pingd can fetch, not only
-- one of its own documents. Such a subscription names the feed (feed_id, verification's feeds row) and the
-- topic's host (topic_host, for WEBSUB_MAX_PER_TOPIC_HOST); path stays null. When verification finds new
-- entries in a subscribed feed it stores the feed cut down to them once (websub_changes) and queues one
-- delivery per subscriber in the same transaction; each subscription remembers the change it went
-- through (delivered or given up), so changes reach it in order, each once.
alter table websub_subscriptions alter column path drop not null;
alter table websub_subscriptions add column feed_id bigint;
alter table websub_subscriptions add column topic_host text;
alter table websub_subscriptions add column through_change_id bigint not null default 0;

-- A feed's live subscriptions (the watcher's interest, the fan-out of a change, the poll).
create index websub_subscriptions_feed on websub_subscriptions (feed_id, expires_at) where feed_id is not null;
-- A topic host's subscriptions (WEBSUB_MAX_PER_TOPIC_HOST).
create index websub_subscriptions_topic_host on websub_subscriptions (topic_host, expires_at) where topic_host is not null;

-- One row per change of a subscribed feed: the fetched document cut down to its new entries, in the
-- feed's own format and Content-Type, sent as is to every subscriber. Deleted once no live subscription
-- is behind it, and after 7 days at the latest (a subscriber that far behind gets the changes still kept).
create table websub_changes (
  id bigint generated always as identity primary key,
  feed_id bigint not null,
  content_type text not null,
  body bytea not null,
  entries integer not null,
  created_at timestamptz not null default now()
);
create index websub_changes_feed on websub_changes (feed_id, id);
create index websub_changes_created_at on websub_changes (created_at);

-- Tasks: `check` fetches a feed topic for the hub (after a confirmed subscribe: is it a feed, and what
-- are its entries; or a poll of a subscribed topic that never pings). A delivery of a feed topic names
-- the newest change queued for its subscriber (change_id) instead of a rendering.
alter table websub_tasks drop constraint websub_tasks_kind_check;
alter table websub_tasks add constraint websub_tasks_kind_check check (kind in ('verify', 'deny', 'deliver', 'check'));
alter table websub_tasks add column change_id bigint;
alter table websub_tasks add column topic_host text;
-- Pending subscriptions of a topic host (WEBSUB_MAX_PER_TOPIC_HOST).
create index websub_tasks_topic_host on websub_tasks (topic_host) where topic_host is not null and mode = 'subscribe';
