// Owns a chore an instance repeats while it runs (a sweep of expired subscriptions, a round of polls): run
// every `everyMs` after the last run ended, from the app's start until it closes, a failure logged and the
// next run kept. One run at a time, so a slow database never piles them up.
import type { FastifyInstance } from 'fastify';

export interface Chore<T> {
  /** What it is, for the log ("websub: the sweep of expired subscriptions"). */
  what: string;
  everyMs: () => number;
  run(): Promise<T>;
  /** Told of each run's result (a count to log). */
  done?(result: T): void;
}

export function periodic<T>(app: FastifyInstance, chore: Chore<T>): void {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const tick = () => {
    chore
      .run()
      .then((r) => chore.done?.(r))
      .catch((err: Error) => app.log.warn({ err: { message: err.message } }, `${chore.what} failed`))
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, chore.everyMs()).unref();
      });
  };
  app.addHook('onReady', async () => {
    timer = setTimeout(tick, chore.everyMs()).unref();
  });
  app.addHook('onClose', async () => {
    stopped = true;
    clearTimeout(timer);
  });
}
