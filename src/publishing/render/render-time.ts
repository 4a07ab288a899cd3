// Owns the time decisions of a render, as pure functions of the database clock: when a render renders as
// of, the whole second a document is dated, the cursor a rendering may claim, and which hours can be closed.
import type { Clock } from '../../platform/db/clock.js';

/**
 * The current hour, and a live document with a maxAgeSec, are re-rendered every tick until one rendering
 * takes this long; then ~10% of the time (a live document: no later than its maxAgeSec allows).
 */
export const THROTTLE_FROM_MS = 1000;

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

/**
 * Last-Modified must move forward with every new rendering and never be ahead of the clock: when the
 * previous rendering is from this same second, the render is dated the next one, and waits for it (manual
 * renders only; the schedule is at most once a second). Injected times (tests) are moved, not waited for.
 */
export function nextSecond(
  prev: { updatedMs: number } | undefined,
  t: RenderTime,
): { nowUs: number; updatedMs: number; waitMs: number } | null {
  if (!prev || prev.updatedMs < wholeSecond(t.nowUs)) return null;
  const next = prev.updatedMs + 1000;
  const waitMs = next - t.nowUs / 1000;
  return {
    nowUs: Math.max(t.nowUs, next * 1000),
    updatedMs: next,
    waitMs: !t.injected && waitMs > 0 && waitMs <= 1100 ? Math.ceil(waitMs) : 0,
  };
}

/** A render's last rendering, as far as throttling goes: when it was made, dated, and how long it took. */
export interface LastRender {
  createdUs: number;
  updatedMs: number;
  renderMs: number;
}

/**
 * Whether a dear live document (its last render took `fromMs` or more) may wait for a later tick: it was
 * made less than ten renders' time ago (so it takes at most ~10% of the time), and, rendered a tick or two
 * later instead (the next tick is skipped while this one still renders), the new rendering is out before
 * the current one is `maxAgeSec` old (now − its `updated`, the age crawlers see).
 */
export function liveMayWait(prev: LastRender, nowUs: number, maxAgeSec: number, cadenceSec: number, fromMs: number): boolean {
  if (prev.renderMs < fromMs) return false;
  const nowMs = nowUs / 1000;
  if (nowMs - prev.createdUs / 1000 >= 10 * prev.renderMs) return false;
  return nowMs - prev.updatedMs + 2 * cadenceSec * 1000 + prev.renderMs < maxAgeSec * 1000;
}
