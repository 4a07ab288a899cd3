// Owns the bytes of the weblogUpdates format (the weblogUpdates specification, "Retrieving Pings"): the root
// element and one <weblog/> element per ping, kept well-formed whatever was pinged by escapeAttr.
// Hand-written template strings on purpose, not a builder library: measured on 100k <weblog/> elements
// (10 MB, Node 20, medians of four runs on a busy 2-core machine), these templates took 0.16-0.30 s,
// xmlbuilder2 1.7-3.4 s building a tree and 2.5-4.1 s through its streaming callback writer: 7-18x slower
// (typically 10-15x), and changes.xml and the archives run to 1M entries. The small documents (rss_ping
// replies, /updates.xml) use xmlbuilder2.
import { escapeAttr } from '../../platform/xml/escape.js';

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
 * ping's time, as weblogs.com defined it and consumers parse it (the specification's prose says minutes;
 * docs/reference/documents.md).
 */
export function weblogElement(e: WeblogEntry, updatedMs: number): string {
  return weblogElementFrom(weblogStart(e), e.atMs, updatedMs);
}

/**
 * The part of a <weblog/> element that does not depend on when the document is rendered (escaped once and
 * kept by the live documents' window cache); weblogElementFrom completes it.
 */
export function weblogStart(e: Pick<WeblogEntry, 'name' | 'url' | 'rssUrl'>): string {
  const rss = e.rssUrl ? ` rssUrl="${escapeAttr(e.rssUrl)}"` : '';
  return ` <weblog name="${escapeAttr(e.name)}" url="${escapeAttr(e.url)}"${rss}`;
}

export function weblogElementFrom(start: string, atMs: number, updatedMs: number): string {
  const when = Math.max(0, Math.floor((updatedMs - atMs) / 1000));
  return `${start} when="${when}"/>\n`;
}
