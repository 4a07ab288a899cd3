// Owns rssCloud's outbound requests: the endpoint check of a pleaseNotify (a test notification to the
// endpoint, or for http-post and https-post a GET with url and challenge when a domain was given, as
// rsscloud-server makes them) and the notifications (notification.ts: POST url=<feed> as a form, or the
// XML-RPC call of the subscriber's notifyProcedure). Every request goes through the safe
// fetcher (the address policy on every hop; no redirect is followed: the endpoint itself must answer) and
// the instance's per-host manners shared with verification and WebSub, bounded in time and answer bytes,
// with one notification in flight per endpoint host. The decisions are outcomes.ts's.
import { randomBytes } from 'node:crypto';
import type { Db } from '../../platform/db/database.js';
import type { FetchResult, SafeFetcher } from '../../platform/fetch/safe-fetch.js';
import type { PoliteClient } from '../../platform/fetch/polite.js';
import { HostGate } from '../../platform/host-gate.js';
import { retryAfter } from '../../platform/retry.js';
import { afterFailure, isReceived, judgeCheck, type NotifyOutcome, type NotifyTiming } from './outcomes.js';
import {
  deferNotification,
  dropNotification,
  finishNotification,
  retryNotification,
  type Notification,
} from './notification-repository.js';
import { recordAttempt } from './subscription-repository.js';
import { notifyBody, type NotifyTarget } from './notification.js';

export interface NotifierOptions {
  /** WEBSUB_ANSWER_TIMEOUT_MS: the whole request, its answer read to the end. */
  timeoutMs: number;
  /** WEBSUB_ANSWER_MAX_BYTES: a longer answer is a failure. */
  answerMaxBytes: number;
  /** Longest a pleaseNotify waits for the endpoint host's turn. */
  maxWaitMs: number;
  timing: NotifyTiming;
  onOutcome(o: NotifyOutcome): void;
  log: { debug(obj: object, msg?: string): void };
}

/** Our own bound on requests in flight was reached: try again then. */
const BUSY_WAIT_MS = 1000;

type Sent = { kind: 'ok'; res: FetchResult } | { kind: 'busy'; at: number } | { kind: 'failed'; message: string };

export class Notifier {
  /** One notification in flight per endpoint host in this instance (the claim also skips hosts leased elsewhere). */
  private readonly slots = new HostGate(1);

  constructor(
    private readonly db: Db,
    private readonly fetcher: SafeFetcher,
    private readonly hosts: PoliteClient,
    private readonly opts: NotifierOptions,
  ) {}

  busyHosts(): string[] {
    return this.slots.busy();
  }

  /**
   * The endpoint check of a pleaseNotify for `resourceUrl`: null when it passed, else why not. Waits for the
   * host's turn up to maxWaitMs (the subscriber is waiting for its answer). An xml-rpc endpoint is always
   * sent a test call, with or without a domain: rsscloud-server 4.0.0 has no challenge for it (Dave's
   * original rssCloud had none).
   */
  async check(notifyUrl: string, target: NotifyTarget, resourceUrl: string, viaDomain: boolean): Promise<string | null> {
    const challenge = viaDomain && target.protocol !== 'xml-rpc' ? randomBytes(15).toString('base64url') : null;
    const deadline = Date.now() + this.opts.maxWaitMs;
    for (;;) {
      const got =
        challenge === null
          ? await this.post(notifyUrl, target, resourceUrl)
          : await this.send(notifyUrl, () => {
              const u = new URL(notifyUrl);
              u.searchParams.append('url', resourceUrl);
              u.searchParams.append('challenge', challenge);
              return this.fetcher.get(u.href, { maxRedirects: 0, maxBytes: this.opts.answerMaxBytes, timeoutMs: this.opts.timeoutMs });
            });
      if (got.kind === 'busy') {
        if (got.at > deadline) return 'the endpoint host cannot be asked again yet; please try again in a minute';
        await new Promise((r) => setTimeout(r, Math.max(0, got.at - Date.now())));
        continue;
      }
      if (got.kind === 'failed') return got.message;
      return judgeCheck(got.res.status, got.res.body, challenge);
    }
  }

  /** Runs one claimed notification. */
  async run(n: Notification): Promise<'done' | 'deferred'> {
    const release = this.slots.tryEnter(n.host);
    if (!release) return this.defer(n.id, Date.now());
    try {
      const sub = n.subscription;
      if (!sub) {
        // Expired since it was queued: nobody asked for it any more.
        await dropNotification(this.db, n.id);
        this.opts.onOutcome('dropped');
        return 'done';
      }
      const got = await this.post(sub.notifyUrl, sub, sub.resourceUrl);
      if (got.kind === 'busy') return this.defer(n.id, got.at);
      if (got.kind === 'ok' && isReceived(got.res.status)) {
        await this.db.transaction(async (tx) => {
          await recordAttempt(tx, sub.id, { ok: true, status: got.res.status, error: null, dropped: false });
          await finishNotification(tx, n.id, n.seq);
        });
        this.opts.onOutcome('delivered');
        this.opts.log.debug({ resource: sub.resourceUrl, status: got.res.status }, 'rsscloud notified');
        return 'done';
      }
      const status = got.kind === 'ok' ? got.res.status : null;
      const error = (got.kind === 'ok' ? `the endpoint answered HTTP ${got.res.status}` : got.message).slice(0, 500);
      const next = afterFailure(n.attempts, this.opts.timing);
      await this.db.transaction(async (tx) => {
        await recordAttempt(tx, sub.id, { ok: false, status, error, dropped: next.drop });
        if (next.drop) await dropNotification(tx, n.id);
        else {
          const asked =
            got.kind === 'ok' && (status === 429 || status === 503) ? retryAfter(got.res.headers['retry-after'], new Date()) : undefined;
          await retryNotification(tx, n.id, new Date(Math.max(Date.now() + next.waitMs, asked?.getTime() ?? 0)));
        }
      });
      this.opts.onOutcome(next.drop ? 'dropped' : 'failed');
      this.opts.log.debug(
        { resource: sub.resourceUrl, status, error, attempts: n.attempts, dropped: next.drop },
        'rsscloud notification failed',
      );
      return 'done';
    } finally {
      release();
    }
  }

  /** The notification of `resourceUrl`, in the endpoint's protocol. */
  private post(notifyUrl: string, target: NotifyTarget, resourceUrl: string): Promise<Sent> {
    const { body, contentType } = notifyBody(target, resourceUrl);
    return this.send(notifyUrl, () =>
      this.fetcher.post(notifyUrl, {
        body,
        contentType,
        timeoutMs: this.opts.timeoutMs,
        maxBytes: this.opts.answerMaxBytes,
        oversize: 'fail',
      }),
    );
  }

  /** One request to the endpoint's host when it is our turn, with verification's manners (one budget per host). */
  private async send(url: string, request: () => Promise<FetchResult>): Promise<Sent> {
    const host = new URL(url).host.toLowerCase();
    const got = await this.hosts.send(host, request);
    if (got.kind === 'busy') return { kind: 'busy', at: this.hosts.turn(host, got.from) };
    if (got.kind === 'failed') {
      if (got.error.code === 'FETCH_BUSY') return { kind: 'busy', at: Date.now() + BUSY_WAIT_MS };
      return { kind: 'failed', message: got.error.message };
    }
    return got;
  }

  private async defer(id: number, at: number): Promise<'deferred'> {
    await deferNotification(this.db, id, new Date(at));
    return 'deferred';
  }
}
