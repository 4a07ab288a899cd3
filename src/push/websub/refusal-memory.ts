// Owns this instance's short memory of the hub's refusals, so that a flood is refused without the database:
// once a callback host, a client, a topic's host or the whole hub has been refused FLOOD_REFUSALS times for
// the same reason within WINDOW_MS, its further requests of that kind get the same answer from memory until
// the window ends. A subscriber asking a few times is always answered from the database's facts (a renewal
// of a pair it has passes a full host, a request folded into one already waiting passes a host's pending
// bound); a flood pays one statement per refusal FLOOD_REFUSALS times a second, not one per request (issue
// 43: 10,000 unknown unsubscribes cost the embedded database ~3 ms of CPU each).
//
// Unsubscribes of pairs the hub does not have are counted per client the same way, but past the bound the
// answer is a 429, not the 422 "nothing to unsubscribe": memory does not know whether the next one is real.
import { LRUCache } from 'lru-cache';
import type { Refusal } from './refusals.js';

export const WINDOW_MS = 1000;
export const FLOOD_REFUSALS = 10;

/** What a request is, as far as the bounds look at it. */
export interface Asking {
  mode: 'subscribe' | 'unsubscribe';
  /** A verification of intent (not a denial: a denial only answers the subscriber). */
  verify: boolean;
  callbackHost: string;
  /** The client's key (an address, or an IPv6 /64). */
  client: string;
  /** A feed topic's host; null for the hub's own documents. */
  topicHost: string | null;
}

/** The refusals memory may repeat, in the order queueIntent's verdict tries them, and what each is keyed by. */
const ORDER: readonly [Refusal, (a: Asking) => string | null][] = [
  ['host_pending', (a) => a.callbackHost],
  ['client_pending', (a) => a.client],
  ['host_full', (a) => (adds(a) ? a.callbackHost : null)],
  ['full', (a) => (adds(a) ? '' : null)],
  ['host_topics', (a) => (adds(a) && a.topicHost !== null ? a.callbackHost : null)],
  ['topic_host_full', (a) => (adds(a) ? a.topicHost : null)],
  ['topics_full', (a) => (adds(a) && a.topicHost !== null ? '' : null)],
  ['unknown_unsubscribes', (a) => (a.mode === 'unsubscribe' ? a.client : null)],
];

/** Only a subscribe that is verified can add a subscription: the room bounds apply to it alone. */
const adds = (a: Asking) => a.verify && a.mode === 'subscribe';

/** A 422 counts towards the client's 429: the refusal the database gave, and the one memory gives. */
const remembered = (r: Refusal): Refusal => (r === 'not_subscribed' ? 'unknown_unsubscribes' : r);

export class RefusalMemory {
  private readonly counts: LRUCache<string, { n: number }>;

  constructor(
    private readonly floodRefusals = FLOOD_REFUSALS,
    windowMs = WINDOW_MS,
  ) {
    // A window starts at a key's first refusal and is not extended by later ones (noUpdateTTL).
    this.counts = new LRUCache({ max: 10_000, ttl: windowMs, noUpdateTTL: true, ttlAutopurge: false });
  }

  /** The refusal to answer from memory, or null: ask the database. */
  recall(a: Asking): Refusal | null {
    for (const [r, key] of ORDER) {
      const k = key(a);
      if (k === null) continue;
      const c = this.counts.get(`${r} ${k}`);
      if (c && c.n >= this.floodRefusals) return r;
    }
    return null;
  }

  /** The database refused `a` for `refusal`. */
  refused(refusal: Refusal, a: Asking): void {
    const r = remembered(refusal);
    const k = ORDER.find(([x]) => x === r)?.[1](a);
    if (k === null || k === undefined) return;
    const key = `${r} ${k}`;
    const c = this.counts.get(key);
    if (c) c.n++;
    else this.counts.set(key, { n: 1 });
  }
}
