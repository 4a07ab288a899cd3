// Owns the one fetch a subscription needs before it is taken (rssCloud's pleaseNotify: "each URL must be a
// feed pingd can fetch"): is this URL a feed? A feed verification already fetched successfully is known
// without a request; otherwise one polite GET (verification's manners: the host's turn across instances,
// redirects, the byte and time bounds) read on the document threads, and the feed's first state (its
// validators and the items seen) is kept, so that the next verification reports only what is new after it.
import type { Db } from '../platform/db/database.js';
import type { SafeFetcher } from '../platform/fetch/safe-fetch.js';
import type { DocumentReader } from './documents.js';
import { ensureFeed, saveFeed } from './feed-repository.js';
import { politeHost, type PoliteClient } from '../platform/fetch/polite.js';
import { FEED_ACCEPT, KNOWN_FEED, MAX_REDIRECTS } from './verifier.js';

export type ProbeResult =
  | { ok: true; feedId: number; title: string | null }
  /** `retryAfterSec`: the host (or our own bound) is busy; nothing was learnt about the URL. */
  | { ok: false; reason: string; retryAfterSec?: number };

export interface ProbeOptions {
  maxBytes: number;
  timeoutMs: number;
  /** Longest a probe waits for the host's turn before it gives up with retryAfterSec (the caller is a request). */
  maxWaitMs: number;
}

export class FeedProbe {
  constructor(
    private readonly db: Db,
    private readonly fetcher: SafeFetcher,
    private readonly hosts: PoliteClient,
    private readonly documents: DocumentReader,
    private readonly opts: ProbeOptions,
  ) {}

  /** Whether `url` (normalised) is a feed pingd can fetch; the feed's id when it is. */
  async probe(url: string): Promise<ProbeResult> {
    const feed = await ensureFeed(this.db, url);
    if (feed.gone) return { ok: false, reason: 'the feed is gone (it answered 410, or its XML redirect ended it)' };
    if (feed.lastSuccessAt && feed.lastOutcome && KNOWN_FEED.has(feed.lastOutcome)) return { ok: true, feedId: feed.id, title: feed.title };
    const host = politeHost(feed.fetchUrl);
    if (!host) return { ok: false, reason: 'the URL has no host' };
    const deadline = Date.now() + this.opts.maxWaitMs;
    for (;;) {
      const got = await this.hosts.send(host, () =>
        this.fetcher.get(feed.fetchUrl, {
          accept: FEED_ACCEPT,
          maxBytes: this.opts.maxBytes,
          maxRedirects: MAX_REDIRECTS,
          timeoutMs: this.opts.timeoutMs,
        }),
      );
      if (got.kind === 'busy') {
        const at = this.hosts.turn(host, got.from);
        if (at > deadline)
          return {
            ok: false,
            reason: 'its host cannot be asked again yet',
            retryAfterSec: Math.max(1, Math.ceil((at - Date.now()) / 1000)),
          };
        await new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));
        continue;
      }
      if (got.kind === 'failed') {
        if (got.error.code === 'FETCH_BUSY') return { ok: false, reason: 'the server is busy', retryAfterSec: 5 };
        return { ok: false, reason: got.error.message };
      }
      const res = got.res;
      if (res.status !== 200) return { ok: false, reason: `it answered HTTP ${res.status}` };
      const firstFetch = feed.lastSuccessAt === null;
      const read = await this.documents.read({
        kind: 'feed',
        body: res.body,
        contentType: String(res.headers['content-type'] ?? ''),
        url: res.url,
        seen: feed.seen,
        firstFetch,
      });
      if (read.kind === 'busy') return { ok: false, reason: 'the server is busy', retryAfterSec: 5 };
      if (read.kind === 'too_complex') return { ok: false, reason: 'the document is too complex to read' };
      if (read.kind !== 'feed') return { ok: false, reason: 'it is not an RSS, Atom or JSON feed' };
      const header = (n: string) => {
        const v = res.headers[n];
        const s = Array.isArray(v) ? v[0] : v;
        return s && s.length <= 1024 ? s : null;
      };
      await saveFeed(this.db, feed.id, {
        fetchUrl: feed.fetchUrl,
        movedTo: feed.movedTo,
        movedSeen: feed.movedSeen,
        etag: header('etag'),
        lastModified: header('last-modified'),
        lastStatus: res.status,
        lastOutcome: firstFetch ? 'verified' : 'unchanged',
        lastSuccessAt: new Date(),
        nextFetchAfter: null,
        failures: 0,
        gone: false,
        hints: read.hints,
        title: read.title ?? feed.title,
        siteUrl: read.siteUrl ?? feed.siteUrl,
        namesPingd: read.namesPingd,
        seen: read.seen,
      });
      return { ok: true, feedId: feed.id, title: read.title ?? feed.title };
    }
  }
}
