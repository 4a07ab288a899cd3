-- Relay bounds. Each target's queue holds at most RELAY_QUEUE_MAX weblogs: beyond it the stalest waiting
-- weblog (the one whose newest ping is oldest) is dropped and counted. A weblog relayed to a target within
-- RELAY_LOOP_WINDOW is not relayed to it again, whatever PING_MIN_INTERVAL says: a forwarder that passes
-- our relay back without the User-Agent marker (A → forwarder → A) made one ping circulate for as long as
-- it was watched; those pings are counted as suppressed.

-- Per target, what the deriver did: weblogs that started waiting (queued), waiting weblogs dropped at the
-- bound (dropped), pings not relayed because the weblog was relayed within the window (suppressed). Only the
-- deriver (one at a time: it holds the cursor row) and `pingd relay retry` write here, never the statement
-- that records outcomes, and the deriver writes no relay_targets row: the two never wait on each other's
-- rows, and a claim (which locks relay_targets rows, skipping locked ones) never skips a target because a
-- derivation is counting.
create table relay_queues (
  target text primary key,
  queued bigint not null default 0,
  dropped bigint not null default 0,
  suppressed bigint not null default 0
);

-- Jobs that left the queue with an outcome (delivered, refused, or out of attempts), written with the
-- outcomes. A target's weblogs waiting = queued - dropped - settled, without counting rows.
alter table relay_targets add column settled bigint not null default 0;

insert into relay_queues (target, queued)
select target, count(*) from relay_jobs where state = 'pending' group by target;

-- The bound drops a target's waiting jobs stalest first (by their newest ping).
create index relay_jobs_stalest on relay_jobs (target, ping_id) where state = 'pending';
