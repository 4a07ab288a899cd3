// Owns the replay windows connections share: a replay reads the log in whole windows of STREAM_REPLAY_PAGE
// positions aligned on multiples of it, so connections that replay the same stretch with the same filter
// (a crowd reconnecting after a restart, many consumers starting from ?since=0) need the same windows. One
// read serves all of them, formatted and encoded once: later connections take it from here, those asking
// while it is read wait for that read. Bounded in bytes (STREAM_REPLAY_CACHE_BYTES), least recently used
// first out. No I/O: the hub hands it the read.
import { matches, type StreamEvent, type StreamFilter } from './events.js';

/** One window's events, read once, for every connection with the same filter. */
export class ReplayWindow {
  private encoded: Buffer | undefined;
  /** Every event passes the filter the window was read for (the query can keep a few it drops). */
  readonly exact: boolean;
  /** What it holds in memory: its frames, and their encoding once made. */
  readonly bytes: number;

  constructor(
    readonly events: readonly StreamEvent[],
    filter: StreamFilter,
  ) {
    this.exact = events.every((e) => matches(filter, e));
    this.bytes = 2 * events.reduce((n, e) => n + e.frame.length + 64, 0);
  }

  /** The window's frames as bytes, encoded once for every connection that sends them whole. */
  get chunk(): Buffer {
    this.encoded ??= Buffer.from(this.events.map((e) => e.frame).join(''));
    return this.encoded;
  }
}

export class ReplayCache {
  private readonly kept = new Map<string, ReplayWindow>();
  private readonly loading = new Map<string, Promise<ReplayWindow>>();
  private held = 0;
  hits = 0;

  constructor(private readonly maxBytes: number) {}

  /** A window already read, or being read: no read of its own needed. */
  find(key: string): ReplayWindow | Promise<ReplayWindow> | undefined {
    const w = this.kept.get(key);
    if (w) {
      // Least recently used goes first: a use moves it to the end.
      this.kept.delete(key);
      this.kept.set(key, w);
      this.hits++;
      return w;
    }
    const p = this.loading.get(key);
    if (p) this.hits++;
    return p;
  }

  /** Reads a window once; kept for later connections if it fits. */
  load(key: string, read: () => Promise<ReplayWindow>): Promise<ReplayWindow> {
    const p = read().then(
      (w) => {
        this.loading.delete(key);
        this.keep(key, w);
        return w;
      },
      (err: unknown) => {
        this.loading.delete(key);
        throw err;
      },
    );
    this.loading.set(key, p);
    return p;
  }

  private keep(key: string, w: ReplayWindow): void {
    if (w.bytes > this.maxBytes) return;
    this.kept.set(key, w);
    this.held += w.bytes;
    for (const [k, old] of this.kept) {
      if (this.held <= this.maxBytes) break;
      this.kept.delete(k);
      this.held -= old.bytes;
    }
  }

  /** Bytes held. */
  get size(): number {
    return this.held;
  }

  clear(): void {
    this.kept.clear();
    this.held = 0;
  }
}
