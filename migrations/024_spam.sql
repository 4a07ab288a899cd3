-- Spam scores (issue 39): one row per scored weblog, beside it like weblog_removals. Intake writes a new
-- weblog's row in the statement that stores its first ping (the URL family of src/spam/, cached per URL),
-- so a render never lists a weblog before its score is known. `held` is the decision the listings read,
-- kept in the row so every read tests one boolean: SPAM_FILTER=hold and (pinned 'deny', or no pin and
-- score above SPAM_THRESHOLD); a server that starts with another mode or threshold sets it anew. Every read
-- that lists pings (changes.xml, shortChanges.xml, the hourly archives, /updates.xml, the stream unless
-- `?spam=include`) leaves out a held weblog, as it does a removed one; its pings stay stored.
create table weblog_spam (
  weblog_id bigint primary key,
  url text not null unique,
  score double precision not null,
  -- The reasons as src/spam/verdict.ts makes them: [{family, code, weight, text}].
  reasons jsonb not null default '[]',
  held boolean not null default false,
  -- The operator's pin (`pingd spam allow|deny`): allow is never held, deny always (under hold).
  pinned text check (pinned in ('allow', 'deny')),
  scored_at timestamptz not null default now()
);

-- The held ones, for the listings' anti-join, `pingd spam list --held` and the held count.
create index weblog_spam_held on weblog_spam (weblog_id) where held;
