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
  onRead?: (events: number) => void;
  onError?: (err: Error) => void;
}

/** Where a new connection starts, decided before its response headers are sent. */
export interface Start {
  /** The position after which it is sent events. */
  from: number;
  /** A frame to send first: the client's resume point could not be honoured. */
  reset?: string;
}

export class StreamHub {
  /** The highest position this hub has read (and handed to its live subscribers). */
  private lastSeen = 0;
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

  /** Something new may have been committed up to `pos` (unknown: look anyway). Without live connections nothing is read. */
  poke(pos?: number): void {
    if (this.closed || this.live.size === 0) return;
    if (pos !== undefined && pos <= this.lastSeen) return;
    void this.read().catch(() => {});
  }

  /** Reads until nothing newer is committed; a call made while a read runs makes it go round once more. */
  private read(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = this.readLoop().finally(() => {
      this.reading = undefined;
      // A poke that came after the loop's last look but before it was marked done.
      if (this.again && !this.closed) void this.read().catch(() => {});
    });
    return this.reading;
  }

  private async readLoop(): Promise<void> {
    try {
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
          this.opts.onRead?.(events.length);
        }
        if (this.closed || (!this.again && rows.length < PAGE)) return;
      }
    } catch (err) {
      this.opts.onError?.(err as Error);
      throw err;
    }
  }

  /**
   * Where a connection starts: "now" (the latest committed position) when the client named none, else its
   * resume point, unless retention deleted events after it or it is beyond any event (then now, with a
   * reset frame). Decided before the response's headers go out: a client that has seen the headers of its
   * stream gets every event committed after that.
   */
  async start(resumeFrom: number | null): Promise<Start> {
    const latest = await latestPosition(this.opts.db);
    if (resumeFrom === null) return { from: latest };
    const horizon = await prunedThrough(this.opts.db);
    if (resumeFrom < horizon) return { from: latest, reset: resetFrame(latest, resumeFrom, 'pruned', horizon) };
    if (resumeFrom > latest) return { from: latest, reset: resetFrame(latest, resumeFrom, 'unknown', horizon) };
    return { from: resumeFrom };
  }

  /**
   * Serves a connection from `from`: every event after it, read from the database page by page at the
   * client's pace, then live. The switch happens when a page comes back short and the connection has
   * reached what the hub has read: from then on the hub hands it only events after its position, so
   * nothing is sent twice and nothing falls between. It never waits for the hub's own reading (which a
   * steady flow of pings keeps going).
   */
  async attach(sub: Subscriber, from: number): Promise<void> {
    this.attaching.add(sub);
    try {
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
      // The hub reads only while someone listens: alone, this connection's position is where it resumes.
      if (this.live.size === 0) this.lastSeen = Math.max(this.lastSeen, sub.position);
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
