-- Spam rescoring (src/spam/evidence-repository.ts, SIBLINGS): a weblog's siblings are walked from the ones
-- created nearest to it (weblog ids are given in order of first ping), at most a bounded number each way.
-- The index on site alone kept equal keys in no useful order, so a weblog of a domain with 60,000 weblogs
-- walked all of them: the wrk bench's pings for new weblogs of one domain held the embedded database's one
-- session for 9-11 s a statement, and pingd answered no ping meanwhile. (site, weblog_id) serves both what the
-- old index served (every weblog of a site) and the ordered walk.
create index weblog_spam_site_weblog on weblog_spam (site, weblog_id);
drop index weblog_spam_site;
