// Owns a pleaseNotify from request to answer: the bounds first (no outbound request for a request that
// cannot be taken), then each resource as a feed pingd can fetch (verification's probe), then the endpoint
// check (one request, for the first resource), then the subscriptions stored or renewed for 25 hours in one
// transaction, committed before the success is answered.
import type { Db } from '../../platform/db/database.js';
import { MSG } from './answers.js';
import type { NotifyRequest } from './params.js';
import { FULL_RETRY_AFTER_SEC, type NotifyRefusal } from './refusals.js';
import { slash64Key } from '../../platform/net/ip.js';
import { roomFor, storeSubscription } from './subscription-repository.js';
import type { Notifier } from './notifier.js';

export type NotifyAnswer = { ok: true; msg: string } | { ok: false; reason: NotifyRefusal; msg: string; retryAfterSec?: number };

export type ProbeResult = { ok: true; feedId: number; title: string | null } | { ok: false; reason: string; retryAfterSec?: number };

export interface SubscribeDeps {
  db: Db;
  /** Verification's probe (app.verification.probe). */
  probe(url: string): Promise<ProbeResult>;
  notifier: Notifier;
  limits: { maxSubscriptions: number; maxPerHost: number; maxPerRequester: number };
  /** Seconds a subscription lasts unless renewed (25 hours). */
  leaseSec: number;
}

export async function pleaseNotify(d: SubscribeDeps, r: NotifyRequest, clientAddr: string | null): Promise<NotifyAnswer> {
  // A client is counted by its address, IPv6 by its /64 (one machine has a whole /64 to pick from).
  const requester = clientAddr === null ? null : slash64Key(clientAddr);
  const room = await roomFor(d.db, r.endpointHost, r.notifyUrl, r.urls, requester, {
    total: d.limits.maxSubscriptions,
    perHost: d.limits.maxPerHost,
    perRequester: d.limits.maxPerRequester,
  });
  const adding = r.urls.length - room.renewals;
  if (adding > 0 && requester !== null && room.requester + adding > d.limits.maxPerRequester)
    return {
      ok: false,
      reason: 'requester_full',
      retryAfterSec: FULL_RETRY_AFTER_SEC,
      msg: `Can't accept the subscription because ${requester} has already asked for ${d.limits.maxPerRequester} subscriptions here (RSSCLOUD_MAX_PER_REQUESTER).`,
    };
  if (adding > 0 && room.host + adding > d.limits.maxPerHost)
    return {
      ok: false,
      reason: 'host_full',
      retryAfterSec: FULL_RETRY_AFTER_SEC,
      msg: `Can't accept the subscription because the endpoint's host ${r.endpointHost} already has ${d.limits.maxPerHost} subscriptions here (RSSCLOUD_MAX_PER_HOST).`,
    };
  if (adding > 0 && room.total + adding > d.limits.maxSubscriptions)
    return {
      ok: false,
      reason: 'full',
      retryAfterSec: FULL_RETRY_AFTER_SEC,
      msg: `Can't accept the subscription because this server keeps at most ${d.limits.maxSubscriptions} subscriptions (RSSCLOUD_MAX_SUBSCRIPTIONS); please try again later.`,
    };

  const feeds: number[] = [];
  for (const url of r.urls) {
    const p = await d.probe(url);
    if (!p.ok) {
      if (p.retryAfterSec) return { ok: false, reason: 'busy', retryAfterSec: p.retryAfterSec, msg: MSG.readResource(url, p.reason) };
      return { ok: false, reason: 'not_a_feed', msg: MSG.readResource(url, p.reason) };
    }
    feeds.push(p.feedId);
  }

  const failed = await d.notifier.check(r.notifyUrl, r, r.urls[0], r.viaDomain);
  if (failed !== null) return { ok: false, reason: 'check_failed', msg: MSG.failedHandler(failed) };

  await d.db.transaction(async (tx) => {
    for (let i = 0; i < r.urls.length; i++)
      await storeSubscription(tx, {
        feedId: feeds[i],
        resourceUrl: r.urls[i],
        notifyUrl: r.notifyUrl,
        endpointHost: r.endpointHost,
        protocol: r.protocol,
        notifyProcedure: r.notifyProcedure,
        requestedBy: requester,
        leaseSec: d.leaseSec,
      });
  });
  return { ok: true, msg: MSG.subscribed };
}
