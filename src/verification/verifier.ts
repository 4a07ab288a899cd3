// Owns one verification: given a claimed job, find the weblog's feed (the ping's, the remembered one, or
// autodiscovered from the homepage), wait for the host's turn, fetch it as a polite client (validators,
// A-IM: feed, compression, redirects, Retry-After, backoff, 410), decide what was new, and commit the
// feed's new state, the found items and the outcome of every open job of the weblog in one transaction.
// The decisions are manners.ts's and identity.ts's; this module does the I/O around them.
import type { Db, Queryable } from '../platform/db/database.js';
import type { FetchResult, SafeFetcher } from '../platform/fetch/safe-fetch.js';
import { decodeXml } from '../platform/xml/decode.js';
import { chooseFeed, discoverFeeds } from './discover.js';
import { novelty, type FeedItem } from './identity.js';
import { backoffMs, decideMove, isFailure, outcomeOfFetchError, outcomeOfStatus, permanentTarget, retryAfter, type Outcome } from './manners.js';
import { parseFeed } from './feed-parser.js';
import { deferJob, settleJobs, type Job } from './job-repository.js';
import { ensureFeed, feedById, insertItems, recordVerification, rememberFeed, saveFeed, type FeedRow, type FeedUpdate } from './feed-repository.js';
import { hostOf, type PoliteClient } from './polite.js';

export interface VerifierOptions {
  maxBytes: number;
  timeoutMs: number;
  feedIntervalSec: number;
}

export interface VerificationReport {
  outcome: Outcome;
  httpStatus: number | null;
  feedUrl: string | null;
  newItems: number;
  settled: number;
}

export interface FetchReport {
  status: number | null;
  bytes: number;
}

/** Redirects followed per fetch (the bound, above the safe fetcher's default of 3). */
export const MAX_REDIRECTS = 5;
/** A job deferred further than this (a long backoff or Retry-After) is settled now with the feed's state. */
const MAX_DEFER_MS = 15 * 60_000;
/** Claims of one job before it is given up (a job that kills its process must not loop forever). */
export const MAX_ATTEMPTS = 5;

const FEED_ACCEPT = 'application/rss+xml, application/atom+xml, application/rdf+xml;q=0.9, application/xml;q=0.8, text/xml;q=0.8, */*;q=0.5';
const HTML_ACCEPT = 'text/html, application/xhtml+xml;q=0.9, */*;q=0.5';

type Done = { kind: 'done'; report: VerificationReport } | { kind: 'deferred'; until: Date };

export class Verifier {
  constructor(
    private readonly db: Db,
    private readonly fetcher: SafeFetcher,
    /** The instance's per-host manners, shared with every other outbound request. */
    private readonly hosts: PoliteClient,
    private readonly opts: VerifierOptions,
    private readonly onFetch: (r: FetchReport) => void = () => undefined,
  ) {}

  /** Weblogs with a verification running in this instance: their other jobs wait for its outcome. */
  private readonly busy = new Set<number>();

  /** Runs one claimed job to its end (settled, or deferred for politeness). */
  async run(job: Job): Promise<Done> {
    // Jobs of one weblog claimed together: one fetch settles them all, so the others come back shortly
    // and find themselves settled.
    if (this.busy.has(job.weblogId)) return this.defer(job, new Date(Date.now() + 250));
    this.busy.add(job.weblogId);
    try {
      return await this.runAlone(job);
    } finally {
      this.busy.delete(job.weblogId);
    }
  }

  private async runAlone(job: Job): Promise<Done> {
    // A host this instance asked less than a gap ago: take a turn without asking the database (a burst on
    // one host would otherwise cost a slot query per job and per turn).
    const first = hostOf(job.pingRssUrl ?? job.weblogUrl);
    const free = first ? this.hosts.freeAt(first) : 0;
    if (first && free > Date.now()) return this.waitForHost(job, first, free);
    if (job.attempts > MAX_ATTEMPTS) return this.settle(job, 'unreachable', null, null, [], undefined);
    const started = new Date();

    // Which feed: the ping's, the weblog's remembered one, else the homepage's first RSS/Atom link.
    let feedUrl = job.pingRssUrl;
    if (!feedUrl && job.weblogFeedId !== null) feedUrl = (await feedById(this.db, job.weblogFeedId))?.url ?? null;
    feedUrl ??= job.weblogRssUrl;
    if (!feedUrl) {
      const page = await this.politeGet(job.weblogUrl, HTML_ACCEPT, {});
      if (page.kind === 'deferred') return this.defer(job, page.until);
      if (page.kind === 'busy') return this.waitForHost(job, page.host, page.from);
      if (page.kind === 'failed') return this.settle(job, page.outcome, page.status, null, [], undefined);
      if (page.res.status !== 200) {
        const o = outcomeOfStatus(page.res.status);
        return this.settle(job, o === 'body' ? 'not_a_feed' : o, page.res.status, null, [], undefined);
      }
      const html = decodeXml(page.res.body, String(page.res.headers['content-type'] ?? ''));
      const chosen = chooseFeed(discoverFeeds(html, page.res.url));
      if (!chosen) return this.settle(job, 'not_a_feed', page.res.status, null, [], undefined);
      feedUrl = chosen.url;
    }

    const feed = await ensureFeed(this.db, feedUrl);
    // Remembered at once: if the feed's host makes this job wait, its next run does not read the homepage again.
    if (job.weblogFeedId !== feed.id && !job.pingRssUrl) await rememberFeed(this.db, job.weblogId, feed.id);
    if (feed.gone) return this.settle(job, 'gone', feed.lastStatus, feed, [], undefined);
    const now = Date.now();
    if (feed.nextFetchAfter && feed.nextFetchAfter.getTime() > now) {
      // Backing off: no request before then. A short wait keeps the job; a long one settles it as the feed stands.
      if (feed.nextFetchAfter.getTime() - now <= MAX_DEFER_MS) return this.defer(job, feed.nextFetchAfter);
      return this.settle(job, feed.lastOutcome ?? 'unreachable', feed.lastStatus, feed, [], undefined);
    }
    if (feed.lastFetchAt && this.opts.feedIntervalSec > 0) {
      // One fetch per feed per interval: pings arriving sooner wait and are settled together by the next one.
      const next = feed.lastFetchAt.getTime() + this.opts.feedIntervalSec * 1000;
      if (next > now && feed.lastFetchAt.getTime() >= job.receivedAt.getTime()) {
        // The last fetch came after this ping: it already answered it.
        return this.settle(job, feed.lastOutcome === 'verified' ? 'unchanged' : (feed.lastOutcome ?? 'unchanged'), feed.lastStatus, feed, [], undefined);
      }
      if (next > now) return this.defer(job, new Date(next));
    }
    return this.fetchFeed(job, feed, started);
  }

  private async fetchFeed(job: Job, feed: FeedRow, started: Date): Promise<Done> {
    const validators: Record<string, string> = {};
    if (feed.etag) validators['if-none-match'] = feed.etag;
    if (feed.lastModified) validators['if-modified-since'] = feed.lastModified;
    // RFC 3229 with feeds: with a validator, ask for only the entries after it.
    if (feed.etag || feed.lastModified) validators['a-im'] = 'feed';

    let url = feed.fetchUrl;
    let xmlMove: string | undefined;
    let hopsLeft = MAX_REDIRECTS;
    for (;;) {
      const got = await this.politeGet(url, FEED_ACCEPT, validators, hopsLeft);
      if (got.kind === 'deferred') return this.defer(job, got.until);
      if (got.kind === 'busy') return this.waitForHost(job, got.host, got.from);
      if (got.kind === 'failed') return this.finishFailure(job, feed, got.outcome, got.status, got.retryAt, started);
      const res = got.res;
      const byStatus = outcomeOfStatus(res.status);
      if (byStatus !== 'body') return this.finishFailure(job, feed, byStatus, res.status, retryAfter(res.headers['retry-after'], new Date()), started, res);
      const parsed = parseFeed(res.body, String(res.headers['content-type'] ?? ''));
      if (parsed.kind === 'redirect') {
        // The RSS Feed State document: an XML redirect is a 301; an empty newLocation says the feed is over.
        if (!parsed.newLocation) return this.finishFailure(job, feed, 'gone', res.status, undefined, started, res);
        hopsLeft -= res.hops.length + 1;
        if (hopsLeft < 0 || !URL.canParse(parsed.newLocation, res.url)) return this.finishFailure(job, feed, 'unreachable', res.status, undefined, started, res);
        url = new URL(parsed.newLocation, res.url).href;
        xmlMove = url;
        continue;
      }
      if (parsed.kind === 'not_a_feed') return this.finishFailure(job, feed, 'not_a_feed', res.status, undefined, started, res);
      const firstFetch = feed.lastSuccessAt === null;
      const n = novelty(parsed.items, feed.seen, firstFetch);
      const outcome: Outcome = firstFetch || n.fresh.length > 0 ? 'verified' : 'unchanged';
      const moved = decideMove(feed.fetchUrl, xmlMove ?? permanentTarget(res.hops), { movedTo: feed.movedTo, movedSeen: feed.movedSeen });
      const update: FeedUpdate = {
        fetchUrl: moved.adopt ?? feed.fetchUrl,
        movedTo: moved.state.movedTo,
        movedSeen: moved.state.movedSeen,
        etag: header(res, 'etag') ?? (res.status === 226 ? feed.etag : null),
        lastModified: header(res, 'last-modified') ?? (res.status === 226 ? feed.lastModified : null),
        lastStatus: res.status,
        lastOutcome: outcome,
        lastSuccessAt: new Date(),
        nextFetchAfter: null,
        failures: 0,
        gone: false,
        hints: parsed.hints,
        title: parsed.title ?? feed.title,
        seen: n.seen,
      };
      return this.settle(job, outcome, res.status, feed, outcome === 'verified' ? n.publish : [], update, started);
    }
  }

  /** A response or failure that is not a feed: the state to keep, backoff on failures, gone on 410. */
  private finishFailure(job: Job, feed: FeedRow, outcome: Outcome, status: number | null, retryAt: Date | undefined, started: Date, res?: FetchResult): Promise<Done> {
    const failures = isFailure(outcome) ? feed.failures + 1 : outcome === 'not_modified' ? 0 : feed.failures;
    const backoff = isFailure(outcome) ? new Date(Date.now() + backoffMs(failures)) : null;
    const nextFetchAfter = retryAt && (!backoff || retryAt > backoff) ? retryAt : backoff;
    const moved = res ? decideMove(feed.fetchUrl, permanentTarget(res.hops), { movedTo: feed.movedTo, movedSeen: feed.movedSeen }) : undefined;
    const update: FeedUpdate = {
      fetchUrl: moved?.adopt ?? feed.fetchUrl,
      movedTo: moved ? moved.state.movedTo : feed.movedTo,
      movedSeen: moved ? moved.state.movedSeen : feed.movedSeen,
      // A 304 keeps the validators; anything else says nothing about them.
      etag: (res && header(res, 'etag')) ?? feed.etag,
      lastModified: (res && header(res, 'last-modified')) ?? feed.lastModified,
      lastStatus: status,
      lastOutcome: outcome,
      lastSuccessAt: outcome === 'not_modified' ? new Date() : feed.lastSuccessAt,
      nextFetchAfter,
      failures,
      gone: outcome === 'gone',
      hints: feed.hints,
      title: feed.title,
      seen: feed.seen,
    };
    return this.settle(job, outcome, status, feed, [], update, started);
  }

  /** One GET when the host's manners allow it (polite.ts); failures become outcomes. */
  private async politeGet(
    url: string,
    accept: string,
    headers: Record<string, string>,
    maxRedirects = MAX_REDIRECTS,
  ): Promise<{ kind: 'ok'; res: FetchResult } | { kind: 'deferred'; until: Date } | { kind: 'busy'; host: string; from: number } | { kind: 'failed'; outcome: Outcome; status: number | null; retryAt?: Date }> {
    const host = hostOf(url);
    if (!host) return { kind: 'failed', outcome: 'refused', status: null };
    const got = await this.hosts.send(host, () => this.fetcher.get(url, { accept, headers, maxBytes: this.opts.maxBytes, maxRedirects, timeoutMs: this.opts.timeoutMs }));
    if (got.kind === 'busy') {
      if (got.blockedUntil && got.blockedUntil.getTime() - Date.now() > MAX_DEFER_MS) return { kind: 'failed', outcome: 'unreachable', status: null, retryAt: got.blockedUntil };
      return { kind: 'busy', host, from: got.from };
    }
    if (got.kind === 'failed') {
      this.onFetch({ status: null, bytes: 0 });
      // Our own bound on requests in flight: try again shortly, it says nothing about the feed.
      if (got.error.code === 'FETCH_BUSY') return { kind: 'deferred', until: new Date(Date.now() + 1000) };
      return { kind: 'failed', outcome: outcomeOfFetchError(got.error.code), status: null };
    }
    this.onFetch({ status: got.res.status, bytes: got.res.body.length });
    return got;
  }

  /**
   * The host is busy until `from`: the job takes the next turn, one gap after the last one handed out, so
   * the jobs of a burst on one host come due one at a time instead of all at the host's next slot.
   */
  private waitForHost(job: Job, host: string, from: number): Promise<Done> {
    return this.defer(job, new Date(this.hosts.turn(host, from)));
  }

  private async defer(job: Job, until: Date): Promise<Done> {
    await deferJob(this.db, job.pingId, until);
    return { kind: 'deferred', until };
  }

  /** Commits the outcome: feed state, found items, every open job of the weblog, the weblog's record. */
  private async settle(job: Job, outcome: Outcome, httpStatus: number | null, feed: FeedRow | null, publish: FeedItem[], update: FeedUpdate | undefined, started = new Date()): Promise<Done> {
    const feedUrl = feed ? (update?.fetchUrl ?? feed.fetchUrl) : null;
    const newItems = publish.map((i) => ({ title: i.title, link: i.link, guid: i.guid }));
    const settled = await this.db.transaction(async (tx: Queryable) => {
      if (feed && update) await saveFeed(tx, feed.id, update);
      if (feed && publish.length > 0) {
        await insertItems(
          tx,
          publish.map((i) => ({
            feedId: feed.id,
            weblogId: job.weblogId,
            pingId: job.pingId,
            weblogUrl: job.weblogUrl,
            weblogName: job.weblogName,
            feedUrl: feed.url,
            title: i.title,
            link: i.link,
            guid: i.guid,
            publishedAt: i.published,
            summary: i.summary,
          })),
        );
      }
      const s = await settleJobs(tx, job.pingId, job.weblogId, started, outcome, httpStatus, feed?.id ?? null, outcome === 'verified' ? newItems : null);
      await recordVerification(
        tx,
        job.weblogId,
        feed?.id ?? null,
        { outcome, at: new Date().toISOString(), httpStatus, feedUrl, newItems },
        outcome === 'verified' ? s.lastReceivedAt : null,
      );
      return s;
    });
    return { kind: 'done', report: { outcome, httpStatus, feedUrl, newItems: publish.length, settled: settled.n } };
  }
}

function header(res: FetchResult, name: string): string | null {
  const v = res.headers[name];
  const s = Array.isArray(v) ? v[0] : v;
  return s && s.length <= 1024 ? s : null;
}
