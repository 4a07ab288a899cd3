-- Verification jobs keep their progress across deferrals and have a bound on requests and time whatever
-- path they take. A job that followed an XML redirect (the RSS Feed State document) and then had to wait
-- for the host's turn used to start again from the old URL, which redirected again: one ping, 30+ requests
-- in 40 s, never settled. resume_url is where the job goes on (the XML redirect's target) with resume_hops
-- redirects left; requests counts what the job has sent, started_at is its first request.
alter table ping_verifications add column resume_url text;
alter table ping_verifications add column resume_hops integer;
alter table ping_verifications add column requests integer not null default 0;
alter table ping_verifications add column started_at timestamptz;

-- too_complex: the fetched document took more than its time or memory budget to read.
alter table ping_verifications drop constraint ping_verifications_outcome_check;
alter table ping_verifications add constraint ping_verifications_outcome_check
  check (outcome in ('verified', 'unchanged', 'not_modified', 'unreachable', 'not_a_feed', 'gone', 'refused', 'too_large', 'too_complex'));
