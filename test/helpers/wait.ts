// Owns waiting in tests: one bounded poll for a condition, so a test waits for the event it needs (a job
// settled, a queue drained, a later sentinel processed) instead of sleeping a fixed time, and a timeout
// says what was awaited and what was last seen.
import assert from 'node:assert/strict';

export interface WaitOptions {
  /** What is awaited, for the failure message: "the relay queue to drain" (a function: read when it fails). */
  what: string | (() => string);
  /** Give up after this long (default 15 s: generous, the machine may be busy; this is not a timing test). */
  timeoutMs?: number;
  /** Between two looks (default 20 ms). */
  intervalMs?: number;
  /** Called before each further look: e.g. wake a worker that would otherwise look once a second. */
  between?: () => void;
  /** An error from `fn` counts as "not yet" (a server still starting) instead of failing at once. */
  retryErrors?: boolean;
}

/** A value that ends the wait: anything but false, null and undefined. */
export type Met<T> = Exclude<T, false | null | undefined>;

/**
 * Calls `fn` until it returns a value other than false, null or undefined, and returns that value; fails
 * after `timeoutMs` naming `what` and the last value (or error) `fn` gave.
 */
export async function waitFor<T>(fn: () => T | Promise<T>, o: WaitOptions): Promise<Met<T>> {
  const timeoutMs = o.timeoutMs ?? 15_000;
  const intervalMs = o.intervalMs ?? 20;
  const deadline = performance.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      last = await fn();
      if (last !== false && last !== null && last !== undefined) return last as Met<T>;
    } catch (err) {
      if (!o.retryErrors) throw err;
      last = err;
    }
    if (performance.now() > deadline) {
      const what = typeof o.what === 'function' ? o.what() : o.what;
      assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${shown(last)}`);
    }
    o.between?.();
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

function shown(v: unknown): string {
  if (v instanceof Error) return `${v.name}: ${v.message}`;
  let s: string;
  try {
    s = JSON.stringify(v) ?? String(v);
  } catch {
    s = String(v);
  }
  return s.length > 500 ? `${s.slice(0, 500)}…` : s;
}
