// Owns what every push surface shows on the app (app.websub, app.rsscloud): its outbox, its retry schedule
// and the sweep of its expired subscriptions, so tests and commands reach each one the same way; and how
// one runs with the app (its outbox from ready to close, the sweep as a chore).
import type { FastifyInstance } from 'fastify';
import type { Outbox } from './outbox.js';
import { periodic } from '../queue/periodic.js';

export interface PushSurface<T, R, Timing> {
  worker: Outbox<T, R>;
  /** The retry schedule, read at each use. Tests shorten it (minutes of backoff would make a test wait an hour); nothing else should. */
  timing: Timing;
  /** Deletes expired subscriptions now (a chore does it every timing.sweepMs). */
  sweep(): Promise<number>;
}

/**
 * Runs a push surface with the app: its outbox from ready to close (requests still running `closeMs` after
 * the close began are left to their leases: claimed again after a restart), and the sweep of its expired
 * subscriptions every timing.sweepMs.
 */
export function runPushSurface<T, R>(app: FastifyInstance, name: string, s: PushSurface<T, R, { sweepMs: number }>, closeMs: number): void {
  app.addHook('onReady', async () => s.worker.start());
  periodic(app, {
    what: `${name}: the sweep of expired subscriptions`,
    everyMs: () => s.timing.sweepMs,
    run: () => s.sweep(),
    done: (n) => n > 0 && app.log.info({ expired: n }, `${name}: expired subscriptions deleted`),
  });
  app.addHook('onClose', async () => s.worker.close(closeMs));
}
