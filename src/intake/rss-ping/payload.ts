// Owns understanding an rss_ping payload (RSS Ping, "Payload"): a single-item RSS 2.0 or RSS 1.0 feed, an
// RSS item or an Atom 1.0/0.3 entry (or a one-entry Atom feed), from which the headline and the item's URI
// are extracted. RSS Ping's minimum is enforced: "a title or description or content or summary and a
// link or guid or permalink"; names are matched by local name, so namespace prefixes do not matter.
import { XMLParser } from 'fast-xml-parser';
import { RssPingError } from './parse.js';
import { decodeHtmlReferences } from '../ping/validate.js';
import { stripControls } from '../../platform/xml/escape.js';
import { publishableLink } from '../../platform/text/publishable.js';
import { UNTRUSTED_XML } from '../../platform/xml/parser-options.js';
import { MAX_DEPTH, refusal } from './prescan.js';
import { validatedLongText } from './long-text.js';

export const MAX_TITLE_LENGTH = 512;
export const MAX_SUMMARY_LENGTH = 1000;
export const MAX_URI_LENGTH = 2048;

export type PayloadFormat = 'rss-feed' | 'rdf-feed' | 'atom-feed' | 'rss-item' | 'atom-entry' | 'other';

export interface PayloadItem {
  format: PayloadFormat;
  /** What to show: the title, else the start of the description/summary/content (plain text). */
  headline: string;
  /** The item's http(s) link, if it has one. */
  link: string | null;
  /** Its identifier: guid, permalink, atom:id or rdf:about (may be a URN). */
  guid: string | null;
  /** link, else guid: what identifies the item. */
  uri: string;
  /** Plain-text description or summary (never tokenized content). */
  summary: string | null;
  /** The payload holds `content type="tokenized"` (for indexing, not for display). */
  tokenized: boolean;
}

const parser = new XMLParser({
  ...UNTRUSTED_XML,
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  trimValues: true,
  alwaysCreateTextNode: true,
  // The payload is parsed inside a <payload> wrapper that stands for the rss_ping's own <payload> (depth 2):
  // an element with more than maxNestedTags open ancestors is refused, so the rss_ping's MAX_DEPTH holds.
  maxNestedTags: MAX_DEPTH - 2,
  // Every element is a list: uniform access, and repeated elements (Atom links) are never collapsed.
  isArray: (_name, _jpath, _leaf, isAttribute) => !isAttribute,
  // No path string built for every tag and text: isArray does not read it.
  jPath: false,
});

type El = { '#text'?: string; [k: string]: unknown };

const local = (name: string) => name.slice(name.indexOf(':') + 1);
const prefixOf = (name: string) => (name.includes(':') ? name.slice(0, name.indexOf(':')) : '');

function elementNames(el: El): string[] {
  return Object.keys(el).filter((k) => k !== '#text' && !k.startsWith('@_'));
}

/** Child elements with a local name, unprefixed (default namespace) ones first. */
function children(el: El, localName: string, prefixes?: string[]): El[] {
  const names = elementNames(el).filter(
    (n) => local(n).toLowerCase() === localName.toLowerCase() && (!prefixes || prefixes.includes(prefixOf(n))),
  );
  names.sort((a, b) => Number(a.includes(':')) - Number(b.includes(':')));
  return names.flatMap((n) => el[n] as El[]);
}

function attr(el: El, name: string): string | undefined {
  const direct = el[`@_${name}`];
  if (typeof direct === 'string') return direct;
  const k = Object.keys(el).find((x) => x.startsWith('@_') && local(x.slice(2)) === name);
  return k ? String(el[k]) : undefined;
}

/** All text inside an element, descendants included (Atom xhtml content is a tree). */
function deepText(el: El): string {
  let s = typeof el['#text'] === 'string' ? el['#text'] : '';
  for (const n of elementNames(el)) for (const c of el[n] as El[]) s += ' ' + deepText(c);
  return s;
}

function clean(s: string, max: number): string {
  const t = stripControls(s).replace(/\s+/g, ' ').trim();
  if (t.length <= max) return t;
  // Code points of the first 2 × max + 2 UTF-16 units only (more than max of them if t has more): spreading
  // a whole 256 KiB description cost more than parsing it.
  const cps = [...t.slice(0, 2 * max + 2)];
  return cps.length > max
    ? cps
        .slice(0, max - 1)
        .join('')
        .trimEnd() + '…'
    : t;
}

/** Plain text of a text construct: HTML-typed content (Atom type=html, mode=escaped, RSS description) has its tags removed. */
function plainText(el: El, html: boolean, max: number): string {
  const type = (attr(el, 'type') ?? '').toLowerCase();
  const isHtml = html || type === 'html' || type === 'text/html' || attr(el, 'mode') === 'escaped';
  let t = deepText(el);
  // [^<>], not [^>]: with the latter every "<" without a ">" scans to the end (quadratic: 60,000 "&lt;" in a
  // description took 2 s of event loop).
  if (isHtml) t = t.replace(/<!\[CDATA\[|\]\]>/g, '').replace(/<[^<>]*>/g, ' ');
  return clean(decodeHtmlReferences(t), max);
}

function firstText(els: El[], html: boolean, max: number): string | null {
  for (const e of els) {
    const t = plainText(e, html, max);
    if (t !== '') return t;
  }
  return null;
}

/** An identifier as sent: trimmed, no whitespace or control characters inside, bounded. */
function identifier(s: string | undefined): string | null {
  if (s == null) return null;
  const t = s.trim();
  if (t === '' || t.length > MAX_URI_LENGTH || /[\s\u0000-\u001f\u007f]/.test(t)) return null;
  return t;
}

/**
 * An http(s) link, relative ones resolved against the site (lenient: some generators write "/2005/07/post"),
 * as pingd republishes links (publishable.ts); whitespace or controls inside refuse it first.
 */
function httpLink(s: string | undefined, base: string | null): string | null {
  const t = identifier(s);
  return t ? publishableLink(t, base ?? undefined) : null;
}

/** Finds the single item in the payload's root element. */
function locateItem(root: El, rootName: string): { item: El; format: PayloadFormat } {
  const one = (items: El[], what: string, format: PayloadFormat) => {
    if (items.length !== 1) throw new RssPingError(`The payload feed must hold exactly one ${what}, not ${items.length}.`);
    return { item: items[0], format };
  };
  switch (local(rootName).toLowerCase()) {
    case 'rss': {
      const channel = children(root, 'channel')[0];
      return one(channel ? children(channel, 'item') : [], 'item', 'rss-feed');
    }
    case 'rdf': {
      // RSS 1.0 and 0.90 put items beside the channel; be lenient about 0.91-style items inside it.
      const items = children(root, 'item');
      const channel = children(root, 'channel')[0];
      return one(items.length ? items : channel ? children(channel, 'item') : [], 'item', 'rdf-feed');
    }
    case 'feed':
      return one(children(root, 'entry'), 'entry', 'atom-feed');
    case 'channel':
      return one(children(root, 'item'), 'item', 'rss-feed');
    case 'item':
      return { item: root, format: 'rss-item' };
    case 'entry':
      return { item: root, format: 'atom-entry' };
    default:
      // RSS Ping: "exact element names can vary as long as they are semantically equivalent".
      return { item: root, format: 'other' };
  }
}

/**
 * Parses and checks a payload (its text as decoded from the request). `siteUrl` resolves relative links.
 * Throws RssPingError (400) for a payload that is not well-formed or lacks a headline or a URI.
 */
export function extractPayload(text: string, siteUrl: string | null, payloadType: string | null = null): PayloadItem {
  if (text.includes('\u0000')) throw new RssPingError('The payload contains NUL characters.');
  // RSS Ping's examples put an XML declaration inside <payload>: drop it (and a BOM) before parsing.
  const body = text.replace(/^\uFEFF/, '').replace(/^\s*<\?xml[^>]*\?>/, '');
  if (body.trim() === '')
    throw new RssPingError('The <payload> is empty: it must hold a feed with one item, an RSS item or an Atom entry.');
  const wrapped = `<payload>${body}</payload>`;
  const valid = validatedLongText(wrapped);
  // The validator's message can quote the whole open-tag stack (as long as the payload): bound it.
  if (typeof valid !== 'string')
    throw new RssPingError(`The payload is not well-formed XML (${valid.msg.slice(0, 200)}, line ${valid.line}).`);
  let doc: { payload?: El[] };
  try {
    doc = parser.parse(valid) as { payload?: El[] };
  } catch (err) {
    const m = (err as Error).message;
    throw new RssPingError(
      /nested/i.test(m) ? refusal.nestedTooDeep('payload') : `The payload is not well-formed XML (${m.slice(0, 200)}).`,
    );
  }
  const wrapper = doc.payload?.[0] ?? {};
  const roots = elementNames(wrapper).flatMap((n) => (wrapper[n] as El[]).map((el) => ({ name: n, el })));
  if (roots.length !== 1) {
    throw new RssPingError(
      `The payload must hold exactly one element (a feed with one item, an RSS item or an Atom entry), not ${roots.length}.`,
    );
  }
  const { item, format } = locateItem(roots[0].el, roots[0].name);

  const contents = children(item, 'content');
  // `content type="tokenized"` (RSS Ping, "Notes"), or a payload whose type says tokenized: for indexing only.
  const payloadTokenized = /\btokenized\b/i.test(payloadType ?? '');
  const isTokenized = (e: El) => payloadTokenized || (attr(e, 'type') ?? '').trim().toLowerCase() === 'tokenized';
  const tokenized = contents.some(isTokenized);
  const displayable = contents.filter((e) => !isTokenized(e));

  const title = firstText(children(item, 'title'), false, MAX_TITLE_LENGTH);
  const summary =
    firstText(children(item, 'description'), true, MAX_SUMMARY_LENGTH) ??
    firstText(children(item, 'summary'), false, MAX_SUMMARY_LENGTH) ??
    firstText(children(item, 'encoded', ['content']), true, MAX_SUMMARY_LENGTH) ??
    firstText(displayable, false, MAX_SUMMARY_LENGTH);
  // Tokenized content satisfies RSS Ping's minimum (it is "content") but is never shown.
  const hasTokenizedText = contents.some((e) => isTokenized(e) && deepText(e).trim() !== '');
  if (!title && !summary && !hasTokenizedText) {
    throw new RssPingError('The payload has no headline: the item needs a title, description, content or summary.');
  }

  // RSS <link>text</link>; Atom <link href rel="alternate"/> (no rel means alternate).
  let link: string | null = null;
  for (const l of children(item, 'link')) {
    const href = attr(l, 'href');
    if (href === undefined) {
      link = httpLink(deepText(l), siteUrl);
    } else {
      const rel = (attr(l, 'rel') ?? 'alternate').toLowerCase();
      if (rel === 'alternate') link = httpLink(href, siteUrl);
    }
    if (link) break;
  }
  if (!link) for (const l of children(item, 'link')) if ((link = httpLink(attr(l, 'href'), siteUrl))) break;
  const guidEl = children(item, 'guid')[0];
  const guid = guidEl ? identifier(deepText(guidEl)) : null;
  const permalink =
    identifier(children(item, 'permalink').map(deepText)[0]) ?? identifier(attr(children(item, 'permalink')[0] ?? {}, 'href'));
  const id = identifier(children(item, 'id').map(deepText)[0]);
  const about = identifier(attr(item, 'about'));
  // A permalink guid (the RSS 2.0 default) is a link too.
  if (!link && guidEl && (attr(guidEl, 'isPermaLink') ?? 'true').trim().toLowerCase() !== 'false') link = httpLink(guid ?? undefined, null);
  if (!link && permalink) link = httpLink(permalink, siteUrl);
  const ident = guid ?? permalink ?? id ?? about;
  const uri = link ?? ident;
  if (!uri) throw new RssPingError('The payload has no URI: the item needs an http(s) link, a guid, a permalink or an id.');

  const headline = title ?? (summary ? clean(summary, 200) : uri);
  return { format, headline, link, guid: ident ?? link, uri, summary, tokenized };
}
