// Owns running the hub's tasks: the verification of intent (WebSub §5.3) and the denial (§5.2) as GETs to
// the callback, content distribution (§7) as a signed POST of the topic's current rendering, each as a
// polite client (the aggregator-behaviour guide's manners, shared with verification: at most 2 requests in
// flight per host here, the database's per-host slots across instances, Retry-After on 429/503), and each
// bounded for the hub's own sake: WEBSUB_HOST_CONCURRENCY requests in flight per callback host, an answer
// complete within WEBSUB_ANSWER_TIMEOUT_MS and at most WEBSUB_ANSWER_MAX_BYTES long (else a failure). The
// decisions are outcomes.ts's; this module does the I/O around them.
import { randomBytes } from 'node:crypto';
import type { Db } from '../../platform/db/database.js';
import type { FetchError, FetchResult, SafeFetcher } from '../../platform/fetch/safe-fetch.js';
import type { PoliteClient } from '../../platform/fetch/polite.js';
import { retryAfter } from '../../platform/retry.js';
import { websubLinks } from '../../platform/public-url.js';
import { callbackHost, hubBase, withParams } from './request.js';
import { HostGate } from '../../platform/host-gate.js';
import { signature } from './signature.js';
import {
  isDelivered,
  isTransient,
  isUnreachable,
  judgeEcho,
  retryDelayMs,
  type DeliveryOutcome,
  type HubTiming,
  type VerificationOutcome,
} from './outcomes.js';
import {
  continueTask,
  deferTask,
  dropTask,
  finishTask,
  hasSubscribers,
  queueDeliveries,
  queueDenial,
  queuePrimeCheck,
  retryTask,
  type CheckTask,
  type DeliveryTask,
  type IntentTask,
  type Task,
} from './task-repository.js';
import { recordDelivery, recordThrough, removeSubscription, renewSubscription, storeSubscription } from './subscription-repository.js';
import { nextChange } from './change-repository.js';
import type { FeedCheck } from '../../platform/feed-changes.js';

/** What the hub reads of publishing: a document's current bytes. */
export interface Content {
  read(path: string): Promise<{ contentType: string; body: Buffer; renderingId: number } | undefined>;
}

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

/** A read of the topic older than the rendering queued (another instance's cached pointer): look again then. */
const STALE_READ_WAIT_MS = 1000;
/** Our own bound on requests in flight was reached: try again then. */
const BUSY_WAIT_MS = 1000;
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

type Polite = { kind: 'ok'; res: FetchResult } | { kind: 'busy'; at: number } | { kind: 'failed'; error: FetchError };
type Ran = 'done' | 'deferred';

export class Hub {
  /**
   * WEBSUB_HOST_CONCURRENCY requests in flight per callback host in this instance: a host whose callbacks
   * hang, drip or flood holds at most that many of the worker's WEBSUB_CONCURRENCY places, and the worker
   * claims none of its other tasks meanwhile (busyHosts), so they wait in the queue while the other hosts
   * are served.
   */
  private readonly slots: HostGate;

  constructor(
    private readonly db: Db,
    private readonly fetcher: SafeFetcher,
    private readonly hosts: PoliteClient,
    private readonly content: Content,
    private readonly opts: HubOptions,
  ) {
    this.slots = new HostGate(opts.hostConcurrency);
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

  async run(task: Task): Promise<Ran> {
    // A check's request goes to the topic's host, under verification's manners, not to a callback.
    if (task.kind === 'check') return this.checkTopic(task);
    const host =
      task.host ??
      (task.kind !== 'deliver' ? callbackHost(task.callback) : task.subscription ? callbackHost(task.subscription.callback) : null);
    const release = host === null ? () => undefined : this.slots.tryEnter(host);
    // Claimed in the same batch as another task of its host: back to the queue as it was, and the next
    // claims pass the host over while its request is in flight.
    if (!release) return this.defer(task.id, Date.now());
    try {
      if (task.kind === 'deliver') return await this.deliver(task);
      return await this.intent(task);
    } finally {
      release();
    }
  }

  private async intent(task: IntentTask): Promise<Ran> {
    // Claimed again and again without an outcome (its instance died each time): give it up.
    if (task.attempts > this.opts.timing.intentAttempts + MAX_LOST_CLAIMS) {
      await finishTask(this.db, task.id, task.seq);
      this.opts.onVerification('unreachable');
      return 'done';
    }
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
    const got = await this.polite(url, () =>
      this.fetcher.get(url, { maxRedirects: 0, maxBytes: this.opts.answerMaxBytes, timeoutMs: this.opts.timeoutMs }),
    );
    if (got.kind === 'busy') return this.defer(task.id, got.at);

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
        await retryTask(this.db, task.id, new Date(at), task.seq);
        return 'done';
      }
      verdict = 'unreachable';
    }

    if (task.kind === 'deny') {
      await finishTask(this.db, task.id, task.seq);
      // Any answer means the subscriber was told.
      this.opts.onVerification(verdict === 'unreachable' ? 'unreachable' : 'denied');
      this.opts.log.debug(detail, 'websub denial sent');
      return 'done';
    }
    if (verdict === 'confirmed') {
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
        await finishTask(tx, task.id, task.seq);
      });
    } else await finishTask(this.db, task.id, task.seq);
    this.opts.onVerification(verdict);
    this.opts.log.info({ ...detail, outcome: verdict }, 'websub verification of intent');
    return 'done';
  }

  private async deliver(task: DeliveryTask): Promise<Ran> {
    const sub = task.subscription;
    if (!sub) {
      // Unsubscribed or expired since it was queued (WebSub §5.1: no content after the lease).
      await dropTask(this.db, task.id);
      this.opts.onDelivery('dropped');
      return 'done';
    }
    if (sub.feedId !== null) return this.deliverChange(task, { ...sub, feedId: sub.feedId });
    if (sub.path === null) {
      await dropTask(this.db, task.id);
      return 'done';
    }
    const current = await this.content.read(sub.path);
    if (!current || current.renderingId < task.renderingId) return this.defer(task.id, Date.now() + STALE_READ_WAIT_MS);
    // The subscriber already has this rendering (or a newer one): never send it again, nor an older one.
    if (sub.deliveredRenderingId !== null && current.renderingId <= sub.deliveredRenderingId) {
      await finishTask(this.db, task.id, task.seq);
      return 'done';
    }
    const headers: Record<string, string> = { link: websubLinks(hubBase(this.opts.publicUrl, sub.topic), sub.topic) };
    if (sub.secret) headers['x-hub-signature'] = signature(sub.secret, current.body);
    // Received means a 2xx (WebSub §7) answered in full, in time and short: §7 asks subscribers to answer as
    // soon as they have the message, so an answer dripping past the deadline or flooding past the cap is a
    // failed delivery, retried, and the subscription turns failing like any other that does not answer.
    const got = await this.polite(sub.callback, () =>
      this.fetcher.post(sub.callback, {
        body: current.body,
        contentType: current.contentType,
        headers,
        timeoutMs: this.opts.timeoutMs,
        maxBytes: this.opts.answerMaxBytes,
        oversize: 'fail',
      }),
    );
    if (got.kind === 'busy') return this.defer(task.id, got.at);

    if (got.kind === 'ok' && isDelivered(got.res.status)) {
      await this.db.transaction(async (tx) => {
        await recordDelivery(
          tx,
          sub.id,
          { ok: true, status: got.res.status, error: null, renderingId: current.renderingId },
          this.opts.timing.failAfter,
        );
        await finishTask(tx, task.id, task.seq);
      });
      this.opts.onDelivery('delivered');
      this.opts.log.debug(
        { callback: sub.callback, topic: sub.topic, rendering: current.renderingId, status: got.res.status },
        'websub delivered',
      );
      return 'done';
    }
    const status = got.kind === 'ok' ? got.res.status : null;
    const error = got.kind === 'ok' ? `the callback answered ${got.res.status}` : got.error.message;
    const failures = await recordDelivery(
      this.db,
      sub.id,
      { ok: false, status, error: error.slice(0, 500), renderingId: current.renderingId },
      this.opts.timing.failAfter,
    );
    const after =
      got.kind === 'ok' && (status === 429 || status === 503) ? retryAfter(got.res.headers['retry-after'], new Date()) : undefined;
    const at = Math.max(Date.now() + retryDelayMs(failures, this.opts.timing), after?.getTime() ?? 0);
    // A new rendering queued meanwhile waits for the same retry: a failing subscriber is not asked sooner.
    await retryTask(this.db, task.id, new Date(at));
    this.opts.onDelivery('failed');
    this.opts.log.debug(
      { callback: sub.callback, topic: sub.topic, status, error, failures, retryAt: new Date(at) },
      'websub delivery failed',
    );
    return 'done';
  }

  /**
   * A feed topic's delivery: the oldest change the subscriber has not gone through, POSTed as it was stored
   * (the feed cut down to its new entries, with the topic's Content-Type). Changes go one at a time, in
   * order; a change that failed `failAfter` tries (1, 2, 4, 8, 16 minutes apart) is given up and counted,
   * and the next one is tried.
   */
  private async deliverChange(task: DeliveryTask, sub: NonNullable<DeliveryTask['subscription']> & { feedId: number }): Promise<Ran> {
    const change = await nextChange(this.db, sub.feedId, sub.throughChangeId);
    if (!change) {
      await finishTask(this.db, task.id, task.seq);
      return 'done';
    }
    const headers: Record<string, string> = { link: websubLinks(hubBase(this.opts.publicUrl, sub.topic), sub.topic) };
    if (sub.secret) headers['x-hub-signature'] = signature(sub.secret, change.body);
    const got = await this.polite(sub.callback, () =>
      this.fetcher.post(sub.callback, {
        body: change.body,
        contentType: change.contentType,
        headers,
        timeoutMs: this.opts.timeoutMs,
        maxBytes: this.opts.answerMaxBytes,
        oversize: 'fail',
      }),
    );
    if (got.kind === 'busy') return this.defer(task.id, got.at);
    const delivered = got.kind === 'ok' && isDelivered(got.res.status);
    const status = got.kind === 'ok' ? got.res.status : null;
    const error = delivered ? null : got.kind === 'ok' ? `the callback answered ${got.res.status}` : got.error.message;
    const givenUp = !delivered && task.attempts >= this.opts.timing.failAfter;
    const failures = await this.db.transaction(async (tx) => {
      const n = await recordDelivery(
        tx,
        sub.id,
        { ok: delivered, status, error: error?.slice(0, 500) ?? null, renderingId: 0 },
        this.opts.timing.failAfter,
      );
      if (delivered || givenUp) {
        await recordThrough(tx, sub.id, change.id);
        // More changes queued than this one: the next goes now; otherwise done (unless one came meanwhile).
        if (change.id < task.changeId) await continueTask(tx, task.id);
        else await finishTask(tx, task.id, task.seq);
      }
      return n;
    });
    this.opts.onDelivery(delivered ? 'delivered' : givenUp ? 'given_up' : 'failed');
    const detail = { callback: sub.callback, topic: sub.topic, change: change.id, entries: change.entries, status, error };
    if (delivered || givenUp) {
      this.opts.log.debug(detail, delivered ? 'websub delivered' : 'websub delivery given up');
      return 'done';
    }
    const after =
      got.kind === 'ok' && (status === 429 || status === 503) ? retryAfter(got.res.headers['retry-after'], new Date()) : undefined;
    const at = Math.max(Date.now() + retryDelayMs(failures, this.opts.timing), after?.getTime() ?? 0);
    await retryTask(this.db, task.id, new Date(at));
    this.opts.log.debug({ ...detail, failures, retryAt: new Date(at) }, 'websub delivery failed');
    return 'done';
  }

  /**
   * Fetches a feed topic through verification (its manners, bounds and state). After a confirmed subscribe
   * the subscription is stored if the topic is a feed, or the subscriber is denied (WebSub §5.2) with the
   * reason; a poll only fetches (a change it finds reaches the subscribers through the feed-change hook).
   */
  private async checkTopic(task: CheckTask): Promise<Ran> {
    const why = task.callback ? 'subscribe' : 'poll';
    if (task.attempts > MAX_CHECK_CLAIMS) {
      // Claimed again and again without an outcome (its instance died each time): give it up.
      if (task.callback)
        await this.db.transaction(async (tx) => {
          await queueDenial(tx, {
            topic: task.topic,
            callback: task.callback!,
            reason: 'the topic could not be fetched',
            callbackHost: callbackHost(task.callback!),
          });
          await finishTask(tx, task.id, task.seq);
        });
      else await finishTask(this.db, task.id, task.seq);
      this.opts.onCheck('unreachable', why);
      return 'done';
    }
    const r = await this.opts.check(task.topic);
    if (r.kind === 'deferred') return this.defer(task.id, r.until.getTime());
    this.opts.onCheck(r.outcome, why);
    const callback = task.callback;
    if (!callback) {
      await finishTask(this.db, task.id, task.seq);
      return 'done';
    }
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
      await finishTask(tx, task.id, task.seq);
    });
    this.opts.log.info({ topic: task.topic, callback, outcome: r.outcome, subscribed: r.feed }, 'websub: feed topic checked');
    return 'done';
  }

  /** One request to the callback's host when it is our turn, with verification's manners (one budget per host). */
  private async polite(url: string, send: () => Promise<FetchResult>): Promise<Polite> {
    const host = new URL(url).host.toLowerCase();
    const got = await this.hosts.send(host, send);
    if (got.kind === 'busy') return { kind: 'busy', at: this.hosts.turn(host, got.from) };
    // Our own bound on requests in flight: it says nothing about the callback.
    if (got.kind === 'failed' && got.error.code === 'FETCH_BUSY') return { kind: 'busy', at: Date.now() + BUSY_WAIT_MS };
    return got;
  }

  private async defer(id: number, at: number): Promise<Ran> {
    await deferTask(this.db, id, new Date(at));
    return 'deferred';
  }
}
