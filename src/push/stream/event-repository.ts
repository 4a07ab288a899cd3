// Owns the SQL of the live stream: reading the events after a position (accepted pings and settled
// verifications, merged in position order), a replay's read of one window of positions with the
// connection's filter in the query, stamping settled verifications with their positions, the latest
// position, and the retention horizon. Plain values in, plain rows out.
import type { Db, Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';
import { EVENT_ORDER_LOCK } from '../../intake/ping/ping-repository.js';

export interface EventRow {
  type: 'ping' | 'verified';
  pos: number;
  pingId: number;
  name: string | null;
  url: string;
  changesUrl: string | null;
  rssUrl: string | null;
  tags: string[] | null;
  method: string | null;
  receivedAt: Date;
  outcome: string | null;
  newItems: { title: string | null; link: string | null; guid: string | null }[] | null;
}

interface RawRow {
  type: 'ping' | 'verified';
  pos: number;
  ping_id: number;
  name: string | null;
  url: string;
  changes_url: string | null;
  rss_url: string | null;
  tags: string[] | null;
  method: string | null;
  received_at: Date;
  outcome: string | null;
  new_items: unknown;
}

// A job's ping is looked up by (id, received_at), one row per job (LATERAL): the received_at picks its day
// partition when the statement runs; a plain join was planned as a hash join over every partition.
const PING_COLS = `p.name, p.url, p.changes_url, p.rss_url, p.tags, p.method, p.received_at, null::text as outcome, null::jsonb as new_items`;

/** `verified` events: every settled verification, by its stamped position. */
const VERIFIED = `
  (select 'verified' as type, v.event_id as pos, v.ping_id, null::text as name, w.url, null::text as changes_url, null::text as rss_url,
          p.tags, null::text as method, v.received_at, v.outcome, v.new_items
     from ping_verifications v join weblogs w on w.id = v.weblog_id left join lateral (select p.tags from pings p where p.id = v.ping_id and p.received_at = v.received_at limit 1) p on true
    where v.event_id > $1 order by v.event_id limit $2)`;

/**
 * Every event after `after`, in position order, at most `limit`. `ping` events are the pings themselves
 * (position = id), or under VERIFY_PINGS=require the verified pings at the position they were released at.
 * Each branch walks its own index from `after`, so a read costs the same however long the tables are.
 */
const EVENTS_AFTER = {
  listed: `select * from (
    (select 'ping' as type, p.id as pos, p.id as ping_id, ${PING_COLS} from pings p where p.id > $1 order by p.id limit $2)
    union all ${VERIFIED}) e order by pos limit $2`,
  require: `select * from (
    (select 'ping' as type, v.release_id as pos, p.id as ping_id, ${PING_COLS}
       from ping_verifications v cross join lateral (select * from pings p where p.id = v.ping_id and p.received_at = v.received_at limit 1) p where v.release_id > $1 order by v.release_id limit $2)
    union all ${VERIFIED}) e order by pos limit $2`,
};

export type ReleaseRule = keyof typeof EVENTS_AFTER;

const eventRow = (r: RawRow): EventRow => ({
  type: r.type,
  pos: Number(r.pos),
  pingId: Number(r.ping_id),
  name: r.name,
  url: r.url,
  changesUrl: r.changes_url,
  rssUrl: r.rss_url,
  tags: r.tags,
  method: r.method,
  receivedAt: new Date(r.received_at),
  outcome: r.outcome,
  newItems: r.new_items as EventRow['newItems'],
});

export async function eventsAfter(q: Queryable, rule: ReleaseRule, after: number, limit: number): Promise<EventRow[]> {
  return withContext(`reading stream events after ${after}`, async () => {
    const rows = await q.query<RawRow>(EVENTS_AFTER[rule], [after, limit], { name: `pingd_stream_events_${rule}` });
    return rows.map(eventRow);
  });
}

/** What a replaying connection asks for, as the query can test it. */
export interface ReplayFilter {
  ping: boolean;
  verified: boolean;
  /** A host name in lower case (ASCII: international names arrive in punycode, as URLs are stored). */
  host: string | null;
  /** A tag in lower case. */
  tag: string | null;
}

/**
 * The filters as SQL. Each keeps every row the connection's own filter (events.ts `matches`, applied again
 * to what comes back) would take, and drops nearly all the others where they are cheapest to drop, before
 * the row is fetched, sent and formatted. Host: the name appears in the URL (stored URLs are WHATWG
 * serialisations, host in lower case). Tag: an ASCII tag lower-cased as JavaScript does (translate() does
 * not depend on the database's locale, lower() does), or any tag with a non-ASCII character (lower-cased
 * by the connection's filter: JavaScript folds some of them to ASCII, such as the Kelvin sign to "k").
 */
const hostIn = (url: string, param: string) => `strpos(lower(${url}), ${param}) > 0`;
const tagIn = (tags: string, param: string) =>
  `exists (select 1 from unnest(${tags}) t where octet_length(t) <> char_length(t) or translate(t, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') = ${param})`;

const replayStatements = new Map<string, { sql: string; name: string }>();

/** The statement of one filter shape: only the branches the filter takes, its tests in their WHERE. */
function replayStatement(rule: ReleaseRule, f: ReplayFilter): { sql: string; name: string } {
  const key = `${rule}_${f.ping ? 'p' : ''}${f.verified ? 'v' : ''}${f.host !== null ? 'h' : ''}${f.tag !== null ? 't' : ''}`;
  const known = replayStatements.get(key);
  if (known) return known;
  const host = f.host !== null ? '$3' : null;
  const tag = f.tag !== null ? (host ? '$4' : '$3') : null;
  const tests = (url: string, tags: string) => `${host ? ` and ${hostIn(url, host)}` : ''}${tag ? ` and ${tagIn(tags, tag)}` : ''}`;
  const branches: string[] = [];
  if (f.ping) {
    branches.push(
      rule === 'listed'
        ? `select 'ping' as type, p.id as pos, p.id as ping_id, ${PING_COLS} from pings p where p.id > $1 and p.id <= $2${tests('p.url', 'p.tags')}`
        : `select 'ping' as type, v.release_id as pos, p.id as ping_id, ${PING_COLS}
             from ping_verifications v cross join lateral (select * from pings p where p.id = v.ping_id and p.received_at = v.received_at limit 1) p
            where v.release_id > $1 and v.release_id <= $2${tests('p.url', 'p.tags')}`,
    );
  }
  if (f.verified) {
    branches.push(`select 'verified' as type, v.event_id as pos, v.ping_id, null::text as name, w.url, null::text as changes_url, null::text as rss_url,
          p.tags, null::text as method, v.received_at, v.outcome, v.new_items
     from ping_verifications v join weblogs w on w.id = v.weblog_id left join lateral (select p.tags from pings p where p.id = v.ping_id and p.received_at = v.received_at limit 1) p on true
    where v.event_id > $1 and v.event_id <= $2${tests('w.url', 'p.tags')}`);
  }
  const made = {
    sql: `select * from (${branches.map((b) => `(${b})`).join(' union all ')}) e order by pos`,
    name: `pingd_stream_replay_${key}`,
  };
  replayStatements.set(key, made);
  return made;
}

/**
 * A replay's read: the events at positions in (after, upto] that may pass the filter, in position order.
 * Each branch walks its own index over that window, so a read costs at most the window's rows, however
 * long the tables and whatever the filter (one that matches nothing costs the index walk and the test of
 * each row, not their transfer). Every position up to `upto` must already be committed (the caller's
 * bound), so that nothing in the window becomes visible later.
 */
export async function replayEvents(q: Queryable, rule: ReleaseRule, after: number, upto: number, f: ReplayFilter): Promise<EventRow[]> {
  if (!f.ping && !f.verified) return [];
  return withContext(`reading stream events ${after + 1}–${upto} for a replay`, async () => {
    const { sql, name } = replayStatement(rule, f);
    const params: unknown[] = [after, upto];
    if (f.host !== null) params.push(f.host);
    if (f.tag !== null) params.push(f.tag);
    const rows = await q.query<RawRow>(sql, params, { name });
    return rows.map(eventRow);
  });
}

/** The highest position handed out so far (0 on an empty database). */
export async function latestPosition(q: Queryable): Promise<number> {
  return withContext('reading the latest stream position', async () => {
    const [r] = await q.query<{ pos: number }>(
      // A release position is always drawn before its row's event position: the event ids bound both.
      `select greatest((select coalesce(max(id), 0) from pings),
                       (select coalesce(max(event_id), 0) from ping_verifications))::bigint as pos`,
    );
    return Number(r.pos);
  });
}

/** The highest position retention has deleted: resuming from before it may skip events. */
export async function prunedThrough(q: Queryable): Promise<number> {
  return withContext('reading the stream horizon', async () => {
    const [r] = await q.query<{ n: number }>('select pruned_through as n from stream_horizon');
    return Number(r?.n ?? 0);
  });
}

/**
 * Gives settled verifications their positions, oldest outcome first: a verified one first its released
 * `ping` position (used under VERIFY_PINGS=require), then every one its `verified` position. Outcomes are
 * committed by the verifier without EVENT_ORDER_LOCK (taking it there would stall intake behind fetch
 * bookkeeping, or deadlock with its weblog row locks); this short transaction takes it first, so positions
 * still become visible in order. Rows another stamper holds are skipped. Returns how many were stamped and
 * the highest position given (0 when none).
 */
export async function stampVerifications(db: Db, limit: number): Promise<{ stamped: number; last: number }> {
  return withContext('stamping verification outcomes with stream positions', async () => {
    // Most calls find nothing: answer those from the partial index, without the lock or a transaction.
    const [any] = await db.query<{ due: boolean }>(
      'select exists (select 1 from ping_verifications where outcome is not null and event_id is null) as due',
    );
    if (!any.due) return { stamped: 0, last: 0 };
    return db.transaction(async (tx) => {
      await tx.query('select pg_advisory_xact_lock($1) is null as locked', [EVENT_ORDER_LOCK]);
      const rows = await tx.query<{ ping_id: number; verified: boolean }>(
        `select ping_id, outcome = 'verified' as verified from ping_verifications
          where outcome is not null and event_id is null
          order by done_at, ping_id limit $1 for update skip locked`,
        [limit],
      );
      if (rows.length === 0) return { stamped: 0, last: 0 };
      const need = rows.reduce((n, r) => n + (r.verified ? 2 : 1), 0);
      const drawn = await tx.query<{ v: number }>(
        `select nextval(pg_get_serial_sequence('pings', 'id'))::bigint as v from generate_series(1, $1::int) order by 1`,
        [need],
      );
      const values = drawn.map((d) => Number(d.v));
      const ids: number[] = [];
      const release: (number | null)[] = [];
      const event: number[] = [];
      let i = 0;
      for (const r of rows) {
        ids.push(Number(r.ping_id));
        release.push(r.verified ? values[i++] : null);
        event.push(values[i++]);
      }
      await tx.query(
        `update ping_verifications v set release_id = u.r, event_id = u.e
           from unnest($1::bigint[], $2::bigint[], $3::bigint[]) as u(ping_id, r, e) where v.ping_id = u.ping_id`,
        [ids, release, event],
      );
      return { stamped: rows.length, last: values[values.length - 1] };
    });
  });
}
