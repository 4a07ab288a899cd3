-- Spam trust (issue 39): whether a feed named this server as its WebSub hub or rssCloud cloud when it was last
-- read as a feed (src/verification/names-pingd.ts; PUBLIC_URL's endpoints), written by verification with the
-- feed's state and read by the rescoring job for the weblog's current feed (weblogs.feed_id):
-- trust.names_pingd. A constant default: no table rewrite.
alter table feeds add column names_pingd boolean not null default false;
