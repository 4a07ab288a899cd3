// Owns the fan-out of one instance's live stream: the count of connections it serves, one reader of the
// events table for all connections (poked by local pings and outcomes, other instances' notifications and a
// slow safety poll), each connection's position, its replay from the database on resume (window by window,
// its filter in the query, each read in its turn at the replay budget's pace), and the seam between replay
// and live with no gap and no duplicate.
import { inBackground, type Db } from '../../platform/db/database.js';
import { eventsAfter, latestPosition, prunedThrough, replayEvents, type EventRow, type ReleaseRule } from './event-repository.js';
import { matches, resetFrame, toStreamEvent, type StreamEvent, type StreamFilter } from './events.js';
import { ReplayGate, replayCost, type Turn } from './replay-gate.js';

/** Events read per live query. */
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

export interface StreamHubOptions {
  db: Db;
  rule: ReleaseRule;
  /** Positions one replay read covers (STREAM_REPLAY_PAGE). */
  replayPage: number;
  /** Replay reads at once (STREAM_REPLAY_CONCURRENCY). */
  replayConcurrency: number;
  /** Rows all replays together may read per second (STREAM_REPLAY_ROWS_PER_SECOND). */
  replayRowsPerSecond: number;
  /** Told of every batch of events the hub read (metrics). */
  onRead?: (events: number) => void;
  /** Told of every replay read: rows returned, positions covered (metrics). */
  onReplayRead?: (rows: number, positions: number) => void;
  onError?: (err: Error) => void;
}

/** Where a new connection starts, decided before its response headers are sent. */
export interface Start {
  /** The position after which it is sent events. */
  from: number;
  /** The latest position committed when it started: the replay reads at least up to here. */
  latest: number;
  /** A frame to send first: the client's resume point could not be honoured. */
  reset?: string;
}

/** A connection's place among the STREAM_MAX_CLIENTS: given up once, on whichever path ends it. */
export type Place = () => void;

const NO_TURN: Turn = () => {};

export class StreamHub {
  /** The highest position this hub has read (and handed to its live subscribers). */
  private lastSeen = 0;
  private readonly live = new Set<Subscriber>();
  private readonly attaching = new Set<Subscriber>();
  private reading: Promise<void> | undefined;
  private again = false;
  private lastReadAt = 0;
  private closed = false;
  private admitted = 0;
  private readonly gate: ReplayGate;

  constructor(private readonly opts: StreamHubOptions) {
    this.gate = new ReplayGate({ concurrency: opts.replayConcurrency, rowsPerSecond: opts.replayRowsPerSecond });
  }

  /** Connections served now (starting, replaying and live). */
  get size(): number {
    return this.admitted;
  }

  /** Connections still catching up from the database. */
  get replaying(): number {
    return this.attaching.size;
  }

  /** Replays waiting for their next read's turn. */
  get replayWaiting(): number {
    return this.gate.waiting;
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
    // On the embedded database, behind intake's statements (a burst of connections must not queue pings).
    return inBackground(async () => {
      const latest = await latestPosition(this.opts.db);
      if (resumeFrom === null) return { from: latest, latest };
      const horizon = await prunedThrough(this.opts.db);
      if (resumeFrom < horizon) return { from: latest, latest, reset: resetFrame(latest, resumeFrom, 'pruned', horizon) };
      if (resumeFrom > latest) return { from: latest, latest, reset: resetFrame(latest, resumeFrom, 'unknown', horizon) };
      return { from: resumeFrom, latest };
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
   */
  async attach(sub: Subscriber, start: Start): Promise<void> {
    const { replayPage } = this.opts;
    const filter = {
      ping: sub.filter.types.has('ping'),
      verified: sub.filter.types.has('verified'),
      host: sub.filter.host,
      tag: sub.filter.tag,
    };
    // Decided once: a replay's last reads take their turns too (200 replays ending together would otherwise
    // read at once).
    const replay = Math.max(start.latest, this.lastSeen) - start.from > replayPage;
    this.attaching.add(sub);
    try {
      sub.position = start.from;
      for (;;) {
        if (sub.sink.closed || this.closed) return;
        if (sub.position >= Math.max(start.latest, this.lastSeen)) break;
        let turn = NO_TURN;
        if (replay) {
          const granted = await this.gate.turn(sub);
          if (granted === null) return;
          turn = granted;
        }
        if (sub.sink.closed || this.closed) {
          turn(0);
          return;
        }
        const after = sub.position;
        const upto = Math.min(after + replayPage, Math.max(start.latest, this.lastSeen));
        let rows: EventRow[] = [];
        try {
          // On the embedded database, behind intake's statements, one at a time with renders and retention.
          rows = await inBackground(() => replayEvents(this.opts.db, this.opts.rule, after, upto, filter));
        } finally {
          const cost = replayCost(rows.length, upto - after);
          if (turn === NO_TURN) this.gate.charge(cost);
          else turn(cost);
          this.opts.onReplayRead?.(rows.length, upto - after);
        }
        if (sub.sink.closed || this.closed) return;
        if (!sub.take(rows.map(toStreamEvent))) return;
        // Positions that are no event for this connection (filtered, or no event at all) are passed too.
        sub.position = Math.max(sub.position, upto);
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
    this.gate.cancel(sub);
  }

  /** Stops reading; the connections are the route's to close. */
  async close(): Promise<void> {
    this.closed = true;
    this.live.clear();
    this.gate.close();
    await this.reading?.catch(() => {});
  }
}
