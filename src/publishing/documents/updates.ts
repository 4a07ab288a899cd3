// Owns /updates.xml: an RSS 2.0 feed of the items received by RSS Ping in the last hour, newest first,
// each with its title, link, guid, source site and feed, and its authentication level (seed 003,
// "Sharing authenticated pings between ping server providers": "place an authenticated flag in feeds").
// It is a LiveDocument of the publishing layer, so it gets the same rendering, caching, compression and
// RFC 3229 feed deltas as changes.xml. Rows in, bytes out: the renderers are pure.
import type { Queryable } from '../../platform/db/database.js';
import type { Entry, LiveDocument, RenderWindow } from './document.js';
import { escapeXml } from '../../platform/xml/escape.js';
import { payloadWindowPage, payloadWindowStats, type PayloadWindowRow } from '../../intake/rss-ping/payload-repository.js';

export const UPDATES_PATH = '/updates.xml';
export const UPDATES_WINDOW_SEC = 3600;
/** The namespace of the authentication flag and the source site. */
export const RSSPING_NS = 'urn:pingd:rss-ping';
export const UPDATES_CONTENT_TYPE = 'application/rss+xml; charset=utf-8';
const PAGE_ROWS = 2000;

/** The feed's head: channel metadata. `updated` is the rendering time (whole seconds). */
export function updatesHead(updated: Date, windowSec = UPDATES_WINDOW_SEC): string {
  return (
    '<?xml version="1.0" encoding="utf-8"?>\n' +
    `<rss version="2.0" xmlns:rssping="${RSSPING_NS}">\n<channel>\n` +
    '<title>RSS Ping updates</title>\n' +
    // No public base URL is configured: the channel's link is the document's own path.
    `<link>${UPDATES_PATH}</link>\n` +
    `<description>Items received by RSS Ping in the last ${Math.round(windowSec / 60)} minutes, newest first, with how each ping was authenticated.</description>\n` +
    `<lastBuildDate>${updated.toUTCString()}</lastBuildDate>\n` +
    '<generator>pingd</generator>\n' +
    '<docs>https://www.rssboard.org/rss-specification</docs>\n'
  );
}

export const UPDATES_FOOT = '</channel>\n</rss>\n';

/** One <item>: what the publisher's payload said, where it came from, and how far we trust it. */
export function updatesItem(r: PayloadWindowRow): string {
  const feed = r.feeds[0];
  const guid = r.item_guid ?? r.item_uri;
  const permalink = r.item_link !== null && guid === r.item_link;
  return (
    '<item>\n' +
    `<title>${escapeXml(r.headline)}</title>\n` +
    (r.item_link ? `<link>${escapeXml(r.item_link)}</link>\n` : '') +
    (r.summary ? `<description>${escapeXml(r.summary)}</description>\n` : '') +
    `<guid isPermaLink="${permalink}">${escapeXml(guid)}</guid>\n` +
    `<pubDate>${new Date(r.at_us / 1000).toUTCString()}</pubDate>\n` +
    (feed ? `<source url="${escapeXml(feed.uri)}">${escapeXml(r.site_name)}</source>\n` : '') +
    `<rssping:site url="${escapeXml(r.site_url)}">${escapeXml(r.site_name)}</rssping:site>\n` +
    r.feeds.map((f) => `<rssping:feed url="${escapeXml(f.uri)}"${f.type ? ` type="${escapeXml(f.type)}"` : ''}/>\n`).join('') +
    `<rssping:authentication>${r.auth}</rssping:authentication>\n` +
    '</item>\n'
  );
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
