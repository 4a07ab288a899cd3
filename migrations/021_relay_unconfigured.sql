-- A target taken out of RELAY_TARGETS / RELAY_FILE. Its waiting jobs used to stay pending for ever: no
-- instance claims a target it does not know, so `pingd relay status`, the queue depth and the oldest age
-- (/metrics, /api/stats) kept them, and neither `pingd relay retry` nor retention (which keeps pending jobs)
-- cleared them. An instance that starts without a target now makes its waiting jobs dead letters (retention
-- deletes them after a week) and marks the target here, when it was first seen missing; an instance that
-- starts with it configured clears the mark.
alter table relay_targets add column unconfigured_at timestamptz;
