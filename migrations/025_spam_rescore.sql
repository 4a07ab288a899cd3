-- Spam rescoring (issue 39): a job rescores the weblogs pinged or verified since its last run from every
-- family of src/spam/ (rhythm, content and trust need history), gathering the evidence by SQL
-- (src/spam/evidence-repository.ts). What it reads needs these.

-- The registrable domain a weblog counts under (src/spam/domains.ts siteOf), written by intake with the
-- weblog's first score (rescoring fills it for rows scored before): siblings of one domain, and the sites an
-- address pinged for.
alter table weblog_spam add column site text;
create index weblog_spam_site on weblog_spam (site);

-- A weblog's latest settled verifications (content: outcomes, newest first).
create index ping_verifications_weblog_settled on ping_verifications (weblog_id, ping_id) where outcome is not null;
-- A weblog's items verification found new (trust: how many; content: its recent items' links).
create index feed_items_weblog_id on feed_items (weblog_id, id);
-- The same item on other weblogs (content: duplicates), by title and by link. Hash: equality only, and no
-- btree size limit for a long title or link.
create index feed_items_title on feed_items using hash (title);
create index feed_items_link on feed_items using hash (link);

-- Where the job stopped: the highest stream position (a ping's id, a settled verification's event_id; both
-- from the pings' sequence and visible in order, see EVENT_ORDER_LOCK) whose weblog it has rescored.
create table spam_rescore_cursor (
  only_row boolean primary key default true check (only_row),
  through bigint not null default 0,
  run_at timestamptz
);
insert into spam_rescore_cursor default values;
