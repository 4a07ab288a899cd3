// Owns the throttle read before an rss_ping is parsed: a throttled weblog is refused whatever the rest of
// its rss_ping holds, so its parse is never paid for. An economy only: the commit decides for real.
import type { Config } from '../../platform/config.js';
import { normalizeUrl } from '../ping/validate.js';
import type { PingService } from '../ping/ping-service.js';
import { RssPingRefusal } from './refusal.js';

/** The longest the throttle read before the parse is waited for (then the parse and the commit decide). */
const EARLY_THROTTLE_READ_MS = 250;

/**
 * The throttle, read from the <site_uri> the pre-scan found, before the document is parsed. Only where
 * a throttled weblog's answer is "throttled" whatever else the ping says: not on a publisher endpoint
 * (a malformed ping does not use it up, a used one is a 401, then comes the throttle) nor when
 * authentication is required (an unauthenticated ping is a 401). Returns the URL found not throttled
 * (null when nothing was checked: the full path decides); throws the refusal of a throttled one.
 */
export async function throttleBeforeParse(
  pings: PingService,
  config: Pick<Config, 'RSSPING_REQUIRE_AUTH' | 'PING_MIN_INTERVAL'>,
  siteUri: string | null,
  endpoint: string | undefined,
): Promise<string | null> {
  if (siteUri === null || endpoint !== undefined || config.RSSPING_REQUIRE_AUTH || config.PING_MIN_INTERVAL <= 0) return null;
  let url: string;
  try {
    url = normalizeUrl(siteUri, 'url');
  } catch {
    return null; // validation says why, after the parse
  }
  // throttled() reads the weblog's URL and the method alone; the ping is admitted after the parse.
  const read = pings.throttled({
    method: 'rssPing',
    name: '',
    url,
    changesUrl: null,
    rssUrl: null,
    tags: null,
    clientAddr: null,
    userAgent: null,
  });
  // Only an economy: a database busy elsewhere (the embedded one's single session held by a render) is not
  // waited for here, or a ping would wait for it before the commit's own DB_TIMEOUT_MS even began.
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(resolve, EARLY_THROTTLE_READ_MS, 'late')));
  const throttled = await Promise.race([read, late]).finally(() => clearTimeout(timer));
  if (throttled === 'late') return null;
  if (throttled) throw RssPingRefusal.of(throttled);
  return url;
}
