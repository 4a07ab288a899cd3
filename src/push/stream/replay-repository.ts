// Owns the SQL of a stream replay's reads: one window of positions with the connection's filter in the
// query, row by row (replayEvents), or for a plain filter with the window's `ping` frames joined by the
// database (replayJoined). The columns and frames are event-repository.ts's, shared with the hub's read.
// Plain values in, plain rows out.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';
import { notHeldId } from '../../spam/spam-repository.js';
import {
  eventRow,
  pingCols,
  pingFrame,
  PING_HELD,
  RELEASED_FROM,
  VERIFIED_COLS,
  VERIFIED_FROM,
  type EventRow,
  type RawRow,
  type ReleaseRule,
} from './event-repository.js';

/** What a replaying connection asks for, as the query can test it. */
export interface ReplayFilter {
  ping: boolean;
  verified: boolean;
  /** Host names in lower case (ASCII: international names arrive in punycode, as URLs are stored). */
  hosts: readonly string[] | null;
  /** Tags in lower case. */
  tags: readonly string[] | null;
  /** Methods a `ping` event must have. */
  methods: readonly string[] | null;
  /** Outcomes a `verified` event must have. */
  outcomes: readonly string[] | null;
}

/**
 * The filters as SQL. Each keeps every row the connection's own filter (events.ts `matches`, applied again
 * to what comes back) would take, and drops nearly all the others where they are cheapest to drop, before
 * the row is fetched, sent and formatted. Host: one of the names appears in the URL (stored URLs are WHATWG
 * serialisations, host in lower case). Tag: an ASCII tag lower-cased as JavaScript does (translate() does
 * not depend on the database's locale, lower() does) is one of them, or any tag with a non-ASCII character
 * (lower-cased by the connection's filter: JavaScript folds some of them to ASCII, such as the Kelvin sign
 * to "k").
 */
const hostIn = (url: string, param: string) => `exists (select 1 from unnest(${param}::text[]) h where strpos(lower(${url}), h) > 0)`;
const tagIn = (tags: string, param: string) =>
  `exists (select 1 from unnest(${tags}) t where octet_length(t) <> char_length(t) or translate(t, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') = any(${param}::text[]))`;

const replayStatements = new Map<string, { sql: string; name: string }>();

/** The statement of one filter shape: only the branches the filter takes, its tests in their WHERE. */
function replayStatement(rule: ReleaseRule, f: ReplayFilter): { sql: string; name: string } {
  const key = `${rule}_${f.ping ? 'p' : ''}${f.verified ? 'v' : ''}${f.hosts !== null ? 'h' : ''}${f.tags !== null ? 't' : ''}${f.methods !== null ? 'm' : ''}${f.outcomes !== null ? 'o' : ''}`;
  const known = replayStatements.get(key);
  if (known) return known;
  // Parameters after (after, upto), in the order replayEvents pushes them.
  const [host, tag, method, outcome] = (() => {
    let n = 2;
    return [f.hosts, f.tags, f.methods, f.outcomes].map((v) => (v !== null ? `$${++n}` : null));
  })();
  const tests = (url: string, tags: string) => `${host ? ` and ${hostIn(url, host)}` : ''}${tag ? ` and ${tagIn(tags, tag)}` : ''}`;
  const branches: string[] = [];
  if (f.ping) {
    const m = method ? ` and p.method = any(${method}::text[])` : '';
    branches.push(
      rule === 'listed'
        ? `select 'ping' as type, p.id as pos, ${pingCols('p.id')} from pings p ${PING_HELD} where p.id > $1 and p.id <= $2${tests('p.url', 'p.tags')}${m}`
        : `select 'ping' as type, v.release_id as pos, ${pingCols('v.release_id')}
             ${RELEASED_FROM}
            where v.release_id > $1 and v.release_id <= $2${tests('p.url', 'p.tags')}${m}`,
    );
  }
  if (f.verified) {
    const o = outcome ? ` and v.outcome = any(${outcome}::text[])` : '';
    branches.push(`select 'verified' as type, v.event_id as pos, ${VERIFIED_COLS}
     ${VERIFIED_FROM}
    where v.event_id > $1 and v.event_id <= $2${tests('w.url', 'p.tags')}${o}`);
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
    if (f.hosts !== null) params.push(f.hosts);
    if (f.tags !== null) params.push(f.tags);
    if (f.methods !== null) params.push(f.methods);
    if (f.outcomes !== null) params.push(f.outcomes);
    const rows = await q.query<RawRow>(sql, params, { name });
    return rows.map(eventRow);
  });
}

/**
 * A whole window's read for a plain filter (no host, no tag: every test is exact in the query, so every event
 * it returns is one the connection takes): the `ping` frames joined by the database in position order, and
 * the `verified` events as rows (their frames are formatted by events.ts). Why: in a 1M-ping replay on
 * PostgreSQL, parsing a row per event into objects cost pingd ~3.5 µs an event (4.5 µs of client CPU a
 * row, against ~1 µs for the joined frames, 200,000 rows read 500 at a time, this machine).
 */
export interface JoinedRead {
  /** The `ping` events' frames joined ('' when none), how many, and the last one's position (NaN: none). */
  pings: { frames: string; count: number; last: number };
  verified: EventRow[];
}

const joinedStatements = new Map<string, { sql: string; name: string }>();

function joinedStatement(rule: ReleaseRule, f: ReplayFilter, spam: boolean): { sql: string; name: string } {
  const key = `${rule}_${f.ping ? 'p' : ''}${f.verified ? 'v' : ''}${f.methods !== null ? 'm' : ''}${f.outcomes !== null ? 'o' : ''}${spam ? 's' : ''}`;
  const known = joinedStatements.get(key);
  if (known) return known;
  // Parameters after (after, upto), in the order replayJoined pushes them.
  const method = f.methods !== null ? '$3' : null;
  const outcome = f.outcomes !== null ? `$${method ? 4 : 3}` : null;
  const branches: string[] = [];
  if (f.ping) {
    const m = method ? ` and p.method = any(${method}::text[])` : '';
    const held = spam ? '' : ' and not h.held';
    const rows =
      rule === 'listed'
        ? `select p.id as pos, ${pingFrame('p.id')} as frame from pings p ${PING_HELD} where p.id > $1 and p.id <= $2${m}${held} order by p.id`
        : `select v.release_id as pos, ${pingFrame('v.release_id')} as frame
             ${RELEASED_FROM}
            where v.release_id > $1 and v.release_id <= $2${m}${held} order by v.release_id`;
    // The frames are joined in the order the subquery sorts them (PostgreSQL's manual, "Aggregate Functions":
    // input from a sorted subquery is aggregated in that order). string_agg(… order by pos) sorted the
    // window again: 2.9 against 1.9 ms a window of 500 (PostgreSQL 15, this machine); the order is tested.
    // In VERIFIED_COLS's order, then the count.
    branches.push(`select 'ping' as type, max(e.pos) as pos, null::bigint as ping_id, null::text as url, null::text[] as tags, null::text as method,
       false as held, coalesce(string_agg(e.frame, ''), '') as frame, null::text as name, null::text as changes_url, null::text as rss_url,
       null::timestamptz as received_at, null::text as outcome, null::jsonb as new_items, count(*)::int as n
       from (${rows}) e`);
  }
  if (f.verified) {
    const o = outcome ? ` and v.outcome = any(${outcome}::text[])` : '';
    const held = spam ? '' : ` and ${notHeldId('v.weblog_id')}`;
    branches.push(`select 'verified' as type, v.event_id as pos, ${VERIFIED_COLS}, null::int as n
     ${VERIFIED_FROM}
    where v.event_id > $1 and v.event_id <= $2${o}${held}`);
  }
  const made = { sql: branches.map((b) => `(${b})`).join(' union all '), name: `pingd_stream_joined_${key}` };
  joinedStatements.set(key, made);
  return made;
}

/**
 * A replay's read of the whole window (after, upto] for a plain filter (hosts and tags null); `spam`: events
 * of weblogs held as spam too (`?spam=include`). Every event returned passes the connection's filter. As
 * with replayEvents, every position up to `upto` must already be committed.
 */
export async function replayJoined(
  q: Queryable,
  rule: ReleaseRule,
  after: number,
  upto: number,
  f: ReplayFilter,
  spam: boolean,
): Promise<JoinedRead> {
  if (f.hosts !== null || f.tags !== null) throw new Error('replayJoined takes a plain filter (no host, no tag)');
  const none = { frames: '', count: 0, last: NaN };
  if (!f.ping && !f.verified) return { pings: none, verified: [] };
  return withContext(`reading stream events ${after + 1}–${upto} for a replay`, async () => {
    const { sql, name } = joinedStatement(rule, f, spam);
    const params: unknown[] = [after, upto];
    if (f.methods !== null) params.push(f.methods);
    if (f.outcomes !== null) params.push(f.outcomes);
    const rows = await q.query<RawRow & { n: number | null }>(sql, params, { name });
    let pings = none;
    const verified: EventRow[] = [];
    for (const r of rows) {
      if (r.type === 'verified') verified.push(eventRow(r));
      else if (Number(r.n) > 0) pings = { frames: r.frame ?? '', count: Number(r.n), last: Number(r.pos) };
    }
    verified.sort((a, b) => a.pos - b.pos);
    return { pings, verified };
  });
}
