// Owns what verification does with a fetched document's bytes, as one pure function run on a worker
// thread (documents.ts): a homepage becomes the feed link it declares, a feed becomes its XML redirect or
// its items compared with what was seen (and whether it names this server as its hub or cloud:
// names-pingd.ts), and what it will publish is cleaned (publishable.ts). Everything
// that costs time in proportion to a stranger's document happens here, so the event loop only copies the
// bytes in and a small result out (at most PUBLISH_LIMIT items and SEEN_LIMIT identities).
import { isMainThread } from 'node:worker_threads';
import { decodeXml } from '../platform/xml/decode.js';
import { lowerThreadPriority } from '../platform/work/thread-priority.js';
import { cleanLine, htmlToText, publishableLink } from '../platform/text/publishable.js';
import { chooseFeed, discoverFeeds } from './discover.js';
import { parseFeed, type FeedHints } from './feed-parser.js';
import { novelty, type FeedItem } from './identity.js';
import { entriesDocument, feedExcerpt, type FeedFormat } from './excerpt.js';
import { namesPingd, type OwnEndpoints } from './names-pingd.js';

export type DocumentTask =
  | { kind: 'page'; body: Uint8Array; contentType: string; url: string }
  | {
      kind: 'feed';
      body: Uint8Array;
      contentType: string;
      url: string;
      seen: string[];
      firstFetch: boolean;
      /** Also cut the document down to its new entries (a WebSub topic with subscribers: excerpt.ts). */
      excerpt?: boolean;
      /** This server's hub and cloud (PUBLIC_URL's; null or absent: unset, nothing names it). */
      own?: OwnEndpoints | null;
    };

/** An item as it is stored and republished: cleaned, its link absolute http(s) or none. */
export interface PublishedItem {
  title: string | null;
  link: string | null;
  guid: string | null;
  published: Date | null;
  summary: string | null;
}

export type DocumentResult =
  | { kind: 'page'; feedUrl: string | null }
  | { kind: 'redirect'; newLocation: string | null }
  | { kind: 'not_a_feed'; reason: string }
  | {
      kind: 'feed';
      title: string | null;
      /** The feed's site as an absolute http(s) URL, or null. */
      siteUrl: string | null;
      hints: FeedHints;
      fresh: number;
      publish: PublishedItem[];
      seen: string[];
      /** It names this server as its WebSub hub or rssCloud cloud (names-pingd.ts). */
      namesPingd: boolean;
      /** The document with only the published entries, when asked and there were new entries after a first fetch. */
      excerpt?: { contentType: string; body: Uint8Array } | null;
    };

// On its worker thread, this work yields the cores to the event loop that answers pings (and to the
// database): measured with the bench's feed-parse case on 2 cores, a 4.8 MB feed read every second
// at the same priority still took intake's p50 from 3 to 40 ms through CPU contention alone.
if (!isMainThread) lowerThreadPriority();

/** Longest title and guid kept; a summary is cut to this many characters of text (as feed-parser.ts cuts). */
const MAX_LINE = 1024;
const MAX_SUMMARY = 4000;

export default function readDocument(task: DocumentTask): DocumentResult {
  const body = Buffer.from(task.body.buffer, task.body.byteOffset, task.body.byteLength);
  if (task.kind === 'page') {
    let html: string;
    try {
      html = decodeXml(body, task.contentType);
    } catch {
      return { kind: 'page', feedUrl: null };
    }
    return { kind: 'page', feedUrl: chooseFeed(discoverFeeds(html, task.url))?.url ?? null };
  }
  const parsed = parseFeed(body, task.contentType);
  if (parsed.kind !== 'feed') return parsed;
  // Identities come from the items as the feed wrote them: cleaning must not make a seen item new.
  const n = novelty(parsed.items, task.seen, task.firstFetch);
  const title = parsed.title === null ? null : cleanLine(parsed.title, MAX_LINE) || null;
  const siteUrl = publishableLink(parsed.siteUrl, task.url);
  const publish = n.publish.map((i) => publishable(i, task.url));
  let excerpt: { contentType: string; body: Uint8Array } | null = null;
  if (task.excerpt && !task.firstFetch && publish.length > 0) {
    const keep = n.freshIndexes.slice(0, publish.length);
    const cut = feedExcerpt(body, task.contentType, parsed.format, keep, parsed.items.length);
    excerpt = cut
      ? { contentType: task.contentType || defaultType(parsed.format), body: cut }
      : entriesDocument(parsed.format, { title, url: task.url, siteUrl }, publish);
  }
  return {
    kind: 'feed',
    title,
    siteUrl,
    hints: parsed.hints,
    fresh: n.fresh.length,
    publish,
    seen: n.seen,
    namesPingd: namesPingd(parsed, task.own ?? null),
    excerpt,
  };
}

/** A feed served without a Content-Type is delivered with its format's own. */
function defaultType(format: FeedFormat): string {
  return format === 'json' ? 'application/feed+json' : format === 'atom' ? 'application/atom+xml' : 'application/rss+xml';
}

/** What we republish of an item: a plain-text title and summary, an http(s) link, a guid without controls. */
export function publishable(i: FeedItem, feedUrl: string): PublishedItem {
  const text = i.summary;
  return {
    title: i.title === null ? null : cleanLine(i.title, MAX_LINE) || null,
    link: publishableLink(i.link, feedUrl),
    guid: i.guid === null ? null : cleanLine(i.guid, MAX_LINE) || null,
    published: i.published,
    summary: text === null ? null : htmlToText(text, MAX_SUMMARY),
  };
}
