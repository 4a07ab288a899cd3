// Owns the SQL of feed state: each feed's HTTP state and hints (the RSS Feed State document: validators,
// redirects, gone, polling hints), the identities of items seen, the weblog's remembered feed and latest
// verification, and the items found. Plain values in, plain rows out. (The per-host request slots are
// platform/fetch/host-repository.ts's.)
import type { Queryable } from '../platform/db/database.js';
import { withContext } from '../platform/errors.js';
import type { Outcome } from '../platform/outcomes.js';
import type { FeedHints } from './feed-parser.js';

export type { FeedHints };

export interface FeedRow {
  id: number;
  url: string;
  fetchUrl: string;
  movedTo: string | null;
  movedSeen: number;
  etag: string | null;
  lastModified: string | null;
  lastStatus: number | null;
  lastOutcome: Outcome | null;
  lastFetchAt: Date | null;
  lastSuccessAt: Date | null;
  nextFetchAfter: Date | null;
  failures: number;
  gone: boolean;
  hints: FeedHints;
  title: string | null;
  /** The feed's own site (its <link>), as the last fetch found it. */
  siteUrl: string | null;
  /** It named this server as its WebSub hub or rssCloud cloud when last read as a feed (names-pingd.ts). */
  namesPingd: boolean;
  seen: string[];
}

const COLUMNS = `id, url, fetch_url, moved_to, moved_seen, etag, last_modified, last_status, last_outcome, last_fetch_at,
  last_success_at, next_fetch_after, failures, gone, hints, title, site_url, names_pingd, seen`;

type Raw = {
  id: number;
  url: string;
  fetch_url: string;
  moved_to: string | null;
  moved_seen: number;
  etag: string | null;
  last_modified: string | null;
  last_status: number | null;
  last_outcome: Outcome | null;
  last_fetch_at: Date | null;
  last_success_at: Date | null;
  next_fetch_after: Date | null;
  failures: number;
  gone: boolean;
  hints: FeedHints | string;
  title: string | null;
  site_url: string | null;
  names_pingd: boolean;
  seen: string[] | null;
};

const date = (d: Date | null) => (d === null ? null : new Date(d));

function feedOf(r: Raw): FeedRow {
  return {
    id: Number(r.id),
    url: r.url,
    fetchUrl: r.fetch_url,
    movedTo: r.moved_to,
    movedSeen: Number(r.moved_seen),
    etag: r.etag,
    lastModified: r.last_modified,
    lastStatus: r.last_status === null ? null : Number(r.last_status),
    lastOutcome: r.last_outcome,
    lastFetchAt: date(r.last_fetch_at),
    lastSuccessAt: date(r.last_success_at),
    nextFetchAfter: date(r.next_fetch_after),
    failures: Number(r.failures),
    gone: Boolean(r.gone),
    hints: typeof r.hints === 'string' ? (JSON.parse(r.hints) as FeedHints) : (r.hints ?? {}),
    title: r.title,
    siteUrl: r.site_url,
    namesPingd: Boolean(r.names_pingd),
    seen: r.seen ?? [],
  };
}

/** The feed named by `url` (as pinged or discovered), created on first sight. */
export async function ensureFeed(q: Queryable, url: string): Promise<FeedRow> {
  return withContext(`reading the feed ${url}`, async () => {
    const [r] = await q.query<Raw>(
      `with ins as (insert into feeds (url, fetch_url) values ($1, $1) on conflict (url) do nothing returning ${COLUMNS})
       select ${COLUMNS} from ins union all select ${COLUMNS} from feeds where url = $1 limit 1`,
      [url],
    );
    if (r) return feedOf(r);
    // Another instance created it after this statement's snapshot was taken: it is visible now.
    const [again] = await q.query<Raw>(`select ${COLUMNS} from feeds where url = $1`, [url]);
    return feedOf(again);
  });
}

export async function feedById(q: Queryable, id: number): Promise<FeedRow | undefined> {
  const [r] = await withContext(`reading feed ${id}`, () => q.query<Raw>(`select ${COLUMNS} from feeds where id = $1`, [id]));
  return r ? feedOf(r) : undefined;
}

export async function feedByUrl(q: Queryable, url: string): Promise<FeedRow | undefined> {
  const [r] = await withContext(`reading the feed ${url}`, () =>
    q.query<Raw>(`select ${COLUMNS} from feeds where url = $1 or fetch_url = $1 order by (url = $1) desc limit 1`, [url]),
  );
  return r ? feedOf(r) : undefined;
}

/** What one fetch changed in a feed's state (every field is written: the caller computed the new state). */
export interface FeedUpdate {
  fetchUrl: string;
  movedTo: string | null;
  movedSeen: number;
  etag: string | null;
  lastModified: string | null;
  lastStatus: number | null;
  lastOutcome: Outcome;
  lastSuccessAt: Date | null;
  nextFetchAfter: Date | null;
  failures: number;
  gone: boolean;
  hints: FeedHints;
  title: string | null;
  siteUrl: string | null;
  namesPingd: boolean;
  seen: string[];
}

export async function saveFeed(q: Queryable, id: number, u: FeedUpdate): Promise<void> {
  await withContext(`saving feed ${id}`, () =>
    q.query(
      `update feeds set fetch_url = $2, moved_to = $3, moved_seen = $4, etag = $5, last_modified = $6, last_status = $7,
              last_outcome = $8, last_fetch_at = now(), last_success_at = $9, next_fetch_after = $10, failures = $11,
              gone = $12, hints = $13::jsonb, title = $14, seen = $15::text[], site_url = $16, names_pingd = $17
        where id = $1`,
      [
        id,
        u.fetchUrl,
        u.movedTo,
        u.movedSeen,
        u.etag,
        u.lastModified,
        u.lastStatus,
        u.lastOutcome,
        u.lastSuccessAt,
        u.nextFetchAfter,
        u.failures,
        u.gone,
        JSON.stringify(u.hints),
        u.title,
        u.seen,
        u.siteUrl,
        u.namesPingd,
      ],
    ),
  );
}

/** Clears a feed's gone flag, backoff and failures (an operator's `pingd feeds reset`). */
export async function resetFeed(q: Queryable, url: string): Promise<number> {
  return withContext(`resetting the feed ${url}`, async () => {
    const rows = await q.query(
      'update feeds set gone = false, failures = 0, next_fetch_after = null, moved_to = null, moved_seen = 0 where url = $1 or fetch_url = $1 returning id',
      [url],
    );
    return rows.length;
  });
}

export interface WeblogVerification {
  outcome: Outcome;
  at: string;
  httpStatus: number | null;
  feedUrl: string | null;
  newItems: { title: string | null; link: string | null; guid: string | null }[];
}

/** The weblog's feed, found by autodiscovery: later verifications go straight to it. */
export async function rememberFeed(q: Queryable, weblogId: number, feedId: number): Promise<void> {
  await withContext(`remembering the feed of weblog ${weblogId}`, () =>
    q.query('update weblogs set feed_id = $2 where id = $1', [weblogId, feedId]),
  );
}

/**
 * Records a weblog's latest verification and remembered feed; a `verified` one also moves the weblog's
 * last verified ping time forward (what changes.xml lists under VERIFY_PINGS=require).
 */
export async function recordVerification(
  q: Queryable,
  weblogId: number,
  feedId: number | null,
  v: WeblogVerification,
  verifiedThrough: Date | null,
): Promise<void> {
  await withContext(`recording the verification of weblog ${weblogId}`, () =>
    q.query(
      `update weblogs set verification = $2::jsonb, feed_id = coalesce($3, feed_id),
              last_verified_at = case when $4::timestamptz is null then last_verified_at else greatest(coalesce(last_verified_at, $4::timestamptz), $4::timestamptz) end
        where id = $1`,
      [weblogId, JSON.stringify(v), feedId, verifiedThrough],
    ),
  );
}

export interface NewItemRow {
  feedId: number;
  weblogId: number;
  pingId: number;
  weblogUrl: string;
  weblogName: string;
  feedUrl: string;
  title: string | null;
  link: string | null;
  guid: string | null;
  publishedAt: Date | null;
  summary: string | null;
}

/** Stores the items a fetch found new (they appear in /updates.xml); one statement for all of them. */
export async function insertItems(q: Queryable, items: NewItemRow[]): Promise<void> {
  if (items.length === 0) return;
  await withContext(`storing ${items.length} feed items`, () =>
    q.query(
      `insert into feed_items (feed_id, weblog_id, ping_id, received_at, weblog_url, weblog_name, feed_url, title, link, guid, published_at, summary)
       select t.feed_id, t.weblog_id, t.ping_id, clock_timestamp() + (t.ord * interval '1 microsecond'), t.weblog_url, t.weblog_name, t.feed_url, t.title, t.link, t.guid, t.published_at, t.summary
         from unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::timestamptz[], $11::text[])
              with ordinality as t(feed_id, weblog_id, ping_id, weblog_url, weblog_name, feed_url, title, link, guid, published_at, summary, ord)`,
      [
        items.map((i) => i.feedId),
        items.map((i) => i.weblogId),
        items.map((i) => i.pingId),
        items.map((i) => i.weblogUrl),
        items.map((i) => i.weblogName),
        items.map((i) => i.feedUrl),
        items.map((i) => i.title),
        items.map((i) => i.link),
        items.map((i) => i.guid),
        items.map((i) => i.publishedAt),
        items.map((i) => i.summary),
      ],
    ),
  );
}

export interface WeblogView {
  id: number;
  url: string;
  name: string;
  rssUrl: string | null;
  lastPingAt: Date;
  pingCount: number;
  verification: WeblogVerification | null;
  feed: FeedRow | undefined;
}

/** A weblog as pingd knows it, with its feed (GET /api/weblogs). */
export async function weblogView(q: Queryable, url: string): Promise<WeblogView | undefined> {
  const [w] = await withContext(`reading the weblog ${url}`, () =>
    q.query<{
      id: number;
      url: string;
      name: string;
      rss_url: string | null;
      last_ping_at: Date;
      ping_count: number;
      verification: WeblogVerification | string | null;
      feed_id: number | null;
    }>('select id, url, name, rss_url, last_ping_at, ping_count, verification, feed_id from weblogs where url = $1', [url]),
  );
  if (!w) return undefined;
  const verification = typeof w.verification === 'string' ? (JSON.parse(w.verification) as WeblogVerification) : w.verification;
  const feedId = w.feed_id === null ? null : Number(w.feed_id);
  let feed = feedId !== null ? await feedById(q, feedId) : undefined;
  if (!feed && w.rss_url) feed = await feedByUrl(q, w.rss_url);
  return {
    id: Number(w.id),
    url: w.url,
    name: w.name,
    rssUrl: w.rss_url,
    lastPingAt: new Date(w.last_ping_at),
    pingCount: Number(w.ping_count),
    verification,
    feed,
  };
}
