// Owns the SQL of ping intake: the group-commit insert with its per-weblog throttle, and the lookups the
// rest of the service needs about weblogs and pings. Plain values in, plain rows out.
import type { Queryable } from '../db/database.js';
import type { ValidPing } from './validate.js';

export type InsertOutcome =
  | { status: 'accepted'; id: number; receivedAt: Date }
  | { status: 'throttled'; lastPingAt: Date | null };

/**
 * One statement inserts a whole batch: new weblogs are created, known ones updated only when their last
 * accepted ping is at least `minIntervalSec` old (the throttle is decided by the row lock of the upsert,
 * so it holds across concurrent batches and instances), and a ping row is written for every weblog the
 * upsert touched. Callers must not pass two pings for one URL in a batch (ON CONFLICT cannot touch a row
 * twice in one statement). Results come back in input order.
 */
const INSERT_BATCH = `
with input as (
  select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
    as t(method, name, url, changes_url, rss_url, tags, client_addr, user_agent)
),
up as (
  insert into weblogs as w (url, name, changes_url, rss_url, first_ping_at, last_ping_at)
  select url, name, changes_url, rss_url, now(), now() from input
  on conflict (url) do update
    set name = excluded.name,
        changes_url = coalesce(excluded.changes_url, w.changes_url),
        rss_url = coalesce(excluded.rss_url, w.rss_url),
        last_ping_at = greatest(w.last_ping_at, excluded.last_ping_at),
        ping_count = w.ping_count + 1
    where $9::int = 0 or w.last_ping_at <= now() - make_interval(secs => $9::int)
  returning w.id, w.url
),
ins as (
  insert into pings (weblog_id, received_at, method, name, url, changes_url, rss_url, tags, client_addr, user_agent)
  select up.id, now(), i.method, i.name, i.url, i.changes_url, i.rss_url, string_to_array(i.tags, '|'), i.client_addr, i.user_agent
  from input i join up on up.url = i.url
  returning id, url, received_at
)
select true as accepted, id, url, received_at as at from ins
union all
select false, w.id, w.url, w.last_ping_at from weblogs w
  where w.url in (select url from input) and w.url not in (select url from up)`;

export async function insertPingBatch(q: Queryable, pings: ValidPing[], minIntervalSec: number): Promise<InsertOutcome[]> {
  const cols: (string | null)[][] = [[], [], [], [], [], [], [], []];
  for (const p of pings) {
    cols[0].push(p.method);
    cols[1].push(p.name);
    cols[2].push(p.url);
    cols[3].push(p.changesUrl);
    cols[4].push(p.rssUrl);
    cols[5].push(p.tags ? p.tags.join('|') : null);
    cols[6].push(p.clientAddr);
    cols[7].push(p.userAgent);
  }
  let rows: { accepted: boolean; id: number; url: string; at: Date }[];
  try {
    rows = await q.query(INSERT_BATCH, [...cols, minIntervalSec]);
  } catch (err) {
    throw new Error(`inserting a batch of ${pings.length} pings failed: ${(err as Error).message}`, { cause: err });
  }
  const byUrl = new Map<string, InsertOutcome>();
  for (const r of rows) {
    byUrl.set(r.url, r.accepted ? { status: 'accepted', id: Number(r.id), receivedAt: new Date(r.at) } : { status: 'throttled', lastPingAt: new Date(r.at) });
  }
  return pings.map((p) => byUrl.get(p.url) ?? { status: 'throttled', lastPingAt: null });
}

export interface PingRow {
  id: number;
  weblog_id: number;
  received_at: Date;
  method: string;
  name: string;
  url: string;
  changes_url: string | null;
  rss_url: string | null;
  tags: string[] | null;
  client_addr: string | null;
  user_agent: string | null;
}

export async function findPingsByUrl(q: Queryable, url: string): Promise<PingRow[]> {
  return q.query<PingRow>('select * from pings where url = $1 order by id', [url]);
}

export async function countPings(q: Queryable): Promise<number> {
  const [r] = await q.query<{ n: number }>('select count(*)::bigint as n from pings');
  return Number(r.n);
}

export interface WeblogRow {
  id: number;
  url: string;
  name: string;
  changes_url: string | null;
  rss_url: string | null;
  first_ping_at: Date;
  last_ping_at: Date;
  ping_count: number;
}

export async function findWeblog(q: Queryable, url: string): Promise<WeblogRow | undefined> {
  const [r] = await q.query<WeblogRow>('select * from weblogs where url = $1', [url]);
  return r;
}
