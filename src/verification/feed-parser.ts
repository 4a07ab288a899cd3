// Owns reading a fetched body as a feed: bytes decoded by their declared charset, the RSS Feed State
// document's XML redirect recognised (its own example is malformed, `<newLocation>…<newLocation>`, and real
// publishers copy it), then RSS 0.91–2.0, RSS 1.0, Atom 0.3/1.0 or JSON Feed parsed by feedsmith into
// the few fields verification uses: each item's title, link, guid, date and text, the feed's polling
// hints (ttl, skipHours, skipDays, sy:updatePeriod/updateFrequency), and where it says readers subscribe
// (its WebSub hubs and its rssCloud cloud). Pure: bytes in, a value out.
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

/**
 * An rssCloud cloud (RSS 2.0 `<cloud domain port path registerProcedure protocol>`): where readers register
 * to be told the feed changed. `port` is null when the element gives none a number reads.
 */
export interface FeedCloud {
  domain: string;
  port: number | null;
  path: string;
  registerProcedure: string | null;
  protocol: string | null;
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
      /**
       * The WebSub hubs it names (WebSub §4): RSS's and RDF's `<atom:link rel="hub">`, Atom's
       * `<link rel="hub">`, JSON Feed's `hubs[].url` of type WebSub; at most MAX_HUBS, as written.
       */
      hubs: string[];
      /** Its rssCloud cloud: RSS 2.0's `<cloud>`, or a JSON Feed hub of type rssCloud (its URL's parts). */
      cloud: FeedCloud | null;
    }
  | { kind: 'redirect'; newLocation: string | null }
  | { kind: 'not_a_feed'; reason: string };

/** Text fields are cut to this many characters: a feed's item is stored and republished, not archived. */
const MAX_TEXT = 4000;
/**
 * Hubs kept of one feed: a feed names one or two (WordPress's WebSub plugin names its list, two by default);
 * a hub, a cloud field or a rel longer than MAX_ATTR is not one anybody registers at, and is passed over.
 */
export const MAX_HUBS = 8;
const MAX_ATTR = 2048;

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
  cloud?: { domain?: string; port?: number; path?: string; registerProcedure?: string; protocol?: string };
  atom?: { links?: AtomLink[] };
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

interface AtomLink {
  href?: string;
  rel?: string;
}

interface AtomLike {
  title?: AtomText | string;
  links?: AtomLink[];
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
  hubs?: { type?: string; url?: string }[];
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
  return {
    kind: 'feed',
    format,
    title: text(f.title),
    siteUrl: text(f.link),
    items,
    hints,
    hubs: hubLinks(f.atom?.links),
    cloud: rssCloud(f.cloud),
  };
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
  return {
    kind: 'feed',
    format: 'atom',
    title: text(f.title),
    siteUrl: text(site),
    items,
    hints: {},
    hubs: hubLinks(f.links),
    cloud: null,
  };
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
  const hubs: string[] = [];
  let cloud: FeedCloud | null = null;
  for (const h of Array.isArray(f.hubs) ? f.hubs : []) {
    const url = attr(h?.url);
    const type = attr(h?.type)?.toLowerCase();
    if (url === null) continue;
    if (type === 'rsscloud') cloud ??= cloudOfUrl(url);
    else if ((type === undefined || type === 'websub') && hubs.length < MAX_HUBS) hubs.push(url);
  }
  return { kind: 'feed', format: 'json', title: text(f.title), siteUrl: text(f.home_page_url), items, hints: {}, hubs, cloud };
}

/** An attribute's text, trimmed: null when empty, not text, or longer than MAX_ATTR. */
function attr(v: unknown): string | null {
  if (typeof v !== 'string') return null;
  const t = v.trim();
  return t && t.length <= MAX_ATTR ? t : null;
}

/** IANA's IRI form of the registered relation `hub` (RFC 4287 §4.2.7.2: the same relation). */
const HUB_IRI = 'http://www.iana.org/assignments/relation/hub';

/** The hrefs of the links whose rel is `hub` (any case; among others, space-separated, as in RFC 8288). */
export function hubLinks(links: AtomLink[] | undefined): string[] {
  const out: string[] = [];
  for (const l of Array.isArray(links) ? links : []) {
    if (out.length >= MAX_HUBS) break;
    const rel = attr(l?.rel);
    const href = attr(l?.href);
    if (rel === null || href === null) continue;
    // A character class repeated once per run of spaces: linear, nothing to backtrack.
    if (
      rel
        .toLowerCase()
        .split(/[\t\n\r ]+/)
        .some((r) => r === 'hub' || r === HUB_IRI)
    )
      out.push(href);
  }
  return out;
}

function rssCloud(c: RssLike['cloud']): FeedCloud | null {
  const domain = attr(c?.domain);
  const path = attr(c?.path);
  if (!c || domain === null || path === null) return null;
  const port = typeof c.port === 'number' && Number.isInteger(c.port) && c.port > 0 && c.port <= 65535 ? c.port : null;
  return { domain, port, path, registerProcedure: attr(c.registerProcedure), protocol: attr(c.protocol) };
}

/** A cloud named by URL (a JSON Feed hub of type rssCloud): its host, port and path; https is https-post. */
function cloudOfUrl(raw: string): FeedCloud | null {
  if (!URL.canParse(raw)) return null;
  const u = new URL(raw);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  const https = u.protocol === 'https:';
  return {
    domain: u.hostname,
    port: u.port ? Number(u.port) : https ? 443 : 80,
    path: u.pathname,
    registerProcedure: null,
    protocol: https ? 'https-post' : 'http-post',
  };
}
