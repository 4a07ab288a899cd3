// Owns /updates.xml: an RSS 2.0 feed of the items received by RSS Ping in the last hour, newest first,
// each with its title, link, guid, source site and feed, and its authentication level (the RSS Ping
// specification, "Sharing authenticated pings between ping server providers": "place an authenticated flag
// in feeds"). It is a LiveDocument of the publishing layer, so it gets the same rendering, caching,
// compression and RFC 3229 feed deltas as changes.xml. Rows in, bytes out: the renderers are pure. The
// head and each item are built with xmlbuilder2 (small, and an hour's worth of items at most); each item
// is its own string, because the renderer cuts feed deltas between entries.
import type { Queryable } from '../../platform/db/database.js';
import type { Entry, LiveDocument, RenderWindow } from './document.js';
import { create, fragment } from 'xmlbuilder2';
import { escapeXml } from '../../platform/xml/escape.js';
import { payloadWindowPage, payloadWindowStats, type PayloadWindowRow } from '../../intake/rss-ping/payload-repository.js';

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
export function updatesHead(updated: Date, windowSec = UPDATES_WINDOW_SEC): string {
  const channel = create({ version: '1.0', encoding: 'utf-8' }).ele('rss').att('version', '2.0').att('xmlns:rssping', RSSPING_NS).ele('channel');
  channel.ele('title').txt('RSS Ping updates');
  // No public base URL is configured: the channel's link is the document's own path.
  channel.ele('link').txt(UPDATES_PATH);
  channel.ele('description').txt(`Items received by RSS Ping in the last ${Math.round(windowSec / 60)} minutes, newest first, with how each ping was authenticated.`);
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
  const permalink = r.item_link !== null && guid === r.item_link;
  const item = fragment().ele('item');
  item.ele('title').txt(escapeXml(r.headline));
  if (r.item_link) item.ele('link').txt(escapeXml(r.item_link));
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
  return `${item.end(LAYOUT)}\n`;
}

async function* pages(q: Queryable, w: RenderWindow): AsyncIterable<Entry[]> {
  let after: { atUs: number; id: number } | null = null;
  for (;;) {
    const rows = await payloadWindowPage(q, w.fromUs, w.toUs, after, PAGE_ROWS);
    if (rows.length === 0) return;
    yield rows.map((r) => ({ xml: updatesItem(r), atUs: r.at_us }));
    if (rows.length < PAGE_ROWS) return;
    const last = rows[rows.length - 1];
    after = { atUs: last.at_us, id: last.ping_id };
  }
}

/** The /updates.xml LiveDocument. */
export function updatesDocument(): LiveDocument {
  return {
    name: 'updates.xml',
    path: UPDATES_PATH,
    contentType: UPDATES_CONTENT_TYPE,
    windowSec: UPDATES_WINDOW_SEC,
    deltas: true,
    async fingerprint(q, w) {
      // A new payload raises the max; one leaving the window lowers n: either changes the bytes.
      const s = await payloadWindowStats(q, w.fromUs, w.toUs);
      return `${s.n}:${s.maxUs}:${s.maxId}`;
    },
    async source(q, w) {
      return { head: updatesHead(new Date(w.updatedMs)), pages: pages(q, w), foot: UPDATES_FOOT };
    },
  };
}
