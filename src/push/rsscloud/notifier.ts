// Owns rssCloud's outbound requests: the endpoint check of a pleaseNotify (a test notification to the
// endpoint, or for http-post and https-post a GET with url and challenge when a domain was given, as
// rsscloud-server makes them) and the notifications (notification.ts: POST url=<feed> as a form, or the
// XML-RPC call of the subscriber's notifyProcedure). Every request goes through the safe
// fetcher (the address policy on every hop; no redirect is followed: the endpoint itself must answer) and
// the instance's per-host manners shared with verification and WebSub, bounded in time and answer bytes,
// with one notification in flight per endpoint host. The decisions are outcomes.ts's.
import { randomBytes } from 'node:crypto';
import type { SafeFetcher } from '../../platform/fetch/safe-fetch.js';
import type { Attempt as Sent, Manner, PoliteClient } from '../../platform/fetch/polite.js';
import type { Ran } from '../../platform/outbox/outbox.js';
import { HostGate } from '../../platform/host-gate.js';
import { retryAfter } from '../../platform/retry.js';
import { afterFailure, isReceived, judgeCheck, type NotifyOutcome, type NotifyTiming } from './outcomes.js';
import type { Notification } from './notification-repository.js';
import type { Attempt } from './subscription-repository.js';
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

export class Notifier {
  /** One notification in flight per endpoint host in this instance (the claim also skips hosts leased elsewhere). */
  private readonly slots = new HostGate(1);

  constructor(
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
          : await this.hosts.attempt(notifyUrl, () => {
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
      if (got.kind === 'failed') return got.error.message;
      return judgeCheck(got.res.status, got.res.body, challenge);
    }
  }

  /** Runs one claimed notification: how it ends and what is recorded of its subscription, for the outbox to write. */
  async run(n: Notification): Promise<Ran<Attempt>> {
    const release = this.slots.tryEnter(n.host);
    if (!release) return { settle: { id: n.id, kind: 'defer', at: new Date() } };
    try {
      const sub = n.subscription;
      // Expired since it was queued: nobody asked for it any more.
      if (!sub) return { settle: { id: n.id, kind: 'drop' }, after: () => this.opts.onOutcome('dropped') };
      const got = await this.post(sub.notifyUrl, sub, sub.resourceUrl, 'push');
      if (got.kind === 'busy') return { settle: { id: n.id, kind: 'defer', at: new Date(got.at) } };
      if (got.kind === 'ok' && isReceived(got.res.status)) {
        const status = got.res.status;
        return {
          settle: { id: n.id, kind: 'finish', seq: n.seq },
          record: { subscriptionId: sub.id, ok: true, status, error: null, dropped: false },
          after: () => {
            this.opts.onOutcome('delivered');
            this.opts.log.debug({ resource: sub.resourceUrl, status }, 'rsscloud notified');
          },
        };
      }
      const status = got.kind === 'ok' ? got.res.status : null;
      const error = (got.kind === 'ok' ? `the endpoint answered HTTP ${got.res.status}` : got.error.message).slice(0, 500);
      const next = afterFailure(n.attempts, this.opts.timing);
      const asked =
        got.kind === 'ok' && (status === 429 || status === 503) ? retryAfter(got.res.headers['retry-after'], new Date()) : undefined;
      return {
        settle: next.drop
          ? { id: n.id, kind: 'drop' }
          : { id: n.id, kind: 'retry', at: new Date(Math.max(Date.now() + next.waitMs, asked?.getTime() ?? 0)) },
        record: { subscriptionId: sub.id, ok: false, status, error, dropped: next.drop },
        after: () => {
          this.opts.onOutcome(next.drop ? 'dropped' : 'failed');
          this.opts.log.debug(
            { resource: sub.resourceUrl, status, error, attempts: n.attempts, dropped: next.drop },
            'rsscloud notification failed',
          );
        },
      };
    } finally {
      release();
    }
  }

  /** The notification of `resourceUrl`, in the endpoint's protocol. */
  private post(notifyUrl: string, target: NotifyTarget, resourceUrl: string, manner: Manner = 'fetch'): Promise<Sent> {
    const { body, contentType } = notifyBody(target, resourceUrl);
    return this.hosts.attempt(
      notifyUrl,
      () =>
        this.fetcher.post(notifyUrl, {
          body,
          contentType,
          timeoutMs: this.opts.timeoutMs,
          maxBytes: this.opts.answerMaxBytes,
          oversize: 'fail',
        }),
      manner,
    );
  }
}
