// Owns rssCloud as a Fastify resource (`app.rsscloud`): the REST routes and the XML-RPC methods
// (rssCloud.ping, rssCloud.pleaseNotify, rssCloud.hello), the notifications queued in the same transaction
// as every verification outcome that found a subscribed feed changed (a watcher of verification's feed
// changes, platform/feed-changes.ts: the one coupling point with verification), this instance's worker over that queue (woken after such an outcome,
// polling otherwise, stopped on close before the database), the sweep of expired subscriptions, and the
// metrics.
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Gauge } from 'prom-client';
import type { Config } from '../../platform/config.js';
import { Outbox } from '../../platform/outbox/outbox.js';
import { runPushSurface, type PushSurface } from '../../platform/outbox/surface.js';
import { politeHost } from '../../platform/fetch/polite.js';
import { queueGauge } from '../../platform/queue/queue-gauge.js';
import { outcomeCounter } from '../../platform/queue/outcome-counter.js';
import { canonicalAddress } from '../../platform/net/ip.js';
import { XmlRpcFault } from '../../intake/xmlrpc/parse.js';
import { RSSCLOUD_FAULT } from './answers.js';
import { DEFAULT_NOTIFY_TIMING, METRIC_HELP, NOTIFY_OUTCOMES, type NotifyTiming } from './outcomes.js';
import { Notifier } from './notifier.js';
import {
  claimNotifications,
  notificationQueueStats,
  queueNotifications,
  RSSCLOUD_NOTIFICATIONS,
  type Notification,
} from './notification-repository.js';
import { hasSubscriptions, recordAttempts, subscriptionStats, sweepExpired, type Attempt } from './subscription-repository.js';
import { parseNotify, rpcFields, type NotifyRequest } from './params.js';
import { pleaseNotify, type NotifyAnswer } from './subscribe.js';
import { pingResource } from './ping.js';
import { rsscloudRoutes } from './routes.js';
import { NOTIFY_REFUSALS, type NotifyRefusal } from './refusals.js';
import { MSG } from './answers.js';

declare module 'fastify' {
  interface FastifyInstance {
    rsscloud: PushSurface<Notification, Attempt, NotifyTiming> & { notifier: Notifier };
  }
}

/** rssCloud's subscription period: 25 hours (rsscloud-server's CT_SECS_RESOURCE_EXPIRE; subscribers renew every 24). */
export const LEASE_SEC = 25 * 3600;
/** How often an idle worker looks for notifications queued by other instances or coming due. */
const POLL_MS = 1000;

async function rsscloudPlugin(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts;
  const timing: NotifyTiming = { ...DEFAULT_NOTIFY_TIMING };

  const notifications = outcomeCounter(app.metrics, 'pingd_rsscloud_notifications_total', NOTIFY_OUTCOMES, METRIC_HELP.notifications);
  const requests = outcomeCounter(
    app.metrics,
    'pingd_rsscloud_subscribe_total',
    ['subscribed', ...Object.keys(NOTIFY_REFUSALS)],
    METRIC_HELP.requests,
  );
  new Gauge({
    name: 'pingd_rsscloud_subscriptions',
    help: 'Unexpired rssCloud subscriptions, read at scrape time.',
    registers: [app.metrics],
    async collect() {
      try {
        this.set((await subscriptionStats(app.db)).subscriptions);
      } catch {
        // The database is down: /metrics still answers with the rest.
      }
    },
  });
  queueGauge(app.metrics, 'pingd_rsscloud_queue', 'rssCloud notifications', () => notificationQueueStats(app.db));

  const notifier = new Notifier(app.fetcher, app.polite, {
    timeoutMs: config.WEBSUB_ANSWER_TIMEOUT_MS,
    answerMaxBytes: config.WEBSUB_ANSWER_MAX_BYTES,
    maxWaitMs: Math.max(2 * config.FETCH_HOST_INTERVAL_MS, 2000),
    timing,
    onOutcome: (o) => notifications.inc({ outcome: o }),
    log: app.log,
  });
  // Long enough for one request with its deadline and a few statements.
  const leaseSec = Math.ceil((2 * config.WEBSUB_ANSWER_TIMEOUT_MS) / 1000) + 10;
  const worker = new Outbox<Notification, Attempt>({
    db: app.db,
    leaseSec,
    table: RSSCLOUD_NOTIFICATIONS,
    concurrency: config.RSSCLOUD_CONCURRENCY,
    pollMs: POLL_MS,
    claim: async (limit) => {
      const batch = await claimNotifications(app.db, limit, leaseSec, notifier.busyHosts());
      // The batch's endpoint hosts are checked for a Retry-After block in one statement, not one each.
      await app.polite.reserve(batch.flatMap((n) => (n.subscription ? [politeHost(n.subscription.notifyUrl) ?? ''] : [])));
      return batch;
    },
    run: (n) => notifier.run(n),
    record: (tx, attempts) => recordAttempts(tx, attempts),
    onError: (err, n) =>
      app.log.warn({ err: { message: err.message }, notification: n?.id }, 'rsscloud notification failed; it is retried after its lease'),
  });

  // The coupling point with verification: queued in the outcome's own transaction, so a notification
  // promised by a committed outcome survives a crash; the worker is woken once the change is committed.
  app.verification.changes.watch({
    // Only a notice: rssCloud sends the feed's URL, not its entries, so no excerpt is cut for it.
    interest: async (q, feedId) => ((await hasSubscriptions(q, feedId)) ? 'notice' : 'none'),
    write: async (tx, change) => void (await queueNotifications(tx, change.feedId)),
  });
  // Woken by the same signal as the WebSub hub: a feed change committed (a ping's verification, a topic
  // check or a poll), not only a ping's `verified` outcome.
  app.verification.changes.onCommitted(() => worker.wake());

  // Each pleaseNotify makes requests (a feed fetched, the endpoint checked) while its client waits.
  let checking = 0;
  const subscribe = async (r: NotifyRequest, client: string | null): Promise<NotifyAnswer> => {
    if (checking >= config.RSSCLOUD_CONCURRENCY)
      return {
        ok: false,
        reason: 'busy',
        retryAfterSec: 5,
        msg: 'Too many subscriptions are being checked right now; please try again shortly.',
      };
    checking++;
    try {
      const a = await pleaseNotify(
        {
          db: app.db,
          probe: (url) => app.verification.probe(url),
          notifier,
          limits: {
            maxSubscriptions: config.RSSCLOUD_MAX_SUBSCRIPTIONS,
            maxPerHost: config.RSSCLOUD_MAX_PER_HOST,
            maxPerRequester: config.RSSCLOUD_MAX_PER_REQUESTER,
          },
          leaseSec: LEASE_SEC,
        },
        r,
        client,
      );
      if (a.ok) requests.inc({ outcome: 'subscribed' });
      return a;
    } finally {
      checking--;
    }
  };
  const refused = (reason: string) => requests.inc({ outcome: reason });

  await app.register(rsscloudRoutes, { maxUrls: config.RSSCLOUD_MAX_URLS, subscribe, refused });

  // XML-RPC on /RPC2, as rsscloud-server answers it: a boolean, or fault 4 with the reason.
  const fault = (msg: string) => new XmlRpcFault(RSSCLOUD_FAULT, msg);
  app.xmlrpcMethods.add('rssCloud.hello', {
    help: 'rssCloud.hello(): answers true (a client checking that the server speaks rssCloud).',
    signatures: [['boolean']],
    call: async () => true,
  });
  app.xmlrpcMethods.add('rssCloud.ping', {
    help: 'rssCloud.ping(url): the feed at url changed. Returns true once the ping is stored; a fault (code 4) says why not.',
    signatures: [['boolean', 'string']],
    call: async (params, req) => {
      if (params.length < 1) throw fault(MSG.notEnoughParams('ping'));
      if (params.length > 1) throw fault(MSG.tooManyParams('ping'));
      const p = params[0];
      const url = p.type === 'string' ? p.value : p.type === 'base64' ? new TextDecoder('utf-8').decode(p.value) : undefined;
      const r = await pingResource(app.pings, app.db, url, {
        addr: canonicalAddress(req.ip),
        userAgent: req.headers['user-agent'] ?? null,
      });
      if (!r.ok) throw fault(r.msg);
      return true;
    },
  });
  app.xmlrpcMethods.add('rssCloud.pleaseNotify', {
    help:
      'rssCloud.pleaseNotify(notifyProcedure, port, path, protocol, urlList[, domain]): tell http(s)://domain-or-your-address:port/path when a feed of urlList changes, for 25 hours. ' +
      'protocol is http-post or https-post (POST url=<feed>) or xml-rpc (call notifyProcedure(<feed>)). Returns true once subscribed; a fault (code 4) says why not.',
    signatures: [
      ['boolean', 'string', 'int', 'string', 'string', 'array'],
      ['boolean', 'string', 'int', 'string', 'string', 'array', 'string'],
    ],
    call: async (params, req) => {
      const refuse = (reason: NotifyRefusal, msg: string) => {
        refused(reason);
        return fault(msg);
      };
      const fields = rpcFields(params);
      if ('error' in fields) throw refuse('invalid', fields.error);
      const client = canonicalAddress(req.ip);
      const parsed = parseNotify(fields, client, config.RSSCLOUD_MAX_URLS);
      if (!parsed.ok) throw refuse('invalid', parsed.msg);
      const r = await subscribe(parsed.request, client);
      if (!r.ok) throw refuse(r.reason, r.msg);
      return true;
    },
  });

  const sweep = () => sweepExpired(app.db);
  const surface = { notifier, worker, timing, sweep };
  app.decorate('rsscloud', surface);
  runPushSurface(app, 'rsscloud', surface, config.WEBSUB_ANSWER_TIMEOUT_MS);
}

export default fp(rsscloudPlugin, {
  name: 'rsscloud',
  dependencies: ['db', 'fetch', 'metrics', 'pings', 'verification', 'xmlrpc-methods'],
});
