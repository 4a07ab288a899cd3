-- When a target's last error happened. `pingd relay status` showed last_error as if it were current after
-- later successes; with its time it tells an error of the last attempt from a previous one. Rows from
-- before: an error is the last attempt's when failures in a row are counted, else its time is unknown.
alter table relay_targets add column last_error_at timestamptz;
update relay_targets set last_error_at = last_attempt_at where last_error is not null and failures > 0;
