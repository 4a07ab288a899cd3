// Owns what every push surface shows on the app (app.websub, app.rsscloud): its outbox, its retry schedule
// and the sweep of its expired subscriptions, so tests and commands reach each one the same way.
import type { Outbox } from './outbox.js';

export interface PushSurface<T, R, Timing> {
  worker: Outbox<T, R>;
  /** The retry schedule, read at each use. Tests shorten it (minutes of backoff would make a test wait an hour); nothing else should. */
  timing: Timing;
  /** Deletes expired subscriptions now (a chore does it every timing.sweepMs). */
  sweep(): Promise<number>;
}
