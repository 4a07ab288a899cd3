// Owns the fan-out of one instance's live stream: the count of connections it serves, one reader of the
// events table for all connections (poked by local pings and outcomes, other instances' notifications and a
// slow safety poll), where a connection starts, its replay on resume (window by window, at its client's
// pace), and the seam between replay and live with no gap and no duplicate. A connection's own position
// and frames are subscriber.ts's, the reading of replay windows replay-reader.ts's, the replays' send pace
// replay-pace.ts's, the rule that cuts a connection which does not read slow-consumer.ts's.
import { setTimeout as sleep } from 'node:timers/promises';
import { inBackground } from '../../platform/db/database.js';
import { eventsAfter, latestPosition, logEnds, positionBefore, prunedThrough } from './event-repository.js';
import { resetFrame, toStreamEvent, type ResumePoint } from './events.js';
import type { LogState } from './info.js';
import type { SharedWindow } from './replay-cache.js';
import { ReplayPace } from './replay-pace.js';
import { ReplayReader, type ReplayReaderOptions } from './replay-reader.js';
import { mustCut, type SlowConsumerRule } from './slow-consumer.js';
import type { Subscriber } from './subscriber.js';

/** Events read per live query. */
const PAGE = 500;
/**
 * Least time between two live reads. Under a burst every accepted ping pokes the hub; one read per gap
 * carries all of them, as one write per connection, at up to that much added latency. Measured with 100
 * consumers under intake load (bench/stream.ts): at 5 ms, reads and writes doubled pingd's CPU per ping on
 * the embedded database (whose queries run in pingd's process).
 */
const READ_GAP_MS = 20;
/**
 * Windows a replay reads ahead of the one it writes. With STREAM_REPLAY_CONCURRENCY (2) places, two keep a
 * lone replay's two reads in flight while pingd formats and writes (1M-ping replay bench, PostgreSQL).
 */
const READ_AHEAD = 2;

export interface StreamHubOptions extends ReplayReaderOptions {
  /** Positions one replay read covers (STREAM_REPLAY_PAGE). */
  replayPage: number;
  /** Bytes all replays together are sent per second, shared equally (STREAM_REPLAY_BYTES_PER_SECOND; 0: unpaced). */
  replayBytesPerSecond: number;
  /** When to cut a connection that does not read (STREAM_SLOW_MIN_BYTES_PER_SECOND, STREAM_SLOW_WINDOW_MS). */
  slow: SlowConsumerRule;
  /** Told of every batch of events the hub read (metrics). */
  onRead?: (events: number) => void;
  /** A live connection had STREAM_BUFFER_BYTES waiting and went back to catching up from the database. */
  onFellBehind?: () => void;
  /** A connection was cut by the slow-consumer rule. */
  onCut?: () => void;
  onError?: (err: Error) => void;
}

/** Where a new connection starts, decided before its response headers are sent. */
export interface Start {
  /** The position after which it is sent events. */
  from: number;
  /** The latest position committed when it started: the replay reads at least up to here. */
  latest: number;
  /** A frame to send first: the client's resume point could not be honoured as asked. */
  reset?: string;
}

/** A connection's place among the STREAM_MAX_CLIENTS: given up once, on whichever path ends it. */
export type Place = () => void;

export class StreamHub {
  /** The highest position this hub has read (and handed to its live subscribers). */
  private lastSeen = 0;
  /** See `highest`. */
  private known = 0;
  private readonly live = new Set<Subscriber>();
  private readonly attaching = new Set<Subscriber>();
  private reading: Promise<void> | undefined;
  private again = false;
  private lastReadAt = 0;
  private closed = false;
  private admitted = 0;
  private readonly replays: ReplayReader;
  private readonly pace: ReplayPace;

  constructor(private readonly opts: StreamHubOptions) {
    this.replays = new ReplayReader(opts);
    this.pace = new ReplayPace({ bytesPerSecond: opts.replayBytesPerSecond });
  }

  /** Replay windows served from another connection's read (the cache, or a read in flight). */
  get sharedWindows(): number {
    return this.replays.sharedWindows;
  }

  /** Connections served now (starting, replaying and live). */
  get size(): number {
    return this.admitted;
  }

  /** Connections served from the hub's own reads (caught up). */
  get following(): number {
    return this.live.size;
  }

  /** Connections still catching up from the database. */
  get replaying(): number {
    return this.attaching.size;
  }

  /** Replays waiting for their next read's turn. */
  get replayWaiting(): number {
    return this.replays.waiting;
  }

  /**
   * Takes a place for a new connection, or null when `max` are served. Counted here, before the caller
   * yields to anything: a check made before an await lets every connection of a burst through it (3,000
   * at once against a cap of 1,000 got 1,737 served on the embedded database, 2,778 on PostgreSQL).
   */
  admit(max: number): Place | null {
    if (this.admitted >= max) return null;
    this.admitted++;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.admitted--;
    };
  }

  /**
   * The highest position this instance knows was committed: every position it read (events, the latest
   * position a connection started at or /stream/info showed) or was told of by poke() (its own pings and
   * outcomes, other instances' notifications). Every id a client of this instance was ever sent is at most
   * this, which is what the plugin keeps the sequence above (raisePositions).
   */
  get highest(): number {
    return Math.max(this.known, this.lastSeen);
  }

  private saw(pos: number): number {
    if (pos > this.known) this.known = pos;
    return pos;
  }

  /** Something new may have been committed up to `pos` (unknown: look anyway). Without live connections nothing is read. */
  poke(pos?: number): void {
    if (pos !== undefined) this.saw(pos);
    if (this.closed || this.live.size === 0) return;
    if (pos !== undefined && pos <= this.lastSeen) return;
    void this.read().catch(() => {});
  }

  /**
   * The once-a-second round: cursor advance for live connections the log passed by since their last id,
   * and the slow-consumer rule for every connection.
   */
  tick(now = performance.now()): void {
    for (const s of this.live) s.advanceCursor(now);
    for (const set of [this.live, this.attaching]) {
      for (const s of set) {
        if (s.sink.closed || !mustCut(s, now, this.opts.slow)) continue;
        this.opts.onCut?.();
        s.sink.cut();
        this.detach(s);
      }
    }
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
          const now = performance.now();
          for (const s of this.live) {
            if (s.take(events, false, now)) continue;
            this.live.delete(s);
            if (!s.sink.closed) this.fellBehind(s);
          }
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
   * A live connection whose client let STREAM_BUFFER_BYTES wait: instead of being cut, it catches up from
   * the database from its position, at its client's pace, and goes live again once it has (the
   * slow-consumer rule cuts it only if it then stops reading).
   */
  private fellBehind(s: Subscriber): void {
    this.opts.onFellBehind?.();
    const latest = this.lastSeen;
    this.attach(s, { from: s.position, latest }, true).catch((err: Error) => {
      this.opts.onError?.(err);
      s.sink.end();
    });
  }

  /**
   * Where a connection starts: "now" (the latest committed position) when the client named nothing; after
   * the position it named; before the first event at or after the time it named. A position older than
   * what retention kept starts from the oldest kept, with a reset frame saying so (`?since=0`, "everything
   * kept", needs none); one beyond any event starts now, with a reset frame. Decided before the response's
   * headers go out: a client that has seen the headers of its stream gets every event committed after that.
   */
  async start(from: ResumePoint | null): Promise<Start> {
    // On the embedded database, behind intake's statements (a burst of connections must not queue pings).
    return inBackground(async () => {
      const latest = this.saw(await latestPosition(this.opts.db));
      if (from === null) return { from: latest, latest };
      if (from.at === 'time') {
        const before = await positionBefore(this.opts.db, from.time);
        return { from: before === null ? latest : Math.min(before, latest), latest };
      }
      const horizon = await prunedThrough(this.opts.db);
      if (from.pos < horizon) {
        if (from.pos === 0 && !from.header) return { from: horizon, latest };
        return { from: horizon, latest, reset: resetFrame(horizon, from.pos, 'pruned', horizon) };
      }
      if (from.pos > latest) return { from: latest, latest, reset: resetFrame(latest, from.pos, 'unknown', horizon) };
      return { from: from.pos, latest };
    });
  }

  /**
   * Serves a connection from `start.from`: every event after it, read from the database window by window
   * at the client's pace and the replay budget's, then live. Everything up to the latest position at its
   * start, and up to what the hub has read since, is committed: a window never reaches past that, so no
   * event in it becomes visible later. The switch to live happens when the connection has reached both:
   * checked and done with no await between, so the hub hands it exactly the events after its position,
   * nothing twice and nothing falling between. It never waits for the hub's own reading (which a steady
   * flow of pings keeps going).
   *
   * A connection that starts more than one window behind reads in turn with the other replays (ReplayGate:
   * a few reads at once, first come first served, one window per turn, at a pace shared by all); it holds
   * no turn while it waits for its client to take what it was sent, so a client that stops reading holds up
   * no one. One that starts at most a window behind (a new connection, a reconnect after a blip) reads at
   * once, and what it read is charged to the pace.
   *
   * At the seam a resumed stream is sent `event: live` (once); a replay-only one is then ended.
   */
  async attach(sub: Subscriber, start: Start, resumed = false): Promise<void> {
    const { replayPage } = this.opts;
    const { filter, shape } = this.replays.filterOf(sub.filter);
    // Decided once: a replay's last reads take their turns too (200 replays ending together would otherwise
    // read at once).
    const replay = Math.max(start.latest, this.lastSeen) - start.from > replayPage;
    this.attaching.add(sub);
    if (replay) this.pace.join(sub);
    sub.catchingUp = true;
    // Bytes queued for the client so far (taken or waiting).
    const queued = () => sub.sink.delivered + sub.sink.waiting;
    let sent = queued();
    try {
      if (!resumed) sub.begin(start.from);
      // The next whole windows, read while this one is written (a replay that waited for each read before
      // asking for the next spent most of its time on the database's latency; one window ahead, a lone
      // replay on PostgreSQL kept pingd busy 50-60% of the time).
      const ahead = new Map<string, Promise<SharedWindow | null>>();
      for (;;) {
        if (sub.sink.closed || this.closed) return;
        const bound = Math.max(start.latest, this.lastSeen);
        if (sub.position >= bound) break;
        // Windows end on multiples of the page: after a first partial one, every connection replaying the
        // same stretch with the same filter reads the same windows, and a whole one is shared (ReplayCache).
        const after = sub.position;
        const end = (Math.floor(after / replayPage) + 1) * replayPage;
        const upto = Math.min(end, bound);
        const key = upto === end && after === end - replayPage ? `${shape}:${upto}` : null;
        const pending = (key !== null && ahead.get(key)) || this.replays.window(sub, key, after, upto, filter, replay);
        if (key !== null) ahead.delete(key);
        for (let next = upto + replayPage; replay && key !== null && ahead.size < READ_AHEAD && next <= bound; next += replayPage) {
          const nextKey = `${shape}:${next}`;
          if (ahead.has(nextKey)) continue;
          const w = this.replays.window(sub, nextKey, next - replayPage, next, filter, replay);
          // Awaited on a later round; if the connection ends first, nobody does.
          w.catch(() => {});
          ahead.set(nextKey, w);
        }
        const w = await pending;
        if (w === null || sub.sink.closed || this.closed) return;
        if (!sub.takeWindow(w)) return;
        // Positions that are no event for this connection (filtered, or no event at all) are passed too.
        sub.passTo(upto);
        await sub.sink.drained();
        // The send pace (ReplayPace): a crowd replaying one stretch reads it once and would be sent it as
        // fast as its clients take it. Under 1 ms the debt is carried to the next window.
        if (replay) {
          const wait = this.pace.sent(sub, queued() - sent);
          sent = queued();
          if (wait >= 1) await sleep(wait);
        }
      }
      sub.announce();
      if (sub.replayOnly) {
        sub.sink.end();
        return;
      }
      // The hub reads only while someone listens: alone, this connection's position is where it resumes.
      if (this.live.size === 0) this.lastSeen = Math.max(this.lastSeen, sub.position);
      sub.catchingUp = false;
      sub.behind.length = 0;
      this.live.add(sub);
    } finally {
      this.attaching.delete(sub);
      this.pace.leave(sub);
    }
  }

  detach(sub: Subscriber): void {
    this.live.delete(sub);
    this.attaching.delete(sub);
    this.pace.leave(sub);
    this.replays.cancel(sub);
  }

  /** The ends of the kept log (GET /stream/info). */
  async ends(): Promise<LogState> {
    return inBackground(async () => {
      const { oldest, newest } = await logEnds(this.opts.db);
      return { oldest, newest, latest: this.saw(await latestPosition(this.opts.db)), prunedThrough: await prunedThrough(this.opts.db) };
    });
  }

  /** Stops reading; the connections are the route's to close. */
  async close(): Promise<void> {
    this.closed = true;
    this.replays.close();
    this.live.clear();
    await this.reading?.catch(() => {});
  }
}
