// Owns running the hub's tasks: the verification of intent (WebSub §5.3) and the denial (§5.2) as GETs to
// the callback, a feed topic's check, and content distribution (§7, delivery.ts), each as a polite client
// (the aggregator-behaviour guide's manners, shared with verification: at most 2 requests in flight per
// host here, the database's per-host slots across instances, Retry-After on 429/503), and each bounded for
// the hub's own sake: WEBSUB_HOST_CONCURRENCY requests in flight per callback host, an answer complete
// within WEBSUB_ANSWER_TIMEOUT_MS and at most WEBSUB_ANSWER_MAX_BYTES long (else a failure). Each task ends
// as an outcome for the outbox (platform/outbox), written in batches. The decisions are outcomes.ts's.
import { randomBytes } from 'node:crypto';
import type { Db } from '../../platform/db/database.js';
import type { SafeFetcher } from '../../platform/fetch/safe-fetch.js';
import type { PoliteClient } from '../../platform/fetch/polite.js';
import type { Ran } from '../../platform/outbox/outbox.js';
import type { Settle } from '../../platform/outbox/outbox-repository.js';
import { settle } from '../../platform/outbox/outbox-repository.js';
import { retryAfter } from '../../platform/retry.js';
import { callbackHost, withParams } from './request.js';
import { HostGate } from '../../platform/host-gate.js';
import {
  isTransient,
  isUnreachable,
  judgeEcho,
  retryDelayMs,
  type DeliveryOutcome,
  type HubTiming,
  type VerificationOutcome,
} from './outcomes.js';
import {
  hasSubscribers,
  queueDeliveries,
  queueDenial,
  queuePrimeCheck,
  WEBSUB_TASKS,
  type CheckTask,
  type IntentTask,
  type Task,
} from './task-repository.js';
import { removeSubscription, renewSubscription, storeSubscription, type DeliveryRecord } from './subscription-repository.js';
import type { FeedCheck } from '../../platform/feed-changes.js';
import { Deliverer, type Content } from './delivery.js';

export type { Content } from './delivery.js';

export interface HubOptions {
  /** WEBSUB_ANSWER_TIMEOUT_MS: the whole request, its answer read to the end. */
  timeoutMs: number;
  /** WEBSUB_ANSWER_MAX_BYTES: a longer answer is a failure. */
  answerMaxBytes: number;
  /** WEBSUB_HOST_CONCURRENCY. */
  hostConcurrency: number;
  publicUrl: string | undefined;
  timing: HubTiming;
  onVerification(outcome: VerificationOutcome): void;
  onDelivery(outcome: DeliveryOutcome): void;
  /** Fetches a feed topic with verification's manners (app.verification.check). */
  check(url: string): Promise<FeedCheck>;
  /** A check of a feed topic ended: its outcome (verification's) and why it ran (a new subscription, a poll). */
  onCheck(outcome: string, why: 'subscribe' | 'poll'): void;
  log: { debug(obj: object, msg?: string): void; info(obj: object, msg?: string): void };
}

/** Claims of an intent lost to a dying instance before it is given up (a task must not kill every start). */
const MAX_LOST_CLAIMS = 3;
/** Claims of a check before it is given up (each is one verification-bounded fetch, or a deferral given back). */
const MAX_CHECK_CLAIMS = 5;

/** The hub.reason of a denial after a subscribed topic was fetched and is not a feed pingd can follow (WebSub §5.2). */
export function checkDenialReason(outcome: string): string {
  switch (outcome) {
    case 'not_a_feed':
      return 'the topic is not a feed this hub can read (RSS, Atom or JSON Feed)';
    case 'gone':
      return 'the topic is gone (410)';
    case 'refused':
      return "the topic's address is not one this hub fetches";
    case 'too_large':
      return 'the topic is larger than this hub fetches';
    case 'too_complex':
      return 'the topic took too long to read';
    default:
      return 'the topic could not be fetched';
  }
}

type Outcome = Ran<DeliveryRecord>;
/** A task that ended in a statement of its own. */
const SETTLED: Outcome = { settle: null };

export class Hub {
  /**
   * WEBSUB_HOST_CONCURRENCY requests in flight per callback host in this instance: a host whose callbacks
   * hang, drip or flood holds at most that many of the worker's WEBSUB_CONCURRENCY places, and the worker
   * claims none of its other tasks meanwhile (busyHosts), so they wait in the queue while the other hosts
   * are served.
   */
  private readonly slots: HostGate;
  private readonly deliverer: Deliverer;

  constructor(
    private readonly db: Db,
    private readonly fetcher: SafeFetcher,
    private readonly hosts: PoliteClient,
    private readonly content: Content,
    private readonly opts: HubOptions,
  ) {
    this.slots = new HostGate(opts.hostConcurrency);
    this.deliverer = new Deliverer(db, fetcher, hosts, content, opts);
  }

  /** Callback hosts with WEBSUB_HOST_CONCURRENCY requests in flight here: the worker claims none of their tasks. */
  busyHosts(): string[] {
    return this.slots.busy();
  }

  /** Queues a delivery of the document's current rendering to each of its subscribers; returns how many. */
  async published(path: string): Promise<number> {
    if (!(await hasSubscribers(this.db, path))) return 0;
    const current = await this.content.read(path);
    if (!current) return 0;
    return queueDeliveries(this.db, path, current.renderingId);
  }

  async run(task: Task): Promise<Outcome> {
    // A check's request goes to the topic's host, under verification's manners, not to a callback.
    if (task.kind === 'check') return this.checkTopic(task);
    const host =
      task.host ??
      (task.kind !== 'deliver' ? callbackHost(task.callback) : task.subscription ? callbackHost(task.subscription.callback) : null);
    const release = host === null ? () => undefined : this.slots.tryEnter(host);
    // Claimed in the same batch as another task of its host: back to the queue as it was, and the next
    // claims pass the host over while its request is in flight.
    if (!release) return { settle: { id: task.id, kind: 'defer', at: new Date() } };
    try {
      if (task.kind === 'deliver') return await this.deliverer.deliver(task);
      return await this.intent(task);
    } finally {
      release();
    }
  }

  private async intent(task: IntentTask): Promise<Outcome> {
    const finish: Settle = { id: task.id, kind: 'finish', seq: task.seq };
    // Claimed again and again without an outcome (its instance died each time): give it up.
    if (task.attempts > this.opts.timing.intentAttempts + MAX_LOST_CLAIMS)
      return { settle: finish, after: () => this.opts.onVerification('unreachable') };
    const challenge = randomBytes(24).toString('base64url');
    const params: Record<string, string> =
      task.kind === 'deny'
        ? { 'hub.mode': 'denied', 'hub.topic': task.topic, 'hub.reason': task.reason ?? 'denied' }
        : {
            'hub.mode': task.mode,
            'hub.topic': task.topic,
            'hub.challenge': challenge,
            ...(task.mode === 'subscribe' ? { 'hub.lease_seconds': String(task.leaseSeconds) } : {}),
          };
    const url = withParams(task.callback, params);
    // No redirect is followed: the callback itself must answer (a 3xx confirms nothing).
    // A longer answer (FETCH_TOO_LARGE) or one not complete in time (FETCH_TIMEOUT) echoes nothing.
    const got = await this.hosts.attempt(url, () =>
      this.fetcher.get(url, { maxRedirects: 0, maxBytes: this.opts.answerMaxBytes, timeoutMs: this.opts.timeoutMs }),
    );
    if (got.kind === 'busy') return { settle: { id: task.id, kind: 'defer', at: new Date(got.at) } };

    let verdict: 'confirmed' | 'retry' | 'not_confirmed' | 'unreachable';
    let retryAt: Date | undefined;
    if (got.kind === 'failed')
      verdict = isTransient(got.error.code) ? 'retry' : isUnreachable(got.error.code) ? 'unreachable' : 'not_confirmed';
    else if (task.kind === 'deny') verdict = got.res.status >= 500 || got.res.status === 429 ? 'retry' : 'confirmed';
    else verdict = judgeEcho(got.res.status, got.res.body, challenge);
    if (got.kind === 'ok') retryAt = retryAfter(got.res.headers['retry-after'], new Date());

    const detail = {
      callback: task.callback,
      topic: task.topic,
      mode: task.kind === 'deny' ? 'denied' : task.mode,
      status: got.kind === 'ok' ? got.res.status : null,
      error: got.kind === 'failed' ? got.error.message : undefined,
    };
    if (verdict === 'retry') {
      if (task.attempts < this.opts.timing.intentAttempts) {
        const at = Math.max(Date.now() + retryDelayMs(task.attempts, this.opts.timing), retryAt?.getTime() ?? 0);
        this.opts.log.debug(
          { ...detail, attempt: task.attempts, retryAt: new Date(at) },
          'websub intent: the callback will be asked again',
        );
        return { settle: { id: task.id, kind: 'retry', at: new Date(at), seq: task.seq } };
      }
      verdict = 'unreachable';
    }

    if (task.kind === 'deny') {
      // Any answer means the subscriber was told.
      const told = verdict === 'unreachable' ? 'unreachable' : 'denied';
      return {
        settle: finish,
        after: () => {
          this.opts.onVerification(told);
          this.opts.log.debug(detail, 'websub denial sent');
        },
      };
    }
    const outcome = verdict;
    const after = () => {
      this.opts.onVerification(outcome);
      this.opts.log.info({ ...detail, outcome }, 'websub verification of intent');
    };
    if (verdict !== 'confirmed') return { settle: finish, after };
    // The subscription's change and the task's end in one transaction.
    await this.db.transaction(async (tx) => {
      if (task.mode === 'subscribe' && task.path === null) {
        // A feed topic: a live subscription is renewed; a new one is stored only once the topic is fetched
        // and found to be a feed (checkTopic), denied otherwise.
        const leaseSeconds = task.leaseSeconds ?? 0;
        const renewed = await renewSubscription(tx, { topic: task.topic, callback: task.callback, secret: task.secret, leaseSeconds });
        if (!renewed)
          await queuePrimeCheck(tx, {
            topic: task.topic,
            callback: task.callback,
            leaseSeconds,
            secret: task.secret,
            callbackHost: callbackHost(task.callback),
            topicHost: new URL(task.topic).hostname.toLowerCase(),
          });
      } else if (task.mode === 'subscribe') {
        await storeSubscription(tx, {
          topic: task.topic,
          path: task.path ?? new URL(task.topic).pathname,
          callback: task.callback,
          secret: task.secret,
          leaseSeconds: task.leaseSeconds ?? 0,
          callbackHost: callbackHost(task.callback),
        });
      } else await removeSubscription(tx, task.topic, task.callback);
      await settle(tx, WEBSUB_TASKS, [finish]);
    });
    after();
    return SETTLED;
  }

  /**
   * Fetches a feed topic through verification (its manners, bounds and state). After a confirmed subscribe
   * the subscription is stored if the topic is a feed, or the subscriber is denied (WebSub §5.2) with the
   * reason; a poll only fetches (a change it finds reaches the subscribers through the feed-change hook).
   */
  private async checkTopic(task: CheckTask): Promise<Outcome> {
    const why = task.callback ? 'subscribe' : 'poll';
    const finish: Settle = { id: task.id, kind: 'finish', seq: task.seq };
    if (task.attempts > MAX_CHECK_CLAIMS) {
      // Claimed again and again without an outcome (its instance died each time): give it up.
      const after = () => this.opts.onCheck('unreachable', why);
      if (!task.callback) return { settle: finish, after };
      await this.db.transaction(async (tx) => {
        await queueDenial(tx, {
          topic: task.topic,
          callback: task.callback!,
          reason: 'the topic could not be fetched',
          callbackHost: callbackHost(task.callback!),
        });
        await settle(tx, WEBSUB_TASKS, [finish]);
      });
      after();
      return SETTLED;
    }
    const r = await this.opts.check(task.topic);
    if (r.kind === 'deferred') return { settle: { id: task.id, kind: 'defer', at: r.until } };
    this.opts.onCheck(r.outcome, why);
    const callback = task.callback;
    if (!callback) return { settle: finish };
    await this.db.transaction(async (tx) => {
      if (r.feed && r.feedId !== null)
        await storeSubscription(tx, {
          topic: task.topic,
          path: null,
          callback,
          secret: task.secret,
          leaseSeconds: task.leaseSeconds ?? 0,
          callbackHost: callbackHost(callback),
          feedId: r.feedId,
          topicHost: task.topicHost,
        });
      else
        await queueDenial(tx, { topic: task.topic, callback, reason: checkDenialReason(r.outcome), callbackHost: callbackHost(callback) });
      await settle(tx, WEBSUB_TASKS, [finish]);
    });
    this.opts.log.info({ topic: task.topic, callback, outcome: r.outcome, subscribed: r.feed }, 'websub: feed topic checked');
    return SETTLED;
  }
}
