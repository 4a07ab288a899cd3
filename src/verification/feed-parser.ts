// Owns reading a fetched body as a feed: bytes decoded by their declared charset, the RSS Feed State
// document's XML redirect recognised (its own example is malformed, `<newLocation>…<newLocation>`, and real
// publishers copy it), then RSS 0.91–2.0, RSS 1.0, Atom 0.3/1.0 or JSON Feed parsed by feedsmith into
// the few fields verification uses: each item's title, link, guid, date and text, and the feed's polling
// hints (ttl, skipHours, skipDays, sy:updatePeriod/updateFrequency). Pure: bytes in, a value out.
// Why feedsmith: bench/results/evidence/2026-11-22-feed-parser.md.
import { parseFeed as feedsmith } from 'feedsmith';
import { decodeXml } from '../platform/xml/decode.js';
import type { FeedItem } from './identity.js';

/** The feed's own polling hints (RSS 2.0 ttl/skipHours/skipDays, RSS 1.0's syndication module). */
export interface FeedHints {
  ttl?: number;
  skipHours?: number[];
  skipDays?: string[];
  updatePeriod?: string;
  updateFrequency?: number;
}

export type Parsed =
  | {
      kind: 'feed';
      format: 'rss' | 'rdf' | 'atom' | 'json';
      title: string | null;
      /** The site the feed belongs to: RSS <link>, Atom's alternate link, JSON Feed's home_page_url. */
      siteUrl: string | null;
      items: FeedItem[];
      hints: FeedHints;
    }
  | { kind: 'redirect'; newLocation: string | null }
  | { kind: 'not_a_feed'; reason: string };

/** Text fields are cut to this many characters: a feed's item is stored and republished, not archived. */
const MAX_TEXT = 4000;

// Everything below reads text a stranger wrote (anyone can ping with a feed URL they control), so every scan
// is linear in the text: indexOf from a position that only moves forward, never a regex that can backtrack
// over the document. REGRESSION: the redirect pattern `(?:<!--[\s\S]*?-->\s*)*` was exponential in
// leading comments (28 `<!---->` before `<rss>`, 368 bytes, held the event loop for 11.5 s).

/** Where the document element starts: after whitespace, processing instructions and comments; -1 if never. */
function documentElementAt(text: string): number {
  let i = 0;
  for (;;) {
    while (i < text.length && isSpace(text.charCodeAt(i))) i++;
    if (text.startsWith('<?', i)) {
      const end = text.indexOf('?>', i + 2);
      if (end < 0) return -1;
      i = end + 2;
    } else if (text.startsWith('<!--', i)) {
      const end = text.indexOf('-->', i + 4);
      if (end < 0) return -1;
      i = end + 3;
    } else return text.charCodeAt(i) === 0x3c ? i : -1;
  }
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

/** Whether an element named `name` (ASCII, any case) starts at `i` (`<name` then a space, `>` or `/`). */
function tagAt(text: string, i: number, name: string): boolean {
  if (text.charCodeAt(i) !== 0x3c || text.slice(i + 1, i + 1 + name.length).toLowerCase() !== name.toLowerCase()) return false;
  const next = text.charCodeAt(i + 1 + name.length);
  return isSpace(next) || next === 0x3e || next === 0x2f;
}

/** The first start tag named `name` at or after `from` (any case): where its content starts, or -1. */
function contentOf(text: string, name: string, from: number): number {
  // A literal pattern (nothing to backtrack), resumed from where the last candidate was: one pass in all.
  const open = new RegExp(`<${name}`, 'gi');
  open.lastIndex = from;
  for (let m = open.exec(text); m; m = open.exec(text)) {
    if (!tagAt(text, m.index, name)) continue;
    const close = text.indexOf('>', m.index);
    return close < 0 ? -1 : close + 1;
  }
  return -1;
}

/** A redirect document is a few lines: its newLocation is looked for this far, no further. */
const REDIRECT_SCAN = 64 * 1024;

/** The XML redirect: `<redirect><newLocation>URL</newLocation></redirect>`, or an empty one (gone). */
export function xmlRedirect(text: string): { newLocation: string | null } | undefined {
  const root = documentElementAt(text);
  if (root < 0 || !tagAt(text, root, 'redirect')) return undefined;
  const head = text.slice(root, root + REDIRECT_SCAN);
  // The specification's own example closes newLocation with a second <newLocation>: the URL is the text up
  // to the next `<`, whatever tag that starts. `<newLocation/>` is an empty one.
  const at = contentOf(head, 'newLocation', 0);
  if (at < 0 || head[at - 2] === '/') return { newLocation: null };
  const end = head.indexOf('<', at);
  const loc = head.slice(at, end < 0 ? head.length : end).trim();
  return { newLocation: loc ? loc.replace(/&amp;/g, '&') : null };
}

export function parseFeed(body: Buffer, contentType?: string): Parsed {
  let text: string;
  try {
    text = decodeXml(body, contentType);
  } catch (err) {
    return { kind: 'not_a_feed', reason: (err as Error).message };
  }
  const redirect = xmlRedirect(text);
  if (redirect) return { kind: 'redirect', ...redirect };
  let input: string | object = text;
  if (/^\s*\{/.test(text)) {
    try {
      input = JSON.parse(text) as object;
    } catch {
      return { kind: 'not_a_feed', reason: 'the body starts like JSON but does not parse' };
    }
  }
  let r: ReturnType<typeof feedsmith>;
  try {
    r = feedsmith(input);
  } catch (err) {
    return { kind: 'not_a_feed', reason: (err as Error).message };
  }
  switch (r.format) {
    case 'rss':
    case 'rdf':
      return rssLike(r.format, r.feed as RssLike, text);
    case 'atom':
      return atom(r.feed as AtomLike);
    case 'json':
      return json(r.feed as JsonLike);
    default:
      return { kind: 'not_a_feed', reason: 'unrecognised feed format' };
  }
}

// The shapes below are the parts of feedsmith's RssFeed / RdfFeed / AtomFeed / JsonFeed read here.
interface RssLike {
  title?: string;
  link?: string;
  ttl?: number;
  skipHours?: number[];
  skipDays?: string[];
  sy?: { updatePeriod?: string; updateFrequency?: number };
  items?: {
    title?: string;
    link?: string;
    description?: string;
    pubDate?: string;
    guid?: { value?: string } | string;
    content?: { encoded?: string };
    rdf?: { about?: string };
    dc?: { dates?: string[]; date?: string };
  }[];
}

interface AtomText {
  value?: string;
}

interface AtomLike {
  title?: AtomText | string;
  links?: { href?: string; rel?: string }[];
  entries?: {
    id?: string;
    title?: AtomText | string;
    links?: { href?: string; rel?: string }[];
    published?: string;
    updated?: string;
    summary?: AtomText | string;
    content?: AtomText | string;
  }[];
}

interface JsonLike {
  title?: string;
  home_page_url?: string;
  items?: {
    id?: string | number;
    url?: string;
    title?: string;
    date_published?: string;
    date_modified?: string;
    summary?: string;
    content_html?: string;
    content_text?: string;
  }[];
}

function text(v: AtomText | string | undefined | null): string | null {
  const s = typeof v === 'string' ? v : v?.value;
  if (s === undefined || s === null) return null;
  const t = String(s).trim();
  return t ? t.slice(0, MAX_TEXT) : null;
}

function date(v: string | undefined): Date | null {
  if (!v) return null;
  const d = new Date(v);
  return Number.isFinite(d.getTime()) ? d : null;
}

// feedsmith 3.0.1 drops a <skipHours> or <skipDays> holding a single <hour>/<day> (two or more parse):
// those two hints are read from the channel's text when it returned none. REGRESSION: this was a regex
// `<skipHours\b[^>]*>`, which scanned to the end of the text from every `<skipHours` without a `>`
// (quadratic: 200 KB of them held the event loop for seconds); now one forward scan.
const HINT_BLOCK = 2000;

export function listHint(xml: string, outer: 'skipHours' | 'skipDays', inner: 'hour' | 'day'): string[] {
  const start = contentOf(xml, outer, 0);
  if (start < 0) return [];
  const window = xml.slice(start, start + HINT_BLOCK + outer.length + 3);
  const end = window.indexOf(`</${outer}>`);
  if (end < 0) return [];
  // A block of at most 2000 characters: a regex over it is bounded.
  return [...window.slice(0, end).matchAll(new RegExp(`<${inner}\\b[^>]*>\\s*([^<]{1,20}?)\\s*</${inner}>`, 'g'))]
    .map((m) => m[1])
    .slice(0, 24);
}

function rssLike(format: 'rss' | 'rdf', f: RssLike, xml: string): Parsed {
  const items = (f.items ?? []).map((i): FeedItem => ({
    title: text(i.title),
    link: text(i.link),
    guid: text(typeof i.guid === 'string' ? i.guid : i.guid?.value) ?? text(i.rdf?.about),
    published: date(i.pubDate ?? i.dc?.dates?.[0] ?? i.dc?.date),
    summary: text(i.description),
    content: text(i.content?.encoded),
  }));
  const hints: FeedHints = {};
  if (typeof f.ttl === 'number') hints.ttl = f.ttl;
  const skipHours = f.skipHours?.length
    ? f.skipHours
    : listHint(xml, 'skipHours', 'hour')
        .map(Number)
        .filter((h) => Number.isInteger(h) && h >= 0 && h <= 24);
  const skipDays = f.skipDays?.length ? f.skipDays : listHint(xml, 'skipDays', 'day');
  if (skipHours.length) hints.skipHours = skipHours;
  if (skipDays.length) hints.skipDays = skipDays;
  if (f.sy?.updatePeriod) hints.updatePeriod = f.sy.updatePeriod;
  if (typeof f.sy?.updateFrequency === 'number') hints.updateFrequency = f.sy.updateFrequency;
  return { kind: 'feed', format, title: text(f.title), siteUrl: text(f.link), items, hints };
}

function atom(f: AtomLike): Parsed {
  const items = (f.entries ?? []).map((e): FeedItem => {
    const link = e.links?.find((l) => !l.rel || l.rel === 'alternate')?.href ?? null;
    return {
      title: text(e.title),
      link: text(link ?? undefined),
      guid: text(e.id),
      published: date(e.published ?? e.updated),
      summary: text(e.summary),
      content: text(e.content),
    };
  });
  const site = f.links?.find((l) => !l.rel || l.rel === 'alternate')?.href;
  return { kind: 'feed', format: 'atom', title: text(f.title), siteUrl: text(site), items, hints: {} };
}

function json(f: JsonLike): Parsed {
  const items = (f.items ?? []).map((i): FeedItem => ({
    title: text(i.title),
    link: text(i.url),
    guid: i.id === undefined ? null : text(String(i.id)),
    published: date(i.date_published ?? i.date_modified),
    summary: text(i.summary),
    content: text(i.content_html ?? i.content_text),
  }));
  return { kind: 'feed', format: 'json', title: text(f.title), siteUrl: text(f.home_page_url), items, hints: {} };
}
