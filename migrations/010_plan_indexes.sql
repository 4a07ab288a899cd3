-- Indexes three statements were missing: each read its whole table where it means a few rows (found by
-- test/platform/db/query-plans.test.ts, which EXPLAINs every statement of the ping and render paths).

-- A feed named by the URL it is fetched from now (weblogView of a weblog not yet linked to its feed asks
-- `url = $1 or fetch_url = $1`): with both columns indexed the OR is a BitmapOr of two lookups.
create index feeds_fetch_url on feeds (fetch_url);

-- Pruning on every render tick: renderings that never completed, by age (the superseded ones have
-- renderings_superseded_at), and whether a published document still points at a rendering.
create index renderings_incomplete_created_at on renderings (created_at) where not complete;
create index published_documents_rendering_id on published_documents (rendering_id);
