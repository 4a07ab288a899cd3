// Owns /updates.xml: an RSS 2.0 feed of the new items of the last hour, newest first: those carried by
// RSS Ping payloads, with their authentication level (the RSS Ping specification, "Sharing authenticated
// pings between ping server providers": "place an authenticated flag in feeds"), and those verification
// found by fetching a pinged feed. Each says where it came from (rssping:origin), its source site and feed. It is a LiveDocument of the publishing layer, so it gets the same rendering, caching,
// compression and RFC 3229 feed deltas as changes.xml. Rows in, bytes out: the renderers are pure. The
// head and each item are built with xmlbuilder2 (small, and an hour's worth of items at most); each item
// is its own string, because the renderer cuts feed deltas between entries.
import type { Queryable } from '../../platform/db/database.js';
import type { Entry, LiveDocument, RenderWindow } from './document.js';
import { create, fragment } from 'xmlbuilder2';
import { escapeXml } from '../../platform/xml/escape.js';
import { publishableLink, stripInvisible } from '../../platform/text/publishable.js';
import { payloadWindowPage, payloadWindowStats, type PayloadWindowRow } from '../../intake/rss-ping/payload-repository.js';
import { itemWindowPage, itemWindowStats, type ItemWindowRow } from '../../verification/item-repository.js';

export const UPDATES_PATH = '/updates.xml';
export const UPDATES_WINDOW_SEC = 3600;
/** The namespace of the authentication flag and the source site. */
export const RSSPING_NS = 'urn:pingd:rss-ping';
export const UPDATES_CONTENT_TYPE = 'application/rss+xml; charset=utf-8';
const PAGE_ROWS = 2000;

export const UPDATES_FOOT = '</channel>\n</rss>\n';
const CLOSE = UPDATES_FOOT.slice(0, -1);

// One element per line, no indentation, as the RSS 2.0 documents we wrote by hand always were.
const LAYOUT = { prettyPrint: true, indent: '', newline: '\n' } as const;

/** The feed's head: channel metadata. `updated` is the rendering time (whole seconds). */
export function updatesHead(updated: Date, windowSec = UPDATES_WINDOW_SEC, base = 'http://localhost:8080'): string {
  const channel = create({ version: '1.0', encoding: 'utf-8' })
    .ele('rss')
    .att('version', '2.0')
    .att('xmlns:rssping', RSSPING_NS)
    .ele('channel');
  channel.ele('title').txt('RSS Ping updates');
  // The channel's link is the site, absolute (feed validators reject a relative one): PUBLIC_URL's.
  channel.ele('link').txt(`${base}/`);
  channel
    .ele('description')
    .txt(
      `New items of the last ${Math.round(windowSec / 60)} minutes, newest first: carried by RSS Ping (with how each ping was authenticated) or found by fetching a pinged feed.`,
    );
  channel.ele('lastBuildDate').txt(updated.toUTCString());
  channel.ele('generator').txt('pingd');
  channel.ele('docs').txt('https://www.rssboard.org/rss-specification');
  // The serialiser closes <channel> and <rss>; the items follow the head, and UPDATES_FOOT closes them.
  const xml = channel.end(LAYOUT);
  if (!xml.endsWith(CLOSE)) throw new Error(`xmlbuilder2 did not end the head with ${JSON.stringify(CLOSE)}`);
  return xml.slice(0, -CLOSE.length);
}

/**
 * One <item>: what the publisher's payload said, where it came from, and how far we trust it. xmlbuilder2
 * writes characters XML 1.0 forbids as they are, and leaves an `&` that starts a reference (`&amp;`,
 * `&bogus;`) unescaped, so a literal "&amp;" would read back as "&": all text and attribute values go in
 * escaped by escapeXml, which it then writes unchanged.
 */
export function updatesItem(r: PayloadWindowRow): string {
  const feed = r.feeds[0];
  const guid = r.item_guid ?? r.item_uri;
  const permalink = r.item_link !== null && guid === r.item_link && publishableLink(r.item_link) !== null;
  const item = fragment().ele('item');
  const link = httpLink(r.item_link);
  item.ele('title').txt(escapeXml(stripInvisible(r.headline)));
  if (link) item.ele('link').txt(escapeXml(link));
  if (r.summary) item.ele('description').txt(escapeXml(r.summary));
  item.ele('guid').att('isPermaLink', String(permalink)).txt(escapeXml(guid));
  item.ele('pubDate').txt(new Date(r.at_us / 1000).toUTCString());
  if (feed) item.ele('source').att('url', escapeXml(feed.uri)).txt(escapeXml(r.site_name));
  item.ele('rssping:site').att('url', escapeXml(r.site_url)).txt(escapeXml(r.site_name));
  for (const f of r.feeds) {
    const e = item.ele('rssping:feed').att('url', escapeXml(f.uri));
    if (f.type) e.att('type', escapeXml(f.type));
  }
  item.ele('rssping:authentication').txt(r.auth);
  item.ele('rssping:origin').txt('rss_ping');
  return `${item.end(LAYOUT)}\n`;
}

/** A stored link as it is when it is an absolute http(s) URL (publishable.ts), else none. */
function httpLink(link: string | null): string | null {
  return link !== null && publishableLink(link) !== null ? link : null;
}

/**
 * One <item> verification found in a pinged feed: what the feed said, the weblog and feed it came from.
 * Verification stores items cleaned (document-task.ts); links and titles are checked again here, cheaply,
 * so rows stored before that (or by another version) are never republished with a script link.
 */
export function foundItem(r: ItemWindowRow): string {
  const item = fragment().ele('item');
  const link = httpLink(r.link);
  item.ele('title').txt(escapeXml(stripInvisible(r.title ?? link ?? '(untitled)')));
  if (link) item.ele('link').txt(escapeXml(link));
  if (r.summary) item.ele('description').txt(escapeXml(r.summary));
  const guid = r.guid ?? link;
  if (guid)
    item
      .ele('guid')
      .att('isPermaLink', String(guid === link))
      .txt(escapeXml(guid));
  item.ele('pubDate').txt(new Date((r.published_us ?? r.at_us) / 1000).toUTCString());
  item.ele('source').att('url', escapeXml(r.feed_url)).txt(escapeXml(r.weblog_name));
  item.ele('rssping:site').att('url', escapeXml(r.weblog_url)).txt(escapeXml(r.weblog_name));
  item.ele('rssping:feed').att('url', escapeXml(r.feed_url));
  item.ele('rssping:origin').txt('fetched');
  return `${item.end(LAYOUT)}\n`;
}

/** Entries of one source, newest first, in keyset pages. */
async function* sourcePages<R extends { at_us: number }>(
  read: (after: { atUs: number; id: number } | null) => Promise<R[]>,
  id: (r: R) => number,
  render: (r: R) => string,
): AsyncGenerator<Entry[]> {
  let after: { atUs: number; id: number } | null = null;
  for (;;) {
    const rows = await read(after);
    if (rows.length === 0) return;
    yield rows.map((r) => ({ xml: render(r), atUs: r.at_us }));
    if (rows.length < PAGE_ROWS) return;
    const last = rows[rows.length - 1];
    after = { atUs: last.at_us, id: id(last) };
  }
}

/** Two newest-first entry streams as one, newest first (ties: the first stream's entry first). */
export async function* mergeNewestFirst(
  a: AsyncGenerator<Entry[]>,
  b: AsyncGenerator<Entry[]>,
  pageSize = PAGE_ROWS,
): AsyncGenerator<Entry[]> {
  const bufs: Entry[][] = [[], []];
  const srcs = [a, b];
  const done = [false, false];
  const fill = async (i: number) => {
    while (!done[i] && bufs[i].length === 0) {
      const n = await srcs[i].next();
      if (n.done) done[i] = true;
      else bufs[i] = n.value;
    }
  };
  let out: Entry[] = [];
  for (;;) {
    await fill(0);
    await fill(1);
    const [x, y] = [bufs[0][0], bufs[1][0]];
    if (!x && !y) break;
    const take = !y || (x && x.atUs >= y.atUs) ? 0 : 1;
    out.push(bufs[take].shift() as Entry);
    if (out.length >= pageSize) {
      yield out;
      out = [];
    }
  }
  if (out.length) yield out;
}

function pages(q: Queryable, w: RenderWindow): AsyncIterable<Entry[]> {
  return mergeNewestFirst(
    sourcePages(
      (after) => payloadWindowPage(q, w.fromUs, w.toUs, after, PAGE_ROWS),
      (r: PayloadWindowRow) => r.ping_id,
      updatesItem,
    ),
    sourcePages(
      (after) => itemWindowPage(q, w.fromUs, w.toUs, after, PAGE_ROWS),
      (r: ItemWindowRow) => r.id,
      foundItem,
    ),
  );
}

/** The /updates.xml LiveDocument. */
/** @param base where the service is reached (PUBLIC_URL), for the channel's link. */
export function updatesDocument(base?: string): LiveDocument {
  return {
    name: 'updates.xml',
    path: UPDATES_PATH,
    contentType: UPDATES_CONTENT_TYPE,
    windowSec: UPDATES_WINDOW_SEC,
    deltas: true,
    async fingerprint(q, w) {
      // A new payload or item raises a max; one leaving the window lowers an n: either changes the bytes.
      const s = await payloadWindowStats(q, w.fromUs, w.toUs);
      const f = await itemWindowStats(q, w.fromUs, w.toUs);
      // The channel's link is absolute under PUBLIC_URL (or PORT): a new base is a new document, even
      // with the same items (it kept the old link until the next item came).
      return `${s.n}:${s.maxUs}:${s.maxId}/${f.n}:${f.maxUs}:${f.maxId}@${base ?? ''}`;
    },
    async source(q, w) {
      return { head: updatesHead(new Date(w.updatedMs), UPDATES_WINDOW_SEC, base), pages: pages(q, w), foot: UPDATES_FOOT };
    },
  };
}
