// Owns the fan-out of one instance's live stream: one reader of the events table for all connections (poked
// by local pings and outcomes, other instances' notifications and a slow safety poll), each connection's
// position, its replay from the database on resume, and the seam between replay and live with no gap and
// no duplicate.
import type { Db } from '../../platform/db/database.js';
import { eventsAfter, latestPosition, prunedThrough, type ReleaseRule } from './event-repository.js';
import { matches, resetFrame, toStreamEvent, type StreamEvent, type StreamFilter } from './events.js';

/** Events read per query, live or replay. */
const PAGE = 500;
/**
 * Least time between two live reads. Under a burst every accepted ping pokes the hub; one read per gap
 * carries all of them, as one write per connection, at up to that much added latency. Measured with 100
 * consumers under intake load (bench/stream.ts): at 5 ms, reads and writes doubled pingd's CPU per ping on
 * the embedded database (whose queries run in pingd's process).
 */
const READ_GAP_MS = 20;

/** Where a connection's bytes go. */
export interface Sink {
  /** Queues text for the client; false when the client is too far behind (the sink then closes itself). */
  write(text: string): boolean;
  /** Resolves once the client has taken what was queued (replay waits for slow readers, live does not). */
  drained(): Promise<void>;
  readonly closed: boolean;
}

export class Subscriber {
  /** The last position this connection has been given (or skipped by its filter). */
  position = 0;

  constructor(
    readonly filter: StreamFilter,
    readonly sink: Sink,
  ) {}

  /** Sends the events after its position that pass its filter, as one write. */
  take(events: readonly StreamEvent[]): boolean {
    let chunk = '';
    for (const e of events) {
      if (e.pos <= this.position) continue;
      this.position = e.pos;
      if (matches(this.filter, e)) chunk += e.frame;
    }
    return chunk === '' || this.sink.write(chunk);
  }
}

export interface HubOptions {
  db: Db;
  rule: ReleaseRule;
  /** Told of every batch of events the hub read (metrics). */
  onRead?: (events: number, ms: number) => void;
  onError?: (err: Error) => void;
}

export class StreamHub {
  /** The highest position this hub has read (and handed to its live subscribers). */
  private lastSeen = 0;
  /** lastSeen may be behind: nobody was listening while pings arrived, so nothing was read. */
  private stale = true;
  private readonly live = new Set<Subscriber>();
  private readonly attaching = new Set<Subscriber>();
  private reading: Promise<void> | undefined;
  private again = false;
  private lastReadAt = 0;
  private closed = false;

  constructor(private readonly opts: HubOptions) {}

  /** Connections served now (live and replaying). */
  get size(): number {
    return this.live.size + this.attaching.size;
  }

  get position(): number {
    return this.lastSeen;
  }

  /** Something new may have been committed up to `pos` (unknown: look anyway). */
  poke(pos?: number): void {
    if (this.closed) return;
    if (this.live.size === 0) {
      this.stale = true;
      return;
    }
    if (pos !== undefined && pos <= this.lastSeen) return;
    void this.read().catch(() => {});
  }

  /**
   * Reads until nothing newer is committed; a call made while a read runs makes it go round once more, and
   * resolves after that round (so the caller has seen everything committed before it called).
   */
  read(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = this.readLoop().finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  private async readLoop(): Promise<void> {
    try {
      if (this.stale) {
        this.stale = false;
        if (this.live.size === 0) this.lastSeen = Math.max(this.lastSeen, await latestPosition(this.opts.db));
      }
      for (;;) {
        this.again = false;
        const wait = this.lastReadAt + READ_GAP_MS - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        this.lastReadAt = performance.now();
        const rows = await eventsAfter(this.opts.db, this.opts.rule, this.lastSeen, PAGE);
        if (rows.length > 0) {
          const events = rows.map(toStreamEvent);
          this.lastSeen = events[events.length - 1].pos;
          for (const s of this.live) if (!s.take(events)) this.live.delete(s);
          this.opts.onRead?.(events.length, performance.now() - this.lastReadAt);
        }
        if (this.closed || (!this.again && rows.length < PAGE)) return;
      }
    } catch (err) {
      this.opts.onError?.(err as Error);
      throw err;
    }
  }

  /**
   * Starts a connection: live from now, or (with `from`) first every kept event after `from`, read from the
   * database page by page at the client's pace, then live. The switch happens when a replay page comes back
   * short and the connection has reached what the hub has read: from then on the hub hands it only events
   * after its position, so nothing is sent twice and nothing falls between.
   */
  async attach(sub: Subscriber, from: number | null): Promise<void> {
    this.attaching.add(sub);
    try {
      if (this.stale || this.live.size === 0) await this.read();
      if (from !== null) {
        const horizon = await prunedThrough(this.opts.db);
        if (from > this.lastSeen) await this.read();
        if (from < horizon || from > this.lastSeen) {
          sub.position = this.lastSeen;
          sub.sink.write(resetFrame(this.lastSeen, from, from < horizon ? 'pruned' : 'unknown', horizon));
          from = null;
        }
      }
      if (from === null) {
        sub.position = Math.max(sub.position, this.lastSeen);
      } else {
        sub.position = from;
        for (;;) {
          // Everything up to what the hub had read before this query is committed, so the query sees it.
          const seen = this.lastSeen;
          const rows = await eventsAfter(this.opts.db, this.opts.rule, sub.position, PAGE);
          if (sub.sink.closed || this.closed) return;
          if (!sub.take(rows.map(toStreamEvent))) return;
          if (rows.length < PAGE) {
            // A short page: nothing up to `seen` is left (positions that are no event, such as pings not yet
            // released under VERIFY_PINGS=require, are passed over too).
            sub.position = Math.max(sub.position, seen);
            if (sub.position >= this.lastSeen) break;
            // The hub read further while this page was read: read on from the database.
            continue;
          }
          await sub.sink.drained();
        }
      }
      if (sub.sink.closed || this.closed) return;
      this.live.add(sub);
    } finally {
      this.attaching.delete(sub);
    }
  }

  detach(sub: Subscriber): void {
    this.live.delete(sub);
    this.attaching.delete(sub);
  }

  /** Stops reading; the connections are the route's to close. */
  async close(): Promise<void> {
    this.closed = true;
    this.live.clear();
    await this.reading?.catch(() => {});
  }
}
