// Owns the time decisions of a render, as pure functions of the database clock: when a render renders as
// of, the whole second a document is dated, the cursor a rendering may claim, and which hours can be closed.
import type { Clock } from '../../platform/db/clock.js';

/** When a render happens: the time it renders as of (the database clock unless a test injected one). */
export interface RenderTime {
  nowUs: number;
  injected: boolean;
  clock: Clock;
}

export function renderTime(clock: Clock, now?: Date): RenderTime {
  return { nowUs: now ? now.getTime() * 1000 : clock.nowUs, injected: Boolean(now), clock };
}

/** The whole second (ms) a rendering at `us` is dated: Last-Modified and `updated` carry seconds. */
export function wholeSecond(us: number): number {
  return Math.floor(us / 1_000_000) * 1000;
}

/**
 * The cursor of a rendering covering pings up to `toUs`: no later than the oldest transaction still open
 * (a ping it writes is stamped with its start but visible only at commit), so a delta from this rendering
 * cannot miss a ping that commits later with an earlier stamp.
 */
export function cursorFor(t: RenderTime, toUs: number): number {
  return Math.min(t.clock.nowUs, t.clock.oldestOpenUs ?? Infinity, toUs);
}

/** Hours ending at or before this (µs) can be closed: no transaction that could still add a ping to them is open. */
export function closeLimitUs(t: RenderTime): number {
  return Math.min(t.clock.nowUs, t.clock.oldestOpenUs ?? Infinity, t.nowUs);
}
