// Owns verification as a Fastify resource (`app.verification`): the verifier and this instance's worker
// (started unless VERIFY_PINGS=off, woken by every ping this instance accepts, stopped on close before the
// database), its metrics, and GET /api/weblogs, what pingd knows of a weblog and what it saw last time.
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Counter } from 'prom-client';
import { queueGauge } from '../platform/queue/queue-gauge.js';
import { outcomeCounter } from '../platform/queue/outcome-counter.js';
import { RateMeter } from '../platform/queue/rate-meter.js';
import type { Config } from '../platform/config.js';
import { statusClass } from './manners.js';
import { OUTCOMES, type Outcome } from '../platform/outcomes.js';
import { claimVerifyJobs, verifyQueueStats, type Job } from './job-repository.js';
import { Verifier } from './verifier.js';
import { FeedProbe, type ProbeResult } from './probe.js';
import { DocumentReader } from './documents.js';
import { ownEndpoints } from './names-pingd.js';
import { QueueWorker } from '../platform/queue/worker.js';
import { weblogRoutes } from './routes.js';
import { FeedChanges, type FeedCheck } from '../platform/feed-changes.js';

export type SettledListener = (outcome: Outcome, settled: number) => void;

declare module 'fastify' {
  interface FastifyInstance {
    verification: {
      verifier: Verifier;
      /** The worker threads fetched documents are read on. */
      documents: DocumentReader;
      worker: QueueWorker<Job> | undefined;
      /**
       * Registers a listener told after outcomes were committed (the stream stamps and sends them): the
       * outcome and how many pings' jobs it settled.
       */
      onSettled(listener: SettledListener): void;
      /** "This feed changed with these new entries": watchers queue work in the outcome's transaction. */
      changes: FeedChanges;
      /** Fetches a feed no ping asked about (a WebSub topic), with verification's manners and state. */
      check(url: string): Promise<FeedCheck>;
      /** Whether a URL is a feed pingd can fetch, asked once through verification's manners (probe.ts). */
      probe(url: string): Promise<ProbeResult>;
    };
  }
}

/** How often an idle worker looks for jobs queued by other instances or coming due. */
const POLL_MS = 1000;
/**
 * Accepted pings per second above which verification yields to intake (worker.ts, intakeBusy). Well
 * above what one instance verifies (~100/s measured, bench/verify.ts) and far above a busy day's average:
 * a burst this size is met at full speed, and its verifications follow when it ends.
 */
const YIELD_RATE = 300;

/** What each outcome counter counts (its HELP line on /metrics). */
const HELP = {
  verifications: 'Verifications finished, by outcome (each may settle several pings of one weblog).',
};

async function verificationPlugin(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts;
  const registry = app.metrics;
  const verifications = outcomeCounter(registry, 'pingd_verifications_total', OUTCOMES, HELP.verifications);
  const fetches = new Counter({
    name: 'pingd_verify_fetches_total',
    help: 'Requests made by verification, by HTTP status class (none: no answer).',
    labelNames: ['class'] as const,
    registers: [registry],
  });
  const bytes = new Counter({
    name: 'pingd_verify_fetched_bytes_total',
    help: 'Bytes of feeds and pages read by verification (decompressed).',
    registers: [registry],
  });
  queueGauge(registry, 'pingd_verify_queue', 'Verification jobs', () => verifyQueueStats(app.db));

  const hosts = app.polite;
  const documents = new DocumentReader({
    threads: config.VERIFY_PARSE_THREADS,
    budgetMs: config.VERIFY_PARSE_BUDGET_MS,
    memoryMb: config.VERIFY_PARSE_MEMORY_MB,
    maxWaiting: config.VERIFY_CONCURRENCY,
    own: ownEndpoints(config.PUBLIC_URL),
    onError: (err) =>
      app.log.error(
        { err: { message: err.message } },
        'a document-reading thread failed; its documents are read again when their jobs are retried',
      ),
  });
  new Counter({
    name: 'pingd_verify_documents_over_budget_total',
    help: 'Fetched documents whose reading was stopped (too_complex), by what ran out: time or memory.',
    labelNames: ['resource'] as const,
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ resource: 'time' }, documents.overBudget.time);
      this.inc({ resource: 'memory' }, documents.overBudget.memory);
    },
  });
  const changes = new FeedChanges(app.log);
  const verifier = new Verifier(
    app.db,
    app.fetcher,
    hosts,
    documents,
    { maxBytes: config.FETCH_MAX_BYTES, timeoutMs: config.FETCH_TIMEOUT_MS, feedIntervalSec: config.VERIFY_FEED_INTERVAL },
    (r) => {
      fetches.inc({ class: r.status === null ? 'none' : statusClass(r.status) });
      bytes.inc(r.bytes);
    },
    changes,
  );

  let worker: QueueWorker<Job> | undefined;
  const settledListeners: SettledListener[] = [];
  if (config.VERIFY_PINGS !== 'off') {
    // A lease long enough for the slowest verification (a homepage and a feed, each with its deadline, and
    // a few statements); a job whose instance died is claimed again once it runs out.
    const leaseSec = Math.ceil((2 * config.FETCH_TIMEOUT_MS) / 1000) + 10;
    const intake = new RateMeter();
    const w = new QueueWorker<Job>({
      concurrency: config.VERIFY_CONCURRENCY,
      pollMs: POLL_MS,
      claim: (limit) => claimVerifyJobs(app.db, limit, leaseSec),
      run: async (job) => {
        const r = await verifier.run(job);
        if (r.kind === 'done' && r.report.settled > 0) {
          verifications.inc({ outcome: r.report.outcome });
          for (const l of settledListeners) l(r.report.outcome, r.report.settled);
          app.log.debug({ weblog: job.weblogUrl, ping: job.pingId, ...r.report }, 'verified');
        } else if (r.kind === 'deferred')
          app.log.debug({ weblog: job.weblogUrl, ping: job.pingId, until: r.until }, 'verification deferred');
        return r.kind;
      },
      intakeBusy: () => intake.perSecond() >= YIELD_RATE,
      onError: (err, job) =>
        app.log.warn({ err: { message: err.message }, ping: job?.pingId }, 'verification failed; the job is retried after its lease'),
    });
    worker = w;
    app.pings.onOutcome((_m, r) => {
      if (!r.ok) return;
      intake.count();
      w.wake();
    });
    app.addHook('onReady', async () => w.start());
    app.addHook('onClose', async () => {
      // Jobs still running after one fetch deadline are left to their leases (claimed again after a restart).
      await w.close(config.FETCH_TIMEOUT_MS);
    });
  }
  // After the worker: a job still reading a document when it closes gets its rejection and is claimed again.
  app.addHook('onClose', async () => documents.close());
  // A request waits for the probe: at most two host gaps for the feed's host's turn.
  const prober = new FeedProbe(app.db, app.fetcher, hosts, documents, {
    maxBytes: config.FETCH_MAX_BYTES,
    timeoutMs: config.FETCH_TIMEOUT_MS,
    maxWaitMs: Math.max(2 * config.FETCH_HOST_INTERVAL_MS, 2000),
  });
  app.decorate('verification', {
    verifier,
    documents,
    worker,
    onSettled: (l: SettledListener) => void settledListeners.push(l),
    changes,
    check: (url: string) => verifier.check(url),
    probe: (url: string) => prober.probe(url),
  });
  await app.register(weblogRoutes);
}

export default fp(verificationPlugin, { name: 'verification', dependencies: ['metrics', 'db', 'fetch', 'pings'] });
