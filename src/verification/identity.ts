// Owns what makes a feed item "new": each item's identity (its guid or id, else its link, else a hash of
// its title and content, never its date: a feed that stamps a fresh date on every request has nothing new),
// the bounded memory of identities seen per feed, and which items a fetch publishes. Pure.
//
// "Sending only the items a client has not seen yet" is the point of the feed-delta document: a ping
// server that republished every item of every fetched feed would be the noise it was written against.
import { createHash } from 'node:crypto';

export interface FeedItem {
  title: string | null;
  link: string | null;
  guid: string | null;
  published: Date | null;
  summary: string | null;
  content: string | null;
}

/** Identities remembered per feed (newest first); older ones are forgotten. */
export const SEEN_LIMIT = 500;
/** Most items one fetch publishes (a feed that suddenly lists thousands of "new" items floods nobody). */
export const PUBLISH_LIMIT = 50;

/** A short, fixed-size identity: the stored set stays small whatever the guids look like. */
export function itemKey(item: FeedItem): string {
  const basis = item.guid?.trim()
    ? `g:${item.guid.trim()}`
    : item.link?.trim()
      ? `l:${item.link.trim()}`
      : `h:${item.title ?? ''}\u0000${item.content ?? item.summary ?? ''}`;
  return createHash('sha256').update(basis).digest('base64url').slice(0, 22);
}

export interface Novelty {
  /** Items whose identity was not seen before, in feed order. */
  fresh: FeedItem[];
  /** Where each fresh item is in `items` (the excerpt a WebSub subscriber receives keeps these). */
  freshIndexes: number[];
  /** What to publish: the fresh items (at most PUBLISH_LIMIT); on a first fetch only the newest item. */
  publish: FeedItem[];
  /** The identities to remember from now on, newest first, bounded. */
  seen: string[];
  firstFetch: boolean;
}

/**
 * Compares a fetch's items with what was seen. The first successful fetch of a feed has nothing to compare
 * with: every item is "new", but publishing a whole back catalogue would be noise, so it publishes only
 * the newest item (by date, else the first in document order) — the post the ping most likely announced.
 */
export function novelty(items: readonly FeedItem[], seen: readonly string[], firstFetch: boolean): Novelty {
  const known = new Set(seen);
  const fresh: FeedItem[] = [];
  const freshIndexes: number[] = [];
  const keys: string[] = [];
  const inFetch = new Set<string>();
  items.forEach((item, i) => {
    const k = itemKey(item);
    if (inFetch.has(k)) return;
    inFetch.add(k);
    keys.push(k);
    if (!known.has(k)) {
      fresh.push(item);
      freshIndexes.push(i);
    }
  });
  const merged = [...keys, ...seen.filter((k) => !inFetch.has(k))].slice(0, SEEN_LIMIT);
  const publish = firstFetch ? newest(fresh) : fresh.slice(0, PUBLISH_LIMIT);
  return { fresh, freshIndexes, publish, seen: merged, firstFetch };
}

function newest(items: FeedItem[]): FeedItem[] {
  if (items.length === 0) return [];
  let best = items[0];
  for (const i of items) if (i.published && (!best.published || i.published > best.published)) best = i;
  return [best];
}
