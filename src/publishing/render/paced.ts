// Owns spreading a dear render over ticks (issue 42: a tick's work in proportion to what changed, not to the
// hour). changes.xml lists every weblog of the hour and its `when` counts back from the rendering's
// `updated`, so every byte of it changes at every render: its cost is the hour's, whatever the reads save.
// Rendered from entries kept in memory (nothing left to read from the database), it goes on for one slice
// of RENDER_SLICE_MS per tick and waits at the end of a page for the next tick, so a tick's share of it stays the
// same however big the hour. The rendering is dated when it began (its entries are what was kept then) and
// published when its last slice ends.
import { PingdError } from '../../platform/errors.js';
import type { RenderOutcome } from './store-rendering.js';

/**
 * A document of fewer entries is rendered whole in its tick: it costs about a slice anyway, and a small
 * document is never left behind by a slow tick (a loaded machine).
 */
export const PACED_FROM_ENTRIES = 20_000;

/** Builds the render, given the page wrapper that stops at the gate and the time its slices took so far. */
export type PacedStart = (pace: <T>(pages: AsyncIterable<T>) => AsyncIterable<T>, activeMs: () => number) => Promise<RenderOutcome>;

export class PacedRender {
  private outcome: Promise<RenderOutcome> | null = null;
  private sliceEnd = 0;
  private sliceStart = 0;
  private spentMs = 0;
  /** Wakes the render parked at the gate: true goes on, false gives it up. */
  private resume: ((go: boolean) => void) | null = null;
  /** Tells the slice waiting on the render that it parked at the gate or ended. */
  private stopped: (() => void) | null = null;
  /** The render ended (published, found identical, or failed). */
  ended = false;

  /**
   * `prevId`: the rendering current when this one began; if another is published meanwhile (another instance
   * rendered), this one is out of date and is given up. `idleMs`: a render not continued for this long (this
   * instance no longer renders) gives itself up, so its compressors and rows do not wait forever.
   */
  constructor(
    readonly prevId: number | undefined,
    private readonly start: PacedStart,
    private readonly idleMs: number,
    private readonly sliceMs: number,
  ) {}

  /** Runs the render for one slice: its outcome when it ended in it, else `in_progress`. */
  async slice(): Promise<RenderOutcome> {
    if (this.ended) return this.settled();
    const stopped = new Promise<void>((r) => (this.stopped = r));
    this.sliceStart = performance.now();
    this.sliceEnd = this.sliceStart + this.sliceMs;
    if (!this.outcome) {
      this.outcome = this.start(
        (pages) => this.pace(pages),
        () => this.spentMs + (this.resume ? 0 : performance.now() - this.sliceStart),
      ).finally(() => {
        this.ended = true;
        this.stopped?.();
      });
      this.outcome.catch(() => undefined); // the slice that awaits it reports the failure
    } else this.resume?.(true);
    await stopped;
    return this.ended ? this.settled() : 'in_progress';
  }

  /** Gives the render up (its rendering is discarded) and waits until it stopped. */
  async abandon(): Promise<void> {
    this.resume?.(false);
    await this.outcome?.catch(() => undefined);
    this.ended = true;
  }

  private settled(): Promise<RenderOutcome> {
    if (!this.outcome) throw new PingdError('PUBLISH_RENDER_FAILED', 'a paced render ended before it began');
    return this.outcome;
  }

  /**
   * `pages`, waiting for the next slice before a page once this one is spent (a page at least per slice).
   * The next page is asked for first, so the last one never waits for a tick of its own.
   */
  private async *pace<T>(pages: AsyncIterable<T>): AsyncIterable<T> {
    let inSlice = 0;
    for await (const page of pages) {
      if (inSlice > 0 && performance.now() >= this.sliceEnd) {
        await this.gate();
        inSlice = 0;
      }
      inSlice++;
      yield page;
    }
  }

  private gate(): Promise<void> {
    this.spentMs += performance.now() - this.sliceStart;
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => this.resume?.(false), this.idleMs);
      timer.unref();
      this.resume = (go) => {
        clearTimeout(timer);
        this.resume = null;
        if (go) resolve();
        else reject(new PingdError('PUBLISH_RENDER_FAILED', 'a paced render was given up before its last slice'));
      };
      const stopped = this.stopped;
      this.stopped = null;
      stopped?.();
    });
  }
}
