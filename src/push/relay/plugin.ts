// Owns the relay as a Fastify resource (`app.relay`): the targets from RELAY_TARGETS / RELAY_FILE, this
// instance's deriver (woken by accepted pings) and worker over the relay's jobs (the shared outbox runner,
// with the relay's own claim and outcome SQL: its jobs stay as history, with a state column; stopped on
// close before the database, its last outcomes written), and the relay's metrics. At start it dead-letters the jobs left
// waiting for targets it does not have (with no targets, that is all it does).
import { redactUrl } from '../../platform/redact.js';
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Counter } from 'prom-client';
import { queueGauge } from '../../platform/queue/queue-gauge.js';
import { ConfigError, type Config } from '../../platform/config.js';
import { Outbox } from '../../platform/outbox/outbox.js';
import { PINGD_VERSION } from '../../platform/fetch/user-agent.js';
import { RateMeter } from '../../platform/queue/rate-meter.js';
import { claimRelayJobs, relayQueueStats, type RelayJob } from './job-repository.js';
import { ensureCursor, type RelayRule } from './derive-repository.js';
import { reconcileQueues, settleUnconfigured, syncTargets } from './target-repository.js';
import { DEFAULT_RELAY_TIMING, Relay, type RelayRecord, type RelayTiming } from './relay.js';
import { RelaySender, relayUserAgent } from './sender.js';
import { loadTargets, type RelayTarget } from './targets.js';
import type { SafeFetcher } from '../../platform/fetch/safe-fetch.js';

/** The targets whose address the fetcher's policy refuses (a name not resolved within 2 s is left out). */
export async function refusedTargets(
  urls: readonly string[],
  fetcher: SafeFetcher,
): Promise<{ url: string; address: string; range: string }[]> {
  const out: { url: string; address: string; range: string }[] = [];
  for (const url of urls) {
    const r = await fetcher.refusal(url);
    if (r) out.push({ url, ...r });
  }
  return out;
}

declare module 'fastify' {
  interface FastifyInstance {
    relay: {
      targets: readonly RelayTarget[];
      /** Undefined when no target is configured. */
      relay: Relay | undefined;
      worker: Outbox<RelayJob, RelayRecord> | undefined;
      /** The retry and breaker schedule, read at each use; tests shorten it. */
      timing: RelayTiming;
    };
  }
}

/** Accepted pings per second above which the relay yields to intake (as verification does). */
const YIELD_RATE = 300;
/** Most jobs of one target one claim takes. */
const PER_TARGET_CLAIM = 50;
/** Jobs held per request slot (RELAY_CONCURRENCY): claimed ahead, so one claim serves many requests. */
const HAND_PER_SLOT = 4;
/** Outcomes that make a batch worth writing at once, without waiting timing.flushMs for more. */
const FLUSH_AT = 200;

export const RELAY_OUTCOMES = ['delivered', 'refused', 'failed', 'dead', 'deferred'] as const;

async function relayPlugin(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts;
  const { targets, self } = loadTargets(config);
  // A target as it may be shown (metrics labels, log lines): RELAY_TARGETS is secret in the config table,
  // and a target's user, password or query token must not reach an open /metrics or a log shipper.
  const labels = new Map<string, string>();
  const shown = (url: string): string => labels.get(url) ?? (labels.set(url, redactUrl(url)), labels.get(url)!);
  const timing: RelayTiming = { ...DEFAULT_RELAY_TIMING };
  for (const url of self) app.log.warn({ target: redactUrl(url) }, 'relay: a target is this server itself (PUBLIC_URL); it is left out');
  // Decided by this instance's own targets, at its start: the jobs of a target it does not have would
  // otherwise wait for ever (no instance claims a target it does not know), counted in the queue's depth and
  // oldest age. An instance still running with the target keeps relaying its new pings until it restarts.
  const settle = async () => {
    for (const { target, n } of await settleUnconfigured(
      app.db,
      targets.map((t) => t.url),
    ))
      app.log.warn(
        { target: shown(target), jobs: n },
        `relay: target ${shown(target)} is not configured (not in RELAY_TARGETS / RELAY_FILE): its ${n} waiting jobs are dead letters now`,
      );
  };
  if (targets.length === 0) {
    app.decorate('relay', { targets, relay: undefined, worker: undefined, timing });
    // Best effort without targets: a server that relays nothing must still start with its database away
    // or its migrations pending (serve --no-migrate); the next start settles what is left.
    app.addHook('onReady', async () => {
      await settle().catch((err: unknown) =>
        app.log.warn(
          { err: { message: (err as Error).message } },
          'relay: the jobs of targets no longer configured are settled at the next start',
        ),
      );
    });
    return;
  }
  if (config.RELAY_ONLY_VERIFIED && config.VERIFY_PINGS === 'off')
    throw new ConfigError('RELAY_ONLY_VERIFIED=true needs verification: VERIFY_PINGS must be mark or require');
  const rule: RelayRule = config.VERIFY_PINGS === 'require' || config.RELAY_ONLY_VERIFIED ? 'require' : 'listed';

  const relays = new Counter({
    name: 'pingd_relay_total',
    help: "Relay requests by target and outcome (delivered: flerror 0; refused: flerror 1; failed: retried; dead: out of attempts; deferred: put back for the target's turn).",
    labelNames: ['target', 'outcome'] as const,
    registers: [app.metrics],
  });
  for (const t of targets) for (const o of RELAY_OUTCOMES) relays.inc({ target: shown(t.url), outcome: o }, 0);
  const skipped = new Counter({
    name: 'pingd_relay_skipped_total',
    help: "Relays not sent, by target and reason (dropped: a waiting weblog dropped because the target's queue held RELAY_QUEUE_MAX, the stalest first; suppressed: a ping of a weblog relayed to the target within RELAY_LOOP_WINDOW), as this instance derived them.",
    labelNames: ['target', 'reason'] as const,
    registers: [app.metrics],
  });
  for (const t of targets) for (const r of ['dropped', 'suppressed']) skipped.inc({ target: shown(t.url), reason: r }, 0);
  queueGauge(app.metrics, 'pingd_relay_queue', 'Relay jobs', () => relayQueueStats(app.db));

  // The app's outbound client: relays share its address policy, resolver and in-flight bound with every
  // other request pingd makes, and are counted in pingd_fetch_total with them.
  const sender = new RelaySender({
    fetcher: app.fetcher,
    userAgent: relayUserAgent(PINGD_VERSION, config.PUBLIC_URL ?? config.FETCH_CONTACT_URL),
    timeoutMs: config.FETCH_TIMEOUT_MS,
  });
  const intake = new RateMeter();
  /** Per target, weblogs dropped since the last warning about it. */
  const drops = new Map<string, { n: number; at: number }>();
  // eslint-disable-next-line prefer-const -- assigned below, after the Relay that wakes it is made
  let worker: Outbox<RelayJob, RelayRecord> | undefined;
  // Long enough for a claim's window of turns, a request with its fallback, and the outcome's batch; the
  // job of an instance that died is claimed again once it runs out.
  const sendMs = 2 * config.FETCH_TIMEOUT_MS + 2000;
  const leaseSec = Math.ceil((timing.windowMs + sendMs) / 1000) + 5;
  const hand = HAND_PER_SLOT * config.RELAY_CONCURRENCY;
  const relay = new Relay(app.db, sender, {
    rule,
    targets,
    maxAttempts: config.RELAY_MAX_ATTEMPTS,
    minIntervalSec: config.PING_MIN_INTERVAL,
    loopWindowSec: config.RELAY_LOOP_WINDOW,
    queueMax: config.RELAY_QUEUE_MAX,
    concurrency: config.RELAY_CONCURRENCY,
    hand,
    leaseMs: leaseSec * 1000,
    sendMs,
    timing,
    intakeBusy: () => intake.perSecond() >= YIELD_RATE,
    onQueued: () => worker?.wake(),
    onEvent: ({ job, outcome, result }) => {
      relays.inc({ target: shown(job.target), outcome });
      const line = {
        job: job.id,
        ping: job.pingId,
        target: shown(job.target),
        weblog: job.weblogUrl,
        attempt: job.attempts,
        method: result?.method,
        outcome,
      };
      if (outcome === 'dead')
        app.log.warn(
          { ...line, error: result?.outcome === 'failed' ? result.error : undefined },
          'relay: out of attempts; a dead letter (`pingd relay retry`)',
        );
      else if (outcome === 'failed')
        app.log.info({ ...line, error: result?.outcome === 'failed' ? result.error : undefined }, 'relay failed; retried later');
      else if (outcome !== 'deferred')
        app.log.debug({ ...line, message: result?.outcome !== 'failed' ? result?.message : undefined }, 'relayed');
    },
    onSkipped: (target, reason, n) => {
      skipped.inc({ target: shown(target), reason }, n);
      if (reason === 'suppressed')
        return void app.log.debug(
          { target: shown(target), suppressed: n },
          'relay: pings of weblogs relayed within RELAY_LOOP_WINDOW were not relayed again',
        );
      // A full queue drops on every page while it lasts: said once a minute per target, with the count.
      const d = drops.get(target) ?? { n: 0, at: 0 };
      d.n += n;
      drops.set(target, d);
      if (performance.now() - d.at < 60_000) return;
      app.log.warn(
        { target: shown(target), dropped: d.n, max: config.RELAY_QUEUE_MAX },
        "relay: the target's queue is full (RELAY_QUEUE_MAX); its stalest waiting weblogs were dropped",
      );
      drops.set(target, { n: 0, at: performance.now() });
    },
    onError: (err, what) => app.log.warn({ err: { message: err.message } }, `relay: ${what} failed`),
  });
  worker = new Outbox<RelayJob, RelayRecord>({
    db: app.db,
    leaseSec,
    concurrency: hand,
    pollMs: timing.pollMs,
    // Claims only for the places free: a claim hands out each target's turns in a window, and a job kept in
    // memory meanwhile would miss its turn.
    claimPlaces: 0,
    // Read at each batch: tests shorten the timing after start.
    get gatherMs() {
      return timing.flushMs;
    },
    maxBatch: FLUSH_AT,
    claim: (limit) =>
      claimRelayJobs(app.db, {
        targets: relay.targetUrls,
        limit,
        leaseSec,
        breakerAfter: timing.breakerAfter,
        perTarget: PER_TARGET_CLAIM,
        windowMs: timing.windowMs,
      }),
    run: (job) => relay.run(job),
    record: (tx, records) => relay.record(tx, records),
    intakeBusy: () => intake.perSecond() >= YIELD_RATE,
    onError: (err, job) => app.log.warn({ err: { message: err.message }, job: job?.id }, 'relay job failed; it is retried after its lease'),
  });

  app.pings.onOutcome((_m, r) => {
    if (!r.ok) return;
    intake.count();
    relay.pinged();
  });
  if (rule === 'require') app.verification.onSettled(() => relay.pinged());

  app.decorate('relay', { targets, relay, worker, timing });
  app.addHook('onReady', async () => {
    // Said at start, not only in each failed relay's line: a target the address policy refuses (a
    // loopback or intranet ping server) fails every time until FETCH_ALLOW_ADDRESSES names it.
    void refusedTargets(
      targets.map((t) => t.url),
      app.fetcher,
    ).then((refused) => {
      for (const r of refused) {
        app.log.warn(
          { target: shown(r.url), address: r.address, range: r.range },
          `relay: target ${shown(r.url)} is at ${r.address} (${r.range}), which the address policy refuses: every relay to it fails until FETCH_ALLOW_ADDRESSES includes it (e.g. FETCH_ALLOW_ADDRESSES=${r.address})`,
        );
      }
    });
    await syncTargets(
      app.db,
      targets.map((t) => ({ url: t.url, gapMs: Math.max(1, Math.round(60_000 / t.ratePerMin)) })),
    );
    await ensureCursor(app.db, rule);
    await settle();
    await reconcileQueues(
      app.db,
      targets.map((t) => t.url),
    );
    relay.start();
    worker?.start();
  });
  app.addHook('onClose', async () => {
    relay.stop();
    // Requests still running after one deadline are left to their leases (sent again after a restart).
    await worker?.close(config.FETCH_TIMEOUT_MS);
    await relay.drained();
  });
}

export default fp(relayPlugin, { name: 'relay', dependencies: ['db', 'fetch', 'metrics', 'pings', 'verification', 'stream'] });
