// Owns feed autodiscovery: the feed links a weblog's homepage declares in its HTML head
// (`<link rel="alternate" type="application/rss+xml|application/atom+xml|application/feed+json" href>`),
// in document order, resolved against the page (and its <base href>). Pure: text in, URLs out.
//
// A scan of <link>/<base> start tags rather than an HTML parser: only these two elements' attributes are
// needed, and the head ends where the body starts, so a DOM would be built for nothing.
import { decodeHtmlReferences } from '../intake/ping/validate.js';

export type FeedLinkType = 'rss' | 'atom' | 'json';

export interface FeedLink {
  url: string;
  type: FeedLinkType;
  title?: string;
}

const TYPES: Record<string, FeedLinkType> = {
  'application/rss+xml': 'rss',
  'application/rdf+xml': 'rss',
  'application/atom+xml': 'atom',
  'application/feed+json': 'json',
  'application/json': 'json',
};

const TAG = /<(link|base|body)\b([^>]*)>/gi;
const ATTR = /([^\s"'=<>/]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?/g;

function attributes(raw: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of raw.matchAll(ATTR)) {
    const name = m[1].toLowerCase();
    if (!out.has(name)) out.set(name, decodeHtmlReferences(m[2] ?? m[3] ?? m[4] ?? ''));
  }
  return out;
}

/** Every feed link of the page's head, in document order (links after <body> starts do not count). */
export function discoverFeeds(html: string, pageUrl: string): FeedLink[] {
  // Comments could hold a commented-out link: drop them first.
  const text = html.replace(/<!--[\s\S]*?-->/g, '');
  let base = pageUrl;
  const out: FeedLink[] = [];
  for (const m of text.matchAll(TAG)) {
    const tag = m[1].toLowerCase();
    if (tag === 'body') break;
    const attrs = attributes(m[2]);
    if (tag === 'base') {
      const href = attrs.get('href');
      if (href && URL.canParse(href, pageUrl)) base = new URL(href, pageUrl).href;
      continue;
    }
    const rel = (attrs.get('rel') ?? '').toLowerCase().split(/\s+/);
    if (!rel.includes('alternate')) continue;
    const type = TYPES[(attrs.get('type') ?? '').trim().toLowerCase().split(';')[0]];
    const href = attrs.get('href')?.trim();
    if (!type || !href || !URL.canParse(href, base)) continue;
    const url = new URL(href, base);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') continue;
    url.hash = '';
    const title = attrs.get('title');
    out.push({ url: url.href, type, ...(title ? { title } : {}) });
  }
  return out;
}

/** The feed verification follows: the first RSS or Atom link (both parse as XML feeds); else none. */
export function chooseFeed(links: readonly FeedLink[]): FeedLink | undefined {
  return links.find((l) => l.type === 'rss' || l.type === 'atom');
}
