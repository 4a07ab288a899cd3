// Owns reading a replaying connection's windows of the events table: from another connection's read when
// the same whole window was read or is being read (ReplayCache), else in the connection's turn (ReplayGate:
// a few reads at once, at the pace shared by every replay) or, for a short catch-up, at once and charged to
// that pace. A whole window for a plain filter (no host, no tag) comes with its frames joined by the
// database (JoinedWindow); any other, row by row (ReplayWindow).
import { inBackground, type Db } from '../../platform/db/database.js';
import type { EventRow, ReleaseRule } from './event-repository.js';
import { replayEvents, replayJoined, type ReplayFilter } from './replay-repository.js';
import { toStreamEvent, type StreamFilter } from './events.js';
import { ReplayGate, replayCost, type Turn } from './replay-gate.js';
import { JoinedWindow, ReplayCache, ReplayWindow, type SharedWindow } from './replay-cache.js';
import type { Subscriber } from './subscriber.js';

export interface ReplayReaderOptions {
  db: Db;
  rule: ReleaseRule;
  /** Replay reads at once (STREAM_REPLAY_CONCURRENCY). */
  replayConcurrency: number;
  /** Rows all replays together may read per second (STREAM_REPLAY_ROWS_PER_SECOND). */
  replayRowsPerSecond: number;
  /** Bytes of replay windows kept for other connections (STREAM_REPLAY_CACHE_BYTES). */
  replayCacheBytes: number;
  /** Told of every replay read: rows returned, positions covered (metrics). */
  onReplayRead?: (rows: number, positions: number) => void;
}

const NO_TURN: Turn = () => {};

export class ReplayReader {
  private readonly gate: ReplayGate;
  private readonly cache: ReplayCache;
  private closed = false;

  constructor(private readonly opts: ReplayReaderOptions) {
    this.gate = new ReplayGate({ concurrency: opts.replayConcurrency, rowsPerSecond: opts.replayRowsPerSecond });
    this.cache = new ReplayCache(opts.replayCacheBytes);
  }

  /** Replay windows served from another connection's read (the cache, or a read in flight). */
  get sharedWindows(): number {
    return this.cache.hits;
  }

  /** Replays waiting for their next read's turn. */
  get waiting(): number {
    return this.gate.waiting;
  }

  /**
   * A connection's filter as the replay query takes it, and the shape its windows are shared under: every
   * connection with the same release rule and filter reads the same windows.
   */
  filterOf(f: StreamFilter): { filter: ReplayFilter; shape: string } {
    const filter = {
      ping: f.types.has('ping'),
      verified: f.types.has('verified'),
      hosts: f.hosts,
      tags: f.tags,
      methods: f.methods && [...f.methods],
      outcomes: f.outcomes && [...f.outcomes],
    };
    // A joined window holds exactly what its connections take, held weblogs' events included or not.
    const joined = isPlain(filter) ? (f.spam ? 'joined+spam' : 'joined') : 'rows';
    return { filter, shape: `${this.opts.rule}:${joined}:${JSON.stringify(filter)}` };
  }

  /**
   * The events of (after, upto] for a connection's filter: from another connection's read when it is a
   * whole window (key) already read or being read, else read in the connection's turn (a replay) or at once.
   * Null when the connection or the hub closed while it waited.
   */
  async window(
    sub: Subscriber,
    key: string | null,
    after: number,
    upto: number,
    filter: ReplayFilter,
    replay: boolean,
  ): Promise<SharedWindow | null> {
    const found = key === null ? undefined : this.cache.find(key);
    if (found !== undefined) return found;
    let turn = NO_TURN;
    if (replay) {
      const granted = await this.gate.turn(sub);
      if (granted === null) return null;
      turn = granted;
    }
    if (sub.sink.closed || this.closed) {
      turn(0);
      return null;
    }
    // Read meanwhile by another connection: the turn goes back unused.
    const meanwhile = key === null ? undefined : this.cache.find(key);
    if (meanwhile !== undefined) {
      turn(0);
      return meanwhile;
    }
    const { db, rule } = this.opts;
    const read = async (): Promise<SharedWindow> => {
      const startedAt = performance.now();
      let rows = 0;
      try {
        // On the embedded database, behind intake's statements, one at a time with renders and retention.
        if (key !== null && isPlain(filter)) {
          const r = await inBackground(() => replayJoined(db, rule, after, upto, filter, sub.filter.spam));
          rows = r.pings.count + r.verified.length;
          return JoinedWindow.of(r.pings, r.verified.map(toStreamEvent));
        }
        const events: EventRow[] = await inBackground(() => replayEvents(db, rule, after, upto, filter));
        rows = events.length;
        return new ReplayWindow(events.map(toStreamEvent), sub.filter);
      } finally {
        const cost = replayCost(rows, upto - after);
        if (turn === NO_TURN) this.gate.charge(cost, startedAt);
        else turn(cost);
        this.opts.onReplayRead?.(rows, upto - after);
      }
    };
    return key === null ? read() : this.cache.load(key, read);
  }

  /** A connection that ended gives up its place in the queue for turns. */
  cancel(sub: Subscriber): void {
    this.gate.cancel(sub);
  }

  /** Stops serving: waiting turns are refused, kept windows dropped. */
  close(): void {
    this.closed = true;
    this.cache.clear();
    this.gate.close();
  }
}

/** No host and no tag: every test the filter makes is exact in the query (a joined window's read). */
const isPlain = (f: ReplayFilter): boolean => f.hosts === null && f.tags === null;
