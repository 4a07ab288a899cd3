// Owns the intake path as a Fastify resource (`app.pings`): the group-commit batcher and the ping service,
// drained on shutdown so that every ping already queued is committed (or refused) before the database
// closes. Other plugins screen pings through app.pings.addScreen and observe them through onOutcome/onBatch.
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../platform/config.js';
import { PingBatcher } from './ping-batcher.js';
import { PingService } from './ping-service.js';
import { UrlScorer } from '../../spam/intake-score.js';

/**
 * The options of a route that takes pings: its answer times go to app.pings.onAnswered (the status page's
 * intake latency). A route hook, not a global one: the polled documents never run it.
 */
export function intakeRoute(app: FastifyInstance): {
  onResponse: (req: unknown, reply: { elapsedTime: number }, done: () => void) => void;
} {
  return {
    onResponse: (_req, reply, done) => {
      app.pings.answered(reply.elapsedTime);
      done();
    },
  };
}

declare module 'fastify' {
  interface FastifyInstance {
    pings: PingService;
  }
}

async function pingPlugin(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts;
  let scorer: UrlScorer | null = null;
  if (config.SPAM_FILTER !== 'off') {
    scorer = new UrlScorer();
    // The dictionary loads here, at start, not on the first ping.
    scorer.preload();
  }
  const batcher = new PingBatcher(app.db, {
    minIntervalSec: config.PING_MIN_INTERVAL,
    maxBatch: config.BATCH_MAX,
    maxInFlight: app.db.kind === 'pglite' ? 1 : Math.max(1, Math.min(4, config.DB_POOL_MAX - 1)),
    timeoutMs: config.DB_TIMEOUT_MS,
    maxQueue: 50_000,
    queueVerification: config.VERIFY_PINGS !== 'off',
    spam: scorer && { scorer, hold: config.SPAM_FILTER === 'hold', threshold: config.SPAM_THRESHOLD },
    onError: (err) => app.log.error({ err: { message: err.message } }, 'ping batch failed'),
    log: app.log,
  });
  app.decorate('pings', new PingService(batcher, app.db, config.PING_MIN_INTERVAL, app.log));
  // onClose hooks run in reverse order of registration: this one (registered after the db plugin)
  // drains the queue before the database closes, and after the server stopped taking requests.
  app.addHook('onClose', async () => {
    await batcher.drain();
  });
}

export default fp(pingPlugin, { name: 'pings', dependencies: ['db'] });
