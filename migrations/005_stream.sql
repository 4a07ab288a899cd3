-- The live stream (/stream): every event has a position drawn from the pings' id sequence, so a reconnecting
-- client names one number (Last-Event-ID) and gets everything after it. A `ping` event's position is the
-- ping's id; a `verified` event's position is stamped on its ping_verifications row after the outcome
-- commits. Positions are handed out in commit order (see the stream's event repository).

-- Position of the `verified` event (stamped once the outcome committed; null while not yet).
alter table ping_verifications add column event_id bigint;
-- Position of the `ping` event under VERIFY_PINGS=require, where a ping is published only once verified
-- (stamped for verified outcomes, before event_id).
alter table ping_verifications add column release_id bigint;
-- The new items the fetch found ([{ title, link, guid }]), for the `verified` event.
alter table ping_verifications add column new_items jsonb;

create index ping_verifications_event_id on ping_verifications (event_id) where event_id is not null;
create index ping_verifications_release_id on ping_verifications (release_id) where release_id is not null;
-- Settled outcomes still waiting for their positions.
create index ping_verifications_unstamped on ping_verifications (done_at) where outcome is not null and event_id is null;

-- The highest position retention has deleted: a client resuming from before it may have missed events and
-- is told so (`event: reset`) instead of silently getting a gap.
create table stream_horizon (
  only_row boolean primary key default true check (only_row),
  pruned_through bigint not null default 0
);
insert into stream_horizon default values;
