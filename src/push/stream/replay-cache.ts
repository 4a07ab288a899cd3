// Owns the replay windows connections share: a replay reads the log in whole windows of STREAM_REPLAY_PAGE
// positions aligned on multiples of it, so connections that replay the same stretch with the same filter
// (a crowd reconnecting after a restart, many consumers starting from ?since=0) need the same windows. One
// read serves all of them, formatted and encoded once: later connections take it from here, those asking
// while it is read wait for that read. Bounded in bytes (STREAM_REPLAY_CACHE_BYTES), least recently used
// first out. A window is events (ReplayWindow, read row by row: a filter the query cannot apply exactly) or
// frames the database joined (JoinedWindow: a plain filter, every event in it taken). No I/O: the hub hands it
// the read.
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

/**
 * One whole window's frames as the database joined them, for every connection with the same plain filter:
 * every event in it is one they take, so a connection is sent the bytes after its position, sliced from the
 * one buffer (no event is an object here). Where each frame starts is found only when a connection starts
 * inside the window, from the frames themselves: each is `id: <pos>\n…\n\n`, and its one line of JSON
 * holds no line break (events.ts), so a blank line ends it.
 */
export class JoinedWindow {
  /** Its events' positions and where each one's frame ends in `chunk` (found on first use). */
  private index: FrameIndex | undefined;
  readonly bytes: number;

  private constructor(
    readonly chunk: Buffer,
    /** Its first and last event's positions (NaN when it holds none). */
    readonly first: number,
    readonly last: number,
    index?: FrameIndex,
  ) {
    this.index = index;
    this.bytes = chunk.length + (index ? 16 * index.pos.length : 0) + 64;
  }

  /** A window of `ping` frames (joined in position order) and formatted `verified` events, merged by position. */
  static of(pings: { frames: string; count: number; last: number }, verified: readonly StreamEvent[]): JoinedWindow {
    const frames = Buffer.from(pings.frames);
    if (verified.length === 0) return new JoinedWindow(frames, pings.count === 0 ? NaN : firstId(frames), pings.last);
    const p = indexFrames(frames);
    const parts: Buffer[] = [];
    const pos: number[] = [];
    const end: number[] = [];
    let total = 0;
    for (let i = 0, j = 0; i < p.pos.length || j < verified.length;) {
      let part: Buffer;
      if (j >= verified.length || (i < p.pos.length && p.pos[i] < verified[j].pos)) {
        part = frames.subarray(p.end[i - 1] ?? 0, p.end[i]);
        pos.push(p.pos[i++]);
      } else {
        part = Buffer.from(verified[j].frame);
        pos.push(verified[j++].pos);
      }
      parts.push(part);
      total += part.length;
      end.push(total);
    }
    return new JoinedWindow(Buffer.concat(parts, total), pos[0], pos[pos.length - 1], { pos, end });
  }

  /** The frames after `position` and the last one's position; null when none is after it. */
  after(position: number): { chunk: Buffer; last: number } | null {
    if (!(position < this.last)) return null;
    if (position < this.first) return { chunk: this.chunk, last: this.last };
    this.index ??= indexFrames(this.chunk);
    const { pos, end } = this.index;
    let lo = 0;
    let hi = pos.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (pos[mid] <= position) lo = mid + 1;
      else hi = mid;
    }
    return { chunk: this.chunk.subarray(end[lo - 1] ?? 0), last: this.last };
  }
}

interface FrameIndex {
  pos: number[];
  /** Where each frame ends (the byte after its blank line). */
  end: number[];
}

const ID = Buffer.from('id: ');
const LF = 0x0a;

/** The position in the `id:` line of the frame at `at`. */
function idAt(frames: Buffer, at: number): number {
  if (frames.compare(ID, 0, ID.length, at, at + ID.length) !== 0) throw new Error(`no frame starts at byte ${at}`);
  return Number(frames.toString('latin1', at + ID.length, frames.indexOf(LF, at)));
}

const firstId = (frames: Buffer): number => idAt(frames, 0);

/** Each frame's position and end, in order. */
function indexFrames(frames: Buffer): FrameIndex {
  const pos: number[] = [];
  const end: number[] = [];
  for (let at = 0; at < frames.length;) {
    pos.push(idAt(frames, at));
    const blank = frames.indexOf('\n\n', at);
    if (blank < 0) throw new Error(`the frame at byte ${at} has no end`);
    at = blank + 2;
    end.push(at);
  }
  return { pos, end };
}

/** A window as the cache keeps it, either kind. */
export type SharedWindow = ReplayWindow | JoinedWindow;

export class ReplayCache {
  private readonly kept = new Map<string, SharedWindow>();
  private readonly loading = new Map<string, Promise<SharedWindow>>();
  private held = 0;
  hits = 0;

  constructor(private readonly maxBytes: number) {}

  /** A window already read, or being read: no read of its own needed. */
  find(key: string): SharedWindow | Promise<SharedWindow> | undefined {
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
  load(key: string, read: () => Promise<SharedWindow>): Promise<SharedWindow> {
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

  private keep(key: string, w: SharedWindow): void {
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
