// Owns the signal "this feed changed, with these new entries", typed once for every job that listens to it
// (the WebSub hub's deliveries, rssCloud's notifications): verification raises it, push listens. A watcher
// says beforehand whether it wants a feed's changes (and whether it needs the fetched document cut down to
// its new entries, which costs a parse on the reading thread); it queues its durable work in the very
// transaction that commits the verification's outcome (a throw rolls the outcome back, and the job is
// retried), so an outcome is never committed without the work it promised; and it hears after the commit
// (listeners.ts: one that throws is logged, never passed on) to wake its worker.
import type { Queryable } from './db/database.js';
import { Listeners, type ListenerLog } from './listeners.js';

/** An entry found new, as it is stored and republished (cleaned text, an http(s) link or none). */
export interface NewEntry {
  title: string | null;
  link: string | null;
  guid: string | null;
}

/** The fetched document holding only the new entries, in the feed's own format and Content-Type. */
export interface FeedExcerpt {
  contentType: string;
  body: Buffer;
}

export interface FeedChange {
  feedId: number;
  /** The feed as it was first named (feeds.url): what its subscribers named as their topic. */
  feedUrl: string;
  /** Where it was fetched (differs from feedUrl once a permanent redirect was confirmed). */
  fetchUrl: string;
  /** What made pingd fetch it: a ping (any intake protocol) or a check the hub asked for (subscribe, poll). */
  via: 'ping' | 'check';
  /** The new entries, in feed order (at most verification's PUBLISH_LIMIT). */
  entries: NewEntry[];
  /** Present when a watcher asked for it ('excerpt') and the document could be cut down. */
  excerpt: FeedExcerpt | null;
}

/** What a watcher wants of a feed's changes: nothing, to hear of them, or the excerpt too. */
export type FeedInterest = 'none' | 'notice' | 'excerpt';

export interface FeedWatcher {
  /** Read before the fetched document is parsed (a cheap indexed lookup). */
  interest(q: Queryable, feedId: number): Promise<FeedInterest>;
  /** In the outcome's transaction: queue durable work for the change. A throw rolls the outcome back. */
  write(tx: Queryable, change: FeedChange): Promise<void>;
}

const RANK: Record<FeedInterest, number> = { none: 0, notice: 1, excerpt: 2 };

export class FeedChanges {
  private readonly watchers: FeedWatcher[] = [];
  private readonly committedListeners: Listeners<[FeedChange]>;

  constructor(log: ListenerLog) {
    this.committedListeners = new Listeners('feed changed', log);
  }

  /** Registers a watcher (at start-up, before the first verification). */
  watch(w: FeedWatcher): void {
    this.watchers.push(w);
  }

  /** Registers a listener told after a change was committed (wake a worker, count). */
  onCommitted(l: (change: FeedChange) => void): void {
    this.committedListeners.add(l);
  }

  /** The most any watcher wants of the feed's changes. */
  async interest(q: Queryable, feedId: number): Promise<FeedInterest> {
    let best: FeedInterest = 'none';
    for (const w of this.watchers) {
      const i = await w.interest(q, feedId);
      if (RANK[i] > RANK[best]) best = i;
    }
    return best;
  }

  /** Every watcher's durable work, inside the outcome's transaction. */
  async write(tx: Queryable, change: FeedChange): Promise<void> {
    for (const w of this.watchers) await w.write(tx, change);
  }

  /** After the commit. */
  committed(change: FeedChange): void {
    this.committedListeners.emit(change);
  }
}

/**
 * The outcome of a check of a feed no ping asked for (a new subscription's topic, a poll): whether it is a
 * feed pingd can read, or when to ask again because its host's manners say not yet.
 */
export type FeedCheck =
  | { kind: 'deferred'; until: Date }
  | {
      kind: 'done';
      /** The feed's row in verification's table (null: none was made, e.g. a URL refused). */
      feedId: number | null;
      /** verification's outcome (verified, unchanged, not_modified, not_a_feed, gone, refused, …). */
      outcome: string;
      /** Whether the topic is a feed (read now, or unchanged since it was). */
      feed: boolean;
      /** 410 Gone (or an empty XML redirect): never fetched again. */
      gone: boolean;
      /** The feed's own polling hints, when it is one: ttl in minutes, sy:updatePeriod/updateFrequency. */
      hints: { ttl?: number; updatePeriod?: string; updateFrequency?: number };
    };
