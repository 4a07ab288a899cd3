// Owns feed autodiscovery: the feed links a weblog's homepage declares in its HTML head
// (`<link rel="alternate" type="application/rss+xml|application/atom+xml|application/feed+json" href>`),
// in document order, resolved against the page (and its <base href>). Pure: text in, URLs out.
//
// Read with an HTML tokenizer (html-tokens.ts: linear in the page, comments and character references as a
// browser reads them) rather than patterns over the text: the regexes this replaced were quadratic on a
// stranger's page (every `<!--` without `-->`, every `<link ` without `>` scanned to the end: 200 KB held
// the event loop for 4–6 s). No DOM is built: only these two elements' attributes are needed, and the head
// ends where the body starts, so reading stops there.
import { scanHtml } from '../platform/text/html-tokens.js';

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

/** Every feed link of the page's head, in document order (links after <body> starts do not count). */
export function discoverFeeds(html: string, pageUrl: string): FeedLink[] {
  let base = pageUrl;
  const out: FeedLink[] = [];
  scanHtml(html, {
    startTag(tag, attrs) {
      if (tag === 'body') return true;
      if (tag === 'base') {
        const href = attrs.get('href');
        if (href && URL.canParse(href, pageUrl)) base = new URL(href, pageUrl).href;
        return;
      }
      if (tag !== 'link') return;
      const rel = (attrs.get('rel') ?? '').toLowerCase().split(/\s+/);
      if (!rel.includes('alternate')) return;
      const type = TYPES[(attrs.get('type') ?? '').trim().toLowerCase().split(';')[0]];
      const href = attrs.get('href')?.trim();
      if (!type || !href || !URL.canParse(href, base)) return;
      const url = new URL(href, base);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') return;
      url.hash = '';
      const title = attrs.get('title');
      out.push({ url: url.href, type, ...(title ? { title } : {}) });
    },
  });
  return out;
}

/** The feed verification follows: the first RSS or Atom link (both parse as XML feeds); else none. */
export function chooseFeed(links: readonly FeedLink[]): FeedLink | undefined {
  return links.find((l) => l.type === 'rss' || l.type === 'atom');
}
