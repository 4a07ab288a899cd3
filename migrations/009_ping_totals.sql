-- The total of pings ever accepted (the `count` attribute of changes.xml/shortChanges.xml, `pingd stats`), kept
-- as a counter instead of summed from weblogs by every render: that sum reads the whole table (~120 ms at 1M
-- weblogs on PostgreSQL, measured; 10 times that at 10M). Intake's batch statement adds the pings it accepted
-- to one slot (src/intake/ping/ping-repository.ts), so the counter commits or rolls back with the pings and
-- always equals sum(weblogs.ping_count). Readers sum the slots: 16 rows on one page.
--
-- Why slots, and 16: one row for all would make every batch's increment wait for the previous one's commit
-- on that row lock. Today the increment runs inside the section batches already take turns through (while
-- holding EVENT_ORDER_LOCK), so they do not wait on it; the slots keep it that way if it ever moves out of that
-- section. Each batch picks a slot at random: with up to 4 batches in flight per instance and a few instances,
-- 16 slots make two of them on one slot rare (and a wait, when it happens, is one commit), for a read of 16
-- rows instead of 1.
create table ping_totals (
  slot smallint primary key,
  n bigint not null
);

-- Existing databases keep their count exactly: the whole current sum goes into slot 0. The share lock holds off
-- any writer of weblogs (an instance still running the previous version) between this sum and the commit.
lock table weblogs in share mode;
insert into ping_totals (slot, n) select s, 0 from generate_series(0, 15) s;
update ping_totals set n = (select coalesce(sum(ping_count), 0) from weblogs) where slot = 0;
