// Owns the SQL of feed topics' changes (websub_changes): whether a feed has live subscriptions (the hub's
// interest in its changes), storing a change and queueing one delivery of it per subscriber in the
// verification's own transaction, the next change a subscriber has not gone through, the feeds a poll is
// due for, and pruning changes nobody is behind. Plain values in, plain rows out.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';

/** Whether any unexpired subscription names the feed. */
export async function feedSubscribed(q: Queryable, feedId: number): Promise<boolean> {
  return withContext(`looking for subscribers of feed ${feedId}`, async () => {
    const rows = await q.query('select 1 from websub_subscriptions where feed_id = $1 and expires_at > now() limit 1', [feedId]);
    return rows.length > 0;
  });
}

/**
 * Stores a change of the feed and queues its delivery to each unexpired subscription: a delivery already
 * waiting takes the newer change (the subscriber goes through them in order, one at a time) and keeps its
 * time. Returns the subscriptions reached (0: nothing stored).
 */
export async function queueChange(
  q: Queryable,
  feedId: number,
  doc: { contentType: string; body: Buffer; entries: number },
): Promise<number> {
  return withContext(`queueing WebSub deliveries of feed ${feedId}`, async () => {
    const rows = await q.query(
      `with c as (
         insert into websub_changes (feed_id, content_type, body, entries)
         select $1, $2, $3, $4 where exists (select 1 from websub_subscriptions where feed_id = $1 and expires_at > now())
         returning id
       )
       insert into websub_tasks as t (kind, coalesce_key, subscription_id, change_id, callback_host)
       select 'deliver', 'deliver ' || s.id, s.id, c.id, s.callback_host
         from websub_subscriptions s cross join c where s.feed_id = $1 and s.expires_at > now()
       on conflict (coalesce_key) do update set change_id = greatest(coalesce(t.change_id, 0), excluded.change_id), seq = t.seq + 1
       returning id`,
      [feedId, doc.contentType.slice(0, 256), doc.body, doc.entries],
    );
    return rows.length;
  });
}

export interface FeedChangeRow {
  id: number;
  contentType: string;
  body: Buffer;
  entries: number;
}

/** The oldest change of the feed after `throughId` (the subscriber's last), or undefined. */
export async function nextChange(q: Queryable, feedId: number, throughId: number): Promise<FeedChangeRow | undefined> {
  return withContext(`reading the next change of feed ${feedId}`, async () => {
    const [r] = await q.query<{ id: number; content_type: string; body: Buffer | Uint8Array; entries: number }>(
      'select id, content_type, body, entries from websub_changes where feed_id = $1 and id > $2 order by id limit 1',
      [feedId, throughId],
    );
    if (!r) return undefined;
    return { id: Number(r.id), contentType: r.content_type, body: Buffer.from(r.body), entries: Number(r.entries) };
  });
}

/** Deletes changes no live subscription is behind, and every change older than `keepDays`. */
export async function pruneChanges(q: Queryable, keepDays = 7): Promise<number> {
  return withContext('pruning WebSub feed changes', async () => {
    const rows = await q.query(
      `delete from websub_changes c
        where c.created_at < now() - make_interval(days => $1::int)
           or not exists (select 1 from websub_subscriptions s where s.feed_id = c.feed_id and s.expires_at > now() and s.through_change_id < c.id)
       returning id`,
      [keepDays],
    );
    return rows.length;
  });
}

export interface PollCandidate {
  feedId: number;
  topic: string;
}

/**
 * Subscribed feed topics whose last fetch (by anyone: a ping's verification counts) is older than
 * `intervalSec`, never fetched ones first, at most `limit`; a poll already queued is skipped. The feed's
 * own hints and 410 are the caller's to weigh (poll.ts).
 */
export async function pollCandidates(
  q: Queryable,
  intervalSec: number,
  limit: number,
): Promise<(PollCandidate & { lastFetchAt: Date | null; gone: boolean; hints: Record<string, unknown> })[]> {
  return withContext('finding WebSub topics to poll', async () => {
    const rows = await q.query<{
      feed_id: number;
      topic: string;
      last_fetch_at: Date | null;
      gone: boolean;
      hints: Record<string, unknown> | string;
    }>(
      `select f.id as feed_id, s.topic, f.last_fetch_at, f.gone, f.hints
         from (select distinct on (feed_id) feed_id, topic from websub_subscriptions where feed_id is not null and expires_at > now() order by feed_id, id) s
         join feeds f on f.id = s.feed_id
        where not f.gone
          and (f.last_fetch_at is null or f.last_fetch_at < now() - make_interval(secs => $1::int))
          and not exists (select 1 from websub_tasks t where t.coalesce_key = 'poll ' || f.id)
        order by f.last_fetch_at nulls first
        limit $2`,
      [intervalSec, limit],
    );
    return rows.map((r) => ({
      feedId: Number(r.feed_id),
      topic: r.topic,
      lastFetchAt: r.last_fetch_at ? new Date(r.last_fetch_at) : null,
      gone: Boolean(r.gone),
      hints: typeof r.hints === 'string' ? (JSON.parse(r.hints) as Record<string, unknown>) : (r.hints ?? {}),
    }));
  });
}
