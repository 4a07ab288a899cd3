-- The open hub (W3C WebSub for any feed): a WebSub publish is a ping whose weblog is the feed's own
-- <link>, so the feed's site is remembered when verification reads it. Null until a fetch found one.
alter table feeds add column site_url text;
