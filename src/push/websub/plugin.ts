// Owns the WebSub hub as a Fastify resource (`app.websub`): the routes, this instance's worker over the
// hub's durable queue (woken when work is queued here, polling otherwise, stopped on close before the
// database), the fan-out of each publication to its subscribers, the sweep of expired leases, and the
// hub's metrics.
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge } from 'prom-client';
import { ConfigError, type Config } from '../../platform/config.js';
import { Outbox } from '../../platform/outbox/outbox.js';
import { runPushSurface, type PushSurface } from '../../platform/outbox/surface.js';
import { politeHost } from '../../platform/fetch/polite.js';
import { Hub } from './hub.js';
import { DEFAULT_TIMING, DELIVERY_OUTCOMES, METRIC_HELP, VERIFICATION_OUTCOMES, type HubTiming } from './outcomes.js';
import { websubRoutes } from './routes.js';
import { claimTasks, queuePoll, queueTopicChecks, taskQueueStats, WEBSUB_TASKS, type Task } from './task-repository.js';
import {
  countForCap,
  countTopics,
  recordDeliveries,
  subscriptionCounts,
  sweepExpired,
  type DeliveryRecord,
} from './subscription-repository.js';
import { feedSubscribed, pollCandidates, pruneChanges, queueChange } from './change-repository.js';
import { pollDue } from './poll.js';
import { RateMeter } from '../../platform/queue/rate-meter.js';
import { queueGauge } from '../../platform/queue/queue-gauge.js';
import { outcomeCounter } from '../../platform/queue/outcome-counter.js';
import { periodic } from '../../platform/queue/periodic.js';
import { SubscriptionTally } from './subscription-tally.js';
import { WEBSUB_REFUSAL_STATUS } from './refusals.js';
import { RefusalMemory } from './refusal-memory.js';
import { publishTopics } from '../../intake/websub/publish.js';

declare module 'fastify' {
  interface FastifyInstance {
    websub: PushSurface<Task, DeliveryRecord, HubTiming> & {
      hub: Hub;
      /** Queues the feed-topic polls due now (WEBSUB_POLL_INTERVAL; a chore does it every min(interval, 60 s)). */
      pollRound(): Promise<number>;
      /** Deliveries that succeeded in this instance over the last minute. */
      deliveriesPerMinute(): number;
    };
  }
}

/** How often an idle worker looks for tasks queued by other instances or coming due. */
const POLL_MS = 1000;
/** Feed topics one poll round queues at most (the rest wait for the next round). */
const POLL_BATCH = 100;

async function websubPlugin(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts;
  if (!(config.WEBSUB_LEASE_MIN <= config.WEBSUB_LEASE_DEFAULT && config.WEBSUB_LEASE_DEFAULT <= config.WEBSUB_LEASE_MAX)) {
    throw new ConfigError(
      `WebSub leases: WEBSUB_LEASE_MIN (${config.WEBSUB_LEASE_MIN}) ≤ WEBSUB_LEASE_DEFAULT (${config.WEBSUB_LEASE_DEFAULT}) ≤ WEBSUB_LEASE_MAX (${config.WEBSUB_LEASE_MAX}) must hold`,
    );
  }
  const timing: HubTiming = { ...DEFAULT_TIMING };
  const paths = app.documents.list().map((d) => d.path);

  const verifications = outcomeCounter(app.metrics, 'pingd_websub_verifications_total', VERIFICATION_OUTCOMES, METRIC_HELP.verifications);
  const deliveries = outcomeCounter(app.metrics, 'pingd_websub_deliveries_total', DELIVERY_OUTCOMES, METRIC_HELP.deliveries);
  const perMinute = new RateMeter(60_000);
  const checks = new Counter({
    name: 'pingd_websub_topic_checks_total',
    help: 'Fetches of feed topics for the hub, by verification outcome and why (subscribe: a confirmed new subscription; poll: WEBSUB_POLL_INTERVAL).',
    labelNames: ['outcome', 'why'] as const,
    registers: [app.metrics],
  });
  queueGauge(app.metrics, 'pingd_websub_queue', 'WebSub tasks (verifications, denials, checks, deliveries)', () => taskQueueStats(app.db));
  const refusals = outcomeCounter(
    app.metrics,
    'pingd_websub_refusals_total',
    Object.keys(WEBSUB_REFUSAL_STATUS),
    METRIC_HELP.refusals,
    'reason',
  );
  new Gauge({
    name: 'pingd_websub_subscriptions',
    help: 'WebSub subscriptions by state (active, failing; pending: waiting for the verification of intent), read at scrape time.',
    labelNames: ['state'] as const,
    registers: [app.metrics],
    async collect() {
      try {
        const c = await subscriptionCounts(app.db);
        this.set({ state: 'active' }, c.active);
        this.set({ state: 'failing' }, c.failing);
        this.set({ state: 'pending' }, c.pending);
      } catch {
        // The database is down: /metrics still answers with the rest.
      }
    },
  });

  const hub = new Hub(app.db, app.fetcher, app.polite, app.publications, {
    timeoutMs: config.WEBSUB_ANSWER_TIMEOUT_MS,
    answerMaxBytes: config.WEBSUB_ANSWER_MAX_BYTES,
    hostConcurrency: config.WEBSUB_HOST_CONCURRENCY,
    publicUrl: config.PUBLIC_URL,
    timing,
    onVerification: (o) => verifications.inc({ outcome: o }),
    onDelivery: (o) => {
      deliveries.inc({ outcome: o });
      if (o === 'delivered') perMinute.count();
    },
    check: (url) => app.verification.check(url),
    onCheck: (outcome, why) => checks.inc({ outcome, why }),
    log: app.log,
  });
  // Long enough for one request with its deadline and a few statements; the task of an instance that
  // died is claimed again once it runs out.
  const leaseSec = Math.ceil((2 * Math.max(config.FETCH_TIMEOUT_MS, config.WEBSUB_ANSWER_TIMEOUT_MS)) / 1000) + 10;
  const worker = new Outbox<Task, DeliveryRecord>({
    db: app.db,
    leaseSec,
    table: WEBSUB_TASKS,
    concurrency: config.WEBSUB_CONCURRENCY,
    pollMs: POLL_MS,
    claim: async (limit) => {
      const tasks = await claimTasks(app.db, limit, leaseSec, hub.busyHosts(), config.WEBSUB_HOST_CONCURRENCY);
      // The batch's callback hosts are checked for a Retry-After block in one statement, not one each.
      await app.polite.reserve(
        tasks.flatMap((t) => (t.kind === 'deliver' && t.subscription ? [politeHost(t.subscription.callback) ?? ''] : [])),
      );
      return tasks;
    },
    run: (task) => hub.run(task),
    record: (tx, records) => recordDeliveries(tx, records, timing.failAfter),
    onError: (err, task) =>
      app.log.warn({ err: { message: err.message }, task: task?.id }, 'websub task failed; it is retried after its lease'),
  });

  // The renderer's instance hears of each new rendering: queue it for the subscribers of that document.
  app.publications.onPublished((path) => {
    if (!paths.includes(path)) return;
    hub
      .published(path)
      .then((n) => {
        if (n > 0) worker.wake();
      })
      .catch((err: Error) => app.log.warn({ err: { message: err.message }, path }, 'websub: could not queue deliveries'));
  });

  // The open hub: a subscribed feed's new entries, cut down by verification's reading thread, are stored
  // once and queued for every subscriber in the transaction that commits the verification's outcome.
  app.verification.changes.watch({
    interest: async (q, feedId) => ((await feedSubscribed(q, feedId)) ? 'excerpt' : 'none'),
    write: async (tx, change) => {
      if (!change.excerpt) return;
      await queueChange(tx, change.feedId, { ...change.excerpt, entries: change.entries.length });
    },
  });
  app.verification.changes.onCommitted(() => worker.wake());

  const sweep = async () => {
    const n = await sweepExpired(app.db);
    await pruneChanges(app.db);
    return n;
  };
  /** Queues the polls that are due (WEBSUB_POLL_INTERVAL), a bounded number per round. */
  const pollRound = async (): Promise<number> => {
    const due = (await pollCandidates(app.db, config.WEBSUB_POLL_INTERVAL, POLL_BATCH)).filter((f) =>
      pollDue(f, config.WEBSUB_POLL_INTERVAL),
    );
    let queuedPolls = 0;
    for (const f of due) if (await queuePoll(app.db, f.feedId, f.topic)) queuedPolls++;
    if (queuedPolls > 0) worker.wake();
    return queuedPolls;
  };
  app.decorate('websub', { hub, worker, timing, sweep, pollRound, deliveriesPerMinute: () => perMinute.inWindow() });
  await app.register(websubRoutes, {
    db: app.db,
    paths,
    publicUrl: config.PUBLIC_URL,
    port: config.PORT,
    lease: { min: config.WEBSUB_LEASE_MIN, max: config.WEBSUB_LEASE_MAX, default: config.WEBSUB_LEASE_DEFAULT },
    limits: {
      maxSubscriptions: config.WEBSUB_MAX_SUBSCRIPTIONS,
      maxPerHost: config.WEBSUB_MAX_PER_HOST,
      maxPending: config.WEBSUB_MAX_PENDING,
      maxTopicsPerHost: config.WEBSUB_MAX_TOPICS_PER_HOST,
      maxPerTopicHost: config.WEBSUB_MAX_PER_TOPIC_HOST,
      maxTopics: config.WEBSUB_MAX_TOPICS,
    },
    tally: new SubscriptionTally(() => countForCap(app.db), config.WEBSUB_MAX_SUBSCRIPTIONS),
    topicTally: new SubscriptionTally(() => countTopics(app.db), config.WEBSUB_MAX_TOPICS),
    queued: () => worker.wake(),
    refused: (r) => refusals.inc({ reason: r }),
    refusalMemory: new RefusalMemory(),
    // The other feeds of a weblog named in one publish: checked when they have subscribers (the ping
    // verifies the first), queued in the ping's own transaction.
    publish: async (topics, client) => {
      let checks = 0;
      const a = await publishTopics(app.pings, app.db, topics, client, (others) => async (tx) => {
        checks += await queueTopicChecks(tx, others);
      });
      if (checks > 0) worker.wake();
      return a;
    },
    published: (ms) => app.pings.answered(ms),
    log: app.log,
    adminToken: config.ADMIN_TOKEN,
  });

  runPushSurface(app, 'websub', app.websub, Math.max(config.FETCH_TIMEOUT_MS, config.WEBSUB_ANSWER_TIMEOUT_MS));
  if (config.WEBSUB_POLL_INTERVAL > 0)
    periodic(app, {
      what: 'websub: the poll of feed topics',
      everyMs: () => Math.min(config.WEBSUB_POLL_INTERVAL, 60) * 1000,
      run: pollRound,
    });
}

export default fp(websubPlugin, { name: 'websub', dependencies: ['db', 'fetch', 'metrics', 'pings', 'publishing', 'verification'] });
