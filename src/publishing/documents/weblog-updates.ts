// Owns the bytes of the weblogUpdates format (seed 000, "Retrieving Pings"): the root element, one
// <weblog/> element per ping, and the attribute escaping that keeps them well-formed whatever was pinged.
// Pure functions over template strings: at 1M entries a builder library costs 10-20x more (BRIEF).
import { stripControls } from '../../intake/ping/validate.js';

// Anything that needs escaping or removing; the fast path (most names and URLs) is one regex test.
// eslint-disable-next-line no-control-regex
const NEEDS_WORK = /[&<>"\t\n\r\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\uD800-\uDFFF\uFFFE\uFFFF]/;
// eslint-disable-next-line no-control-regex
const SPECIAL = /[&<>"\t\n\r]/g;
// Tab, LF and CR are written as character references: a parser would otherwise normalise them to spaces
// in attribute values (XML 1.0 §3.3.3), and what we publish must read back exactly as stored.
const ENTITY: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', '\t': '&#9;', '\n': '&#10;', '\r': '&#13;' };

/** Escapes text for a double-quoted XML attribute value, removing characters XML 1.0 forbids. */
export function escapeAttr(s: string): string {
  if (!NEEDS_WORK.test(s)) return s;
  return stripControls(s).replace(SPECIAL, (c) => ENTITY[c]);
}

export const XML_DECLARATION = '<?xml version="1.0" encoding="utf-8"?>\n';
export const CONTENT_TYPE = 'text/xml; charset=utf-8';

/** The document head: declaration and root start tag. `updated` is whole seconds (RFC 1123, GMT). */
export function weblogUpdatesHead(updated: Date, count: number): string {
  return `${XML_DECLARATION}<weblogUpdates version="2" updated="${updated.toUTCString()}" count="${count}">\n`;
}

export const WEBLOG_UPDATES_FOOT = '</weblogUpdates>\n';

export interface WeblogEntry {
  name: string;
  url: string;
  rssUrl: string | null;
  /** When the ping was received, in milliseconds since the epoch. */
  atMs: number;
}

/**
 * One <weblog/> element. `when` is the number of SECONDS to subtract from the root's `updated` to get the
 * ping's time, as weblogs.com defined it and consumers parse it (the seed's prose says minutes; README).
 */
export function weblogElement(e: WeblogEntry, updatedMs: number): string {
  const when = Math.max(0, Math.floor((updatedMs - e.atMs) / 1000));
  const rss = e.rssUrl ? ` rssUrl="${escapeAttr(e.rssUrl)}"` : '';
  return ` <weblog name="${escapeAttr(e.name)}" url="${escapeAttr(e.url)}"${rss} when="${when}"/>\n`;
}
