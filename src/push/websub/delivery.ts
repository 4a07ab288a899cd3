// Owns WebSub content distribution (§7): one claimed delivery POSTed to its subscriber, signed, through the
// shared "send politely or defer" step, and turned into its outcome for the outbox (platform/outbox): how
// its task ends and what is recorded of the subscription, written with the rest of the batch. A document
// topic gets the document's current rendering; a feed topic gets its changes one at a time, in order, each
// read once from the database and shared by every subscriber it goes to. The decisions are outcomes.ts's.
import type { Db } from '../../platform/db/database.js';
import type { SafeFetcher } from '../../platform/fetch/safe-fetch.js';
import type { Attempt, PoliteClient } from '../../platform/fetch/polite.js';
import type { Ran } from '../../platform/outbox/outbox.js';
import { retryAfter } from '../../platform/retry.js';
import { websubLinks } from '../../platform/public-url.js';
import { hubBase } from './request.js';
import { signature } from './signature.js';
import { isDelivered, retryDelayMs, type DeliveryOutcome, type HubTiming } from './outcomes.js';
import type { DeliveryTask } from './task-repository.js';
import type { DeliveryRecord } from './subscription-repository.js';
import { nextChange, type FeedChangeRow } from './change-repository.js';

/** What the hub reads of publishing: a document's current bytes. */
export interface Content {
  read(path: string): Promise<{ contentType: string; body: Buffer; renderingId: number } | undefined>;
}

export interface DeliveryOptions {
  /** WEBSUB_ANSWER_TIMEOUT_MS: the whole request, its answer read to the end. */
  timeoutMs: number;
  /** WEBSUB_ANSWER_MAX_BYTES: a longer answer is a failure. */
  answerMaxBytes: number;
  publicUrl: string | undefined;
  timing: HubTiming;
  onDelivery(outcome: DeliveryOutcome): void;
  log: { debug(obj: object, msg?: string): void };
}

/** A read of the topic older than the rendering queued (another instance's cached pointer): look again then. */
const STALE_READ_WAIT_MS = 1000;
/** Feed changes kept in memory: a change fans out to all its subscribers from one read. */
const CHANGES_KEPT = 64;

type Sub = NonNullable<DeliveryTask['subscription']>;

export class Deliverer {
  /** The next change after a subscriber's last, by "feed:through": a change row never changes once written. */
  private readonly changes = new Map<string, Promise<FeedChangeRow | undefined>>();

  constructor(
    private readonly db: Db,
    private readonly fetcher: SafeFetcher,
    private readonly hosts: PoliteClient,
    private readonly content: Content,
    private readonly opts: DeliveryOptions,
  ) {}

  async deliver(task: DeliveryTask): Promise<Ran<DeliveryRecord>> {
    const sub = task.subscription;
    // Unsubscribed or expired since it was queued (WebSub §5.1: no content after the lease).
    if (!sub) return { settle: { id: task.id, kind: 'drop' }, after: () => this.opts.onDelivery('dropped') };
    if (sub.feedId !== null) return this.deliverChange(task, sub, sub.feedId);
    const current = await this.content.read(sub.path);
    if (!current || current.renderingId < task.renderingId)
      return { settle: { id: task.id, kind: 'defer', at: new Date(Date.now() + STALE_READ_WAIT_MS) } };
    // The subscriber already has this rendering (or a newer one): never send it again, nor an older one.
    if (sub.deliveredRenderingId !== null && current.renderingId <= sub.deliveredRenderingId)
      return { settle: { id: task.id, kind: 'finish', seq: task.seq } };
    const got = await this.post(sub, current.body, current.contentType);
    if (got.kind === 'busy') return { settle: { id: task.id, kind: 'defer', at: new Date(got.at) } };
    const r = this.result(got);
    const record: DeliveryRecord = {
      subscriptionId: sub.id,
      ok: r.delivered,
      status: r.status,
      error: r.error,
      renderingId: current.renderingId,
      throughChangeId: null,
    };
    const detail = { callback: sub.callback, topic: sub.topic, rendering: current.renderingId, status: r.status, error: r.error };
    if (r.delivered) return { settle: { id: task.id, kind: 'finish', seq: task.seq }, record, after: () => this.told('delivered', detail) };
    // A new rendering queued meanwhile waits for the same retry: a failing subscriber is not asked sooner.
    const at = this.retryAt(got, sub.failures + 1);
    return { settle: { id: task.id, kind: 'retry', at }, record, after: () => this.told('failed', { ...detail, retryAt: at }) };
  }

  /**
   * A feed topic's delivery: the oldest change the subscriber has not gone through, POSTed as it was stored
   * (the feed cut down to its new entries, with the topic's Content-Type). Changes go one at a time, in
   * order; a change that failed `failAfter` tries (1, 2, 4, 8, 16 minutes apart) is given up and counted,
   * and the next one is tried.
   */
  private async deliverChange(task: DeliveryTask, sub: Sub, feedId: number): Promise<Ran<DeliveryRecord>> {
    const change = await this.next(feedId, sub.throughChangeId);
    if (!change) return { settle: { id: task.id, kind: 'finish', seq: task.seq } };
    const got = await this.post(sub, change.body, change.contentType);
    if (got.kind === 'busy') return { settle: { id: task.id, kind: 'defer', at: new Date(got.at) } };
    const r = this.result(got);
    const givenUp = !r.delivered && task.attempts >= this.opts.timing.failAfter;
    const through = r.delivered || givenUp ? change.id : null;
    const record: DeliveryRecord = {
      subscriptionId: sub.id,
      ok: r.delivered,
      status: r.status,
      error: r.error,
      renderingId: 0,
      throughChangeId: through,
    };
    const detail = {
      callback: sub.callback,
      topic: sub.topic,
      change: change.id,
      entries: change.entries,
      status: r.status,
      error: r.error,
    };
    const outcome: DeliveryOutcome = r.delivered ? 'delivered' : givenUp ? 'given_up' : 'failed';
    if (through !== null) {
      // More changes queued than this one: the next goes now; otherwise done (unless one came meanwhile).
      const settle =
        change.id < task.changeId ? ({ id: task.id, kind: 'again' } as const) : ({ id: task.id, kind: 'finish', seq: task.seq } as const);
      return { settle, record, after: () => this.told(outcome, detail) };
    }
    const at = this.retryAt(got, sub.failures + 1);
    return { settle: { id: task.id, kind: 'retry', at }, record, after: () => this.told(outcome, { ...detail, retryAt: at }) };
  }

  /** The change after `through`, read once for every subscriber at that point (the read is shared while it runs). */
  private next(feedId: number, through: number): Promise<FeedChangeRow | undefined> {
    const key = `${feedId}:${through}`;
    let p = this.changes.get(key);
    if (!p) {
      p = nextChange(this.db, feedId, through);
      this.changes.set(key, p);
      if (this.changes.size > CHANGES_KEPT) this.changes.delete(this.changes.keys().next().value as string);
      // Only a change found is kept: "none yet" is not an answer for later.
      p.then(
        (c) => c === undefined && this.changes.delete(key),
        () => this.changes.delete(key),
      );
    }
    return p;
  }

  /** The signed POST of `body` to the subscriber's callback, with the topic's Link headers. */
  private post(sub: Sub, body: Buffer, contentType: string): Promise<Attempt> {
    const headers: Record<string, string> = { link: websubLinks(hubBase(this.opts.publicUrl, sub.topic), sub.topic) };
    if (sub.secret) headers['x-hub-signature'] = signature(sub.secret, body);
    // Received means a 2xx (WebSub §7) answered in full, in time and short: §7 asks subscribers to answer as
    // soon as they have the message, so an answer dripping past the deadline or flooding past the cap is a
    // failed delivery, retried, and the subscription turns failing like any other that does not answer.
    return this.hosts.attempt(
      sub.callback,
      () =>
        this.fetcher.post(sub.callback, {
          body,
          contentType,
          headers,
          timeoutMs: this.opts.timeoutMs,
          maxBytes: this.opts.answerMaxBytes,
          oversize: 'fail',
        }),
      'push',
    );
  }

  private result(got: Exclude<Attempt, { kind: 'busy' }>): { delivered: boolean; status: number | null; error: string | null } {
    if (got.kind === 'ok' && isDelivered(got.res.status)) return { delivered: true, status: got.res.status, error: null };
    const status = got.kind === 'ok' ? got.res.status : null;
    const error = (got.kind === 'ok' ? `the callback answered ${got.res.status}` : got.error.message).slice(0, 500);
    return { delivered: false, status, error };
  }

  /** When a failed delivery is tried again: the backoff for its failures in a row, or the subscriber's Retry-After if later. */
  private retryAt(got: Exclude<Attempt, { kind: 'busy' }>, failures: number): Date {
    const asked =
      got.kind === 'ok' && (got.res.status === 429 || got.res.status === 503)
        ? retryAfter(got.res.headers['retry-after'], new Date())
        : undefined;
    return new Date(Math.max(Date.now() + retryDelayMs(failures, this.opts.timing), asked?.getTime() ?? 0));
  }

  private told(outcome: DeliveryOutcome, detail: object): void {
    this.opts.onDelivery(outcome);
    this.opts.log.debug(
      detail,
      outcome === 'delivered' ? 'websub delivered' : outcome === 'given_up' ? 'websub delivery given up' : 'websub delivery failed',
    );
  }
}
