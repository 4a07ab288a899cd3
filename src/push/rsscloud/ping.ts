// Owns rssCloud's ping (RSS 2.0 <cloud>, "rssCloud.ping"; rsscloud-server's POST /ping): a publisher says the
// feed at `url` changed. It is another way into pingd's one intake path: the feed becomes a ping of the
// weblog that names it (or, when pingd knows none yet, of the feed itself) with the feed as its rssUrl, so it
// passes the same screens, throttle and group commit, is answered only after the commit, and is verified,
// listed and streamed like any ping. Verification then finds whether the feed changed; if it did, the
// feed's rssCloud subscribers are notified (plugin.ts).
import type { Queryable } from '../../platform/db/database.js';
import type { PingService } from '../../intake/ping/ping-service.js';
import { normalizeUrls, type RawPing } from '../../intake/ping/validate.js';
import { MSG } from './answers.js';
import { resourceOwner } from './resource-repository.js';

export type PingAnswer = { ok: true; msg: string } | { ok: false; msg: string; retryAfterSec?: number };

export interface PingClient {
  addr: string | null;
  userAgent: string | null;
}

/** The ping of the feed at `rawUrl` (as sent), through intake; resolves after the commit or the refusal. */
export async function pingResource(pings: PingService, db: Queryable, rawUrl: string | undefined, client: PingClient): Promise<PingAnswer> {
  if (rawUrl === undefined || rawUrl.trim() === '') return { ok: false, msg: MSG.missing(['url']) };
  const n = normalizeUrls([rawUrl], 'feed URL');
  if (!n.ok) return { ok: false, msg: n.reason };
  const feedUrl = n.urls[0];
  // The weblog that names the feed as its own, when verification knows it; else the feed itself, not its
  // site: a site's several feeds would be one weblog, throttled together, and one verification settles all
  // of a weblog's waiting pings with one fetch of one feed (REGRESSION: four feeds of one host pinged at
  // once, three were never fetched and their subscribers never notified). A database that does not answer
  // leaves the ping to the commit, which refuses it as unavailable.
  const owner = await resourceOwner(db, feedUrl).catch(() => undefined);
  const raw: RawPing = {
    method: 'rssCloud',
    name: owner?.weblogName ?? owner?.title ?? new URL(feedUrl).hostname,
    url: owner?.weblogUrl ?? feedUrl,
    rssUrl: feedUrl,
    clientAddr: client.addr,
    userAgent: client.userAgent,
  };
  const r = await pings.accept(raw);
  if (r.ok) return { ok: true, msg: MSG.pingThanks };
  return { ok: false, msg: r.message, ...(r.retryAfterSec ? { retryAfterSec: r.retryAfterSec } : {}) };
}
