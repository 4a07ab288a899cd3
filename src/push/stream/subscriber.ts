// Owns one connection's place in the stream: the last position it was given (or passed by, filtered out),
// the last id its client was sent, and what it is sent: its filter's events as one write, a shared replay
// window whole when it fits, bare ids for what its filter passes by (STREAM_CURSOR_MS) and `event: live`
// once at the end of a replay.
import { cursorFrame, liveFrame, matches, type StreamEvent, type StreamFilter } from './events.js';
import { JoinedWindow, type SharedWindow } from './replay-cache.js';
import type { Sink } from './sink.js';

/** What a connection is sent besides its events. */
export interface SubscriberOptions {
  /** Send `event: live` once the replay has caught up (a resumed or `?since=` stream). */
  announce?: boolean;
  /** End the response after `event: live` (`?until=live`, `?mode=replay`). */
  replayOnly?: boolean;
  /** STREAM_CURSOR_MS: least time between two ids sent to a filtered stream that the log passes by (0: never). */
  cursorMs?: number;
}

export class Subscriber {
  /** The last position this connection has been given (or skipped by its filter). */
  position = 0;
  /** The last id the client was sent (an event's, a cursor's, a control frame's), and when. */
  private told = 0;
  private toldAt = 0;
  /** `event: live` has been sent (or is not wanted). */
  announced: boolean;
  /** Reading from the database (a replay, or a live connection that fell behind), not from the hub's reads. */
  catchingUp = false;
  /** Delivered-byte samples while it is behind with bytes waiting (the slow-consumer rule's window). */
  readonly behind: { at: number; delivered: number }[] = [];
  readonly replayOnly: boolean;
  private readonly cursorMs: number;

  constructor(
    readonly filter: StreamFilter,
    readonly sink: Sink,
    opts: SubscriberOptions = {},
  ) {
    this.announced = !opts.announce;
    this.replayOnly = opts.replayOnly ?? false;
    this.cursorMs = opts.cursorMs ?? 0;
  }

  /** Where it starts: nothing after `pos` has been sent, and the client's resume point is `pos`. */
  begin(pos: number, now = performance.now()): void {
    this.position = pos;
    this.told = pos;
    this.toldAt = now;
  }

  /**
   * Sends the events after its position that pass its filter, as one write. False when the write was not
   * taken (the client too far behind, or gone): its position is then unchanged.
   */
  take(events: readonly StreamEvent[], paced = false, now = performance.now()): boolean {
    let chunk = '';
    let pos = this.position;
    let last = 0;
    for (const e of events) {
      if (e.pos <= pos) continue;
      pos = e.pos;
      if (matches(this.filter, e)) {
        chunk += e.frame;
        last = e.pos;
      }
    }
    if (chunk !== '') {
      if (!this.sink.write(chunk, paced)) return false;
      this.told = last;
      this.toldAt = now;
    }
    this.position = pos;
    if (chunk === '') this.advanceCursor(now);
    return true;
  }

  /**
   * Sends a shared replay window (paced): whole, as the bytes encoded once for every connection, when it
   * starts after this connection's position and its filter kept exactly what it was read for (a joined
   * window: always, from this connection's position on); else event by event.
   */
  takeWindow(w: SharedWindow, now = performance.now()): boolean {
    if (w instanceof JoinedWindow) {
      // Every event in it passes the filter: the bytes after this connection's position, as they are.
      const part = w.after(this.position);
      if (part === null) return true;
      if (!this.sink.write(part.chunk, true)) return false;
      this.position = part.last;
      this.told = part.last;
      this.toldAt = now;
      return true;
    }
    const first = w.events[0];
    if (first === undefined || !w.exact || first.pos <= this.position) return this.take(w.events, true, now);
    if (!this.sink.write(w.chunk, true)) return false;
    this.position = w.events[w.events.length - 1].pos;
    this.told = this.position;
    this.toldAt = now;
    return true;
  }

  /** Positions it passed by without an event (filtered out): pass them on as a bare id (cursorFrame). */
  passTo(pos: number, now = performance.now()): void {
    this.position = Math.max(this.position, pos);
    this.advanceCursor(now);
  }

  /** A bare id when the client has been sent no id for cursorMs and its position moved since. */
  advanceCursor(now = performance.now()): void {
    if (this.cursorMs === 0 || this.position <= this.told || now - this.toldAt < this.cursorMs) return;
    if (this.sink.write(cursorFrame(this.position), true)) {
      this.told = this.position;
      this.toldAt = now;
    }
  }

  /** The end-of-replay marker, once. */
  announce(now = performance.now()): void {
    if (this.announced) return;
    this.announced = true;
    if (this.sink.write(liveFrame(this.position), true)) {
      this.told = this.position;
      this.toldAt = now;
    }
  }
}
