// Owns when renders happen in a server: node-cron on RENDER_CRON (UTC, never overlapping), a first render
// at start (documents exist before the first tick, hours missed while down get closed), and the cadence
// derived from the expression (the max-age of live documents).
import cron, { type ScheduledTask } from 'node-cron';
import type { Renderer } from './renderer.js';

export interface ScheduleLogger {
  debug(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** Seconds between two runs of a cron expression (the smallest gap among the next ones), at least 1. */
export function cadenceSeconds(expr: string): number {
  let task: ScheduledTask;
  try {
    task = cron.createTask(expr, () => undefined, { timezone: 'UTC' });
  } catch (err) {
    throw new Error(`RENDER_CRON ${JSON.stringify(expr)} is not a valid cron expression: ${(err as Error).message}`, { cause: err });
  }
  try {
    const runs = task.getNextRuns(30).map((d) => d.getTime());
    let gap = Infinity;
    for (let i = 1; i < runs.length; i++) gap = Math.min(gap, runs[i] - runs[i - 1]);
    return Number.isFinite(gap) ? Math.max(1, Math.round(gap / 1000)) : 60;
  } finally {
    void task.destroy();
  }
}

/** Starts rendering on `expr`; returns the function that stops the schedule (a render in progress finishes). */
export function scheduleRenders(renderer: Renderer, opts: { cron: string; cadenceSec: number; log: ScheduleLogger }): () => Promise<void> {
  let running: Promise<void> | null = null;
  let missed = false;
  let stopped = false;
  const tick = (reason: string): Promise<void> => {
    // A tick that comes while this schedule's previous one still renders (the open hour's archive is read
    // whole and grows with the hour) runs once as soon as it ends, instead of being dropped: dropped, the live
    // documents waited for the tick after, 2 × RENDER_CRON and more (soak, embedded database: 21 s).
    if (running) {
      missed = true;
      return running;
    }
    running = renderer
      // Half a cadence at most on catching up with finished hours, so live documents stay fresh.
      .tick({ skipIfBusy: true, closeBudgetMs: (opts.cadenceSec * 1000) / 2 })
      .then((r) => {
        if (r && (r.rendered.length || r.failed.length)) {
          opts.log.debug(
            { reason, rendered: r.rendered.map((x) => `${x.path}#${x.id}`), closedHours: r.closedHours, failed: r.failed },
            'render tick',
          );
        }
      })
      .catch((err: Error) => opts.log.error({ err: { message: err.message } }, 'render tick failed'))
      .finally(() => {
        running = null;
        if (missed && !stopped) {
          missed = false;
          void tick('missed');
        }
      });
    return running;
  };
  const task = cron.schedule(opts.cron, () => void tick('schedule'), { timezone: 'UTC', noOverlap: true, name: 'pingd-render' });
  void tick('start');
  return async () => {
    stopped = true;
    await task.destroy();
  };
}
