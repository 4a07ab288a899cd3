// Owns one verification: given a claimed job, find the weblog's feed (the ping's, the remembered one, or
// autodiscovered from the homepage), wait for the host's turn, fetch it as a polite client (validators,
// A-IM: feed, compression, redirects, Retry-After, backoff, 410), decide what was new, and commit the
// feed's new state, the found items and the outcome of every open job of the weblog in one transaction.
// The decisions are manners.ts's and identity.ts's; documents are read on a worker thread (documents.ts);
// this module does the I/O around them. A job keeps its progress when it waits (the requests it sent, the
// XML redirect it was following), and has a bound on requests and time whatever path it takes.
import { isHeld } from '../spam/spam-repository.js';
import type { Db, Queryable } from '../platform/db/database.js';
import type { FetchResult, SafeFetcher } from '../platform/fetch/safe-fetch.js';
import { backoffMs, decideMove, isFailure, outcomeOfFetchError, outcomeOfStatus, permanentTarget } from './manners.js';
import type { Outcome } from '../platform/outcomes.js';
import { retryAfter } from '../platform/retry.js';
import type { PublishedItem } from './document-task.js';
import type { DocumentReader } from './documents.js';
import { deferJob, settleJobs, type Job, type Progress } from './job-repository.js';
import {
  ensureFeed,
  feedById,
  insertItems,
  recordVerification,
  rememberFeed,
  saveFeed,
  type FeedRow,
  type FeedUpdate,
} from './feed-repository.js';
import { politeHost, type PoliteClient } from '../platform/fetch/polite.js';
import type { FeedChange, FeedChanges, FeedCheck, FeedInterest } from '../platform/feed-changes.js';

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
/**
 * Requests one job may send, every hop counted: a homepage and a feed, each with MAX_REDIRECTS hops.
 * Beyond it the job is settled `unreachable` whatever path it was on.
 */
export const MAX_JOB_REQUESTS = 2 * (MAX_REDIRECTS + 1);
/** Longest a job may go on after its first request (waiting for hosts' turns included): then `unreachable`. */
export const MAX_JOB_MS = MAX_DEFER_MS;

/** Outcomes of a feed that answered as a feed the last time it was fetched. */
export const KNOWN_FEED: ReadonlySet<string> = new Set(['verified', 'unchanged', 'not_modified']);

export const FEED_ACCEPT =
  'application/rss+xml, application/atom+xml, application/rdf+xml;q=0.9, application/xml;q=0.8, text/xml;q=0.8, */*;q=0.5';
const HTML_ACCEPT = 'text/html, application/xhtml+xml;q=0.9, */*;q=0.5';

type Done = { kind: 'done'; report: VerificationReport } | { kind: 'deferred'; until: Date };

/** One run of a job (or of a check, which has none): its progress as claimed, updated by every request it sends. */
interface Run {
  job: Job | null;
  progress: Progress;
}

export class Verifier {
  constructor(
    private readonly db: Db,
    private readonly fetcher: SafeFetcher,
    /** The instance's per-host manners, shared with every other outbound request. */
    private readonly hosts: PoliteClient,
    /** Reads fetched documents on worker threads. */
    private readonly documents: DocumentReader,
    private readonly opts: VerifierOptions,
    private readonly onFetch: (r: FetchReport) => void = () => undefined,
    /** Who hears that a feed changed with new entries (the WebSub hub, rssCloud): platform/feed-changes.ts. */
    private readonly changes?: FeedChanges,
  ) {}

  /**
   * Fetches a feed no ping asked about (a new WebSub subscription's topic, a poll of one that never pings),
   * with the same manners, bounds and state as a ping's verification, and commits what it found (new
   * entries are a change its watchers hear of). Deferred when the host's manners say not yet.
   */
  async check(url: string): Promise<FeedCheck> {
    const feed = await ensureFeed(this.db, url);
    const done = (f: FeedRow, outcome: Outcome): FeedCheck => ({
      kind: 'done',
      feedId: f.id,
      outcome,
      feed: outcome === 'verified' || outcome === 'unchanged' || (outcome === 'not_modified' && f.lastSuccessAt !== null),
      gone: outcome === 'gone',
      hints: { ttl: f.hints.ttl, updatePeriod: f.hints.updatePeriod, updateFrequency: f.hints.updateFrequency },
    });
    if (feed.gone) return done(feed, 'gone');
    const now = Date.now();
    // One fetch per feed per VERIFY_FEED_INTERVAL, as for pings: a feed read as one within the interval
    // answers from its state, so a thousand new subscribers of one feed cost one fetch, not a thousand
    // spaced a host gap apart (measured: 1,000 WebSub subscriptions to one topic took ~1,000 s to store).
    if (
      this.opts.feedIntervalSec > 0 &&
      feed.lastFetchAt &&
      feed.lastSuccessAt &&
      now - feed.lastFetchAt.getTime() < this.opts.feedIntervalSec * 1000 &&
      feed.lastOutcome !== null &&
      KNOWN_FEED.has(feed.lastOutcome)
    )
      return done(feed, 'unchanged');
    if (feed.nextFetchAfter && feed.nextFetchAfter.getTime() > now) {
      if (feed.nextFetchAfter.getTime() - now <= MAX_DEFER_MS) return { kind: 'deferred', until: feed.nextFetchAfter };
      return done(feed, feed.lastOutcome ?? 'unreachable');
    }
    const host = politeHost(feed.fetchUrl);
    const free = host ? this.hosts.freeAt(host) : 0;
    if (host && free > now) return { kind: 'deferred', until: new Date(this.hosts.turn(host, free)) };
    const r = await this.fetchFeed({ job: null, progress: { requests: 0, startedAt: null, resume: null } }, feed, new Date());
    if (r.kind === 'deferred') return r;
    const after = (await feedById(this.db, feed.id)) ?? feed;
    return done(after, r.report.outcome);
  }

  /** Weblogs with a verification running in this instance: their other jobs wait for its outcome. */
  private readonly busy = new Set<number>();
  /** Runs one claimed job to its end (settled, or deferred for politeness). */
  async run(job: Job): Promise<Done> {
    // Jobs of one weblog claimed together: one fetch settles them all, so the others come back shortly
    // and find themselves settled.
    if (this.busy.has(job.weblogId)) return this.defer({ job, progress: job.progress }, new Date(Date.now() + 250));
    this.busy.add(job.weblogId);
    try {
      return await this.runAlone(job);
    } finally {
      this.busy.delete(job.weblogId);
    }
  }

  private async runAlone(job: Job): Promise<Done> {
    const run: Run = { job, progress: { ...job.progress } };
    // A host this instance asked less than a gap ago: take a turn without asking the database (a burst on
    // one host would otherwise cost a slot query per job and per turn).
    const first = politeHost(job.progress.resume?.url ?? job.pingRssUrl ?? job.weblogUrl);
    const free = first ? this.hosts.freeAt(first) : 0;
    if (first && free > Date.now()) return this.waitForHost(run, first, free);
    if (job.attempts > MAX_ATTEMPTS || this.overBound(run)) return this.settle(job, 'unreachable', null, null, [], undefined);
    const started = new Date();

    // Which feed: the ping's, the weblog's remembered one, else the homepage's first RSS/Atom link.
    let feedUrl = job.pingRssUrl;
    if (!feedUrl && job.weblogFeedId !== null) feedUrl = (await feedById(this.db, job.weblogFeedId))?.url ?? null;
    feedUrl ??= job.weblogRssUrl;
    if (!feedUrl) {
      const page = await this.politeGet(run, job.weblogUrl, HTML_ACCEPT, {});
      if (page.kind === 'deferred') return this.defer(run, page.until);
      if (page.kind === 'busy') return this.waitForHost(run, page.host, page.from);
      if (page.kind === 'failed') return this.settle(job, page.outcome, page.status, null, [], undefined);
      if (page.res.status !== 200) {
        const o = outcomeOfStatus(page.res.status);
        return this.settle(job, o === 'body' ? 'not_a_feed' : o, page.res.status, null, [], undefined);
      }
      const read = await this.documents.read({
        kind: 'page',
        body: page.res.body,
        contentType: String(page.res.headers['content-type'] ?? ''),
        url: page.res.url,
      });
      if (read.kind === 'busy') return this.defer(run, new Date(Date.now() + 1000));
      if (read.kind === 'too_complex') return this.settle(job, 'too_complex', page.res.status, null, [], undefined);
      if (read.kind !== 'page' || !read.feedUrl) return this.settle(job, 'not_a_feed', page.res.status, null, [], undefined);
      feedUrl = read.feedUrl;
    }

    const feed = await ensureFeed(this.db, feedUrl);
    // Remembered at once: if the feed's host makes this job wait, its next run does not read the homepage again.
    if (job.weblogFeedId !== feed.id && !job.pingRssUrl) await rememberFeed(this.db, job.weblogId, feed.id);
    if (feed.gone) return this.settle(job, 'gone', feed.lastStatus, feed, [], undefined);
    const now = Date.now();
    if (feed.nextFetchAfter && feed.nextFetchAfter.getTime() > now) {
      // Backing off: no request before then. A short wait keeps the job; a long one settles it as the feed stands.
      if (feed.nextFetchAfter.getTime() - now <= MAX_DEFER_MS) return this.defer(run, feed.nextFetchAfter);
      return this.settle(job, feed.lastOutcome ?? 'unreachable', feed.lastStatus, feed, [], undefined);
    }
    if (feed.lastFetchAt && this.opts.feedIntervalSec > 0 && !run.progress.resume) {
      // One fetch per feed per interval: pings arriving sooner wait and are settled together by the next one.
      const next = feed.lastFetchAt.getTime() + this.opts.feedIntervalSec * 1000;
      if (next > now && feed.lastFetchAt.getTime() >= job.receivedAt.getTime()) {
        // The last fetch came after this ping: it already answered it.
        return this.settle(
          job,
          feed.lastOutcome === 'verified' ? 'unchanged' : (feed.lastOutcome ?? 'unchanged'),
          feed.lastStatus,
          feed,
          [],
          undefined,
        );
      }
      if (next > now) return this.defer(run, new Date(next));
    }
    return this.fetchFeed(run, feed, started);
  }

  /** Whether the job has used its requests or its time (counted from its first request). */
  private overBound(run: Run): boolean {
    const p = run.progress;
    return p.requests >= MAX_JOB_REQUESTS || (p.startedAt !== null && Date.now() - p.startedAt.getTime() > MAX_JOB_MS);
  }

  private async fetchFeed(run: Run, feed: FeedRow, started: Date): Promise<Done> {
    const { job } = run;
    const validators: Record<string, string> = {};
    if (feed.etag) validators['if-none-match'] = feed.etag;
    if (feed.lastModified) validators['if-modified-since'] = feed.lastModified;
    // RFC 3229 with feeds: with a validator, ask for only the entries after it.
    if (feed.etag || feed.lastModified) validators['a-im'] = 'feed';

    // A job that was following an XML redirect when it had to wait goes on from its target.
    const resume = run.progress.resume;
    let url = resume?.url ?? feed.fetchUrl;
    let xmlMove: string | undefined = resume?.url;
    let hopsLeft = resume?.hopsLeft ?? MAX_REDIRECTS;
    for (;;) {
      if (this.overBound(run)) return this.finishFailure(job, feed, 'unreachable', null, undefined, started);
      const got = await this.politeGet(run, url, FEED_ACCEPT, validators, hopsLeft);
      if (got.kind === 'deferred') return this.defer(run, got.until);
      if (got.kind === 'busy') return this.waitForHost(run, got.host, got.from);
      if (got.kind === 'failed') return this.finishFailure(job, feed, got.outcome, got.status, got.retryAt, started);
      const res = got.res;
      const byStatus = outcomeOfStatus(res.status);
      if (byStatus !== 'body')
        return this.finishFailure(job, feed, byStatus, res.status, retryAfter(res.headers['retry-after'], new Date()), started, res);
      const firstFetch = feed.lastSuccessAt === null;
      // A first fetch has nothing to compare with: no change to announce, so nobody is asked. Nor is anybody
      // for a weblog held as spam (SPAM_FILTER=hold): WebSub feed subscribers and rssCloud are not told of it.
      const interest: FeedInterest =
        this.changes && !firstFetch && !(job !== null && (await isHeld(this.db, job.weblogId)))
          ? await this.changes.interest(this.db, feed.id)
          : 'none';
      const contentType = String(res.headers['content-type'] ?? '');
      const read = await this.documents.read({
        kind: 'feed',
        body: res.body,
        contentType,
        url: res.url,
        seen: feed.seen,
        firstFetch,
        excerpt: interest === 'excerpt',
      });
      if (read.kind === 'busy') return this.defer(run, new Date(Date.now() + 1000));
      if (read.kind === 'too_complex') return this.finishFailure(job, feed, 'too_complex', res.status, undefined, started, res);
      if (read.kind === 'redirect') {
        // The RSS Feed State document: an XML redirect is a 301; an empty newLocation says the feed is over.
        if (!read.newLocation) return this.finishFailure(job, feed, 'gone', res.status, undefined, started, res);
        hopsLeft -= res.hops.length + 1;
        if (hopsLeft < 0 || !URL.canParse(read.newLocation, res.url))
          return this.finishFailure(job, feed, 'unreachable', res.status, undefined, started, res);
        url = new URL(read.newLocation, res.url).href;
        xmlMove = url;
        // Kept with the job: if the target's host makes it wait, the next run asks the target, not the old URL.
        run.progress.resume = { url, hopsLeft };
        continue;
      }
      if (read.kind !== 'feed') return this.finishFailure(job, feed, 'not_a_feed', res.status, undefined, started, res);
      const outcome: Outcome = firstFetch || read.fresh > 0 ? 'verified' : 'unchanged';
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
        hints: read.hints,
        title: read.title ?? feed.title,
        siteUrl: read.siteUrl ?? feed.siteUrl,
        // Read anew from every document that parses as a feed: a publisher that stops naming pingd loses it.
        namesPingd: read.namesPingd,
        seen: read.seen,
      };
      const change: FeedChange | undefined =
        interest !== 'none' && !firstFetch && read.publish.length > 0
          ? {
              feedId: feed.id,
              feedUrl: feed.url,
              fetchUrl: update.fetchUrl,
              via: job ? 'ping' : 'check',
              entries: read.publish.map((i) => ({ title: i.title, link: i.link, guid: i.guid })),
              excerpt: read.excerpt ? { contentType: read.excerpt.contentType, body: Buffer.from(read.excerpt.body) } : null,
            }
          : undefined;
      return this.settle(job, outcome, res.status, feed, outcome === 'verified' ? read.publish : [], update, started, change);
    }
  }

  /** A response or failure that is not a feed: the state to keep, backoff on failures, gone on 410. */
  private finishFailure(
    job: Job | null,
    feed: FeedRow,
    outcome: Outcome,
    status: number | null,
    retryAt: Date | undefined,
    started: Date,
    res?: FetchResult,
  ): Promise<Done> {
    const failures = isFailure(outcome) ? feed.failures + 1 : outcome === 'not_modified' ? 0 : feed.failures;
    const backoff = isFailure(outcome) ? new Date(Date.now() + backoffMs(failures)) : null;
    const nextFetchAfter = retryAt && (!backoff || retryAt > backoff) ? retryAt : backoff;
    const moved = res
      ? decideMove(feed.fetchUrl, permanentTarget(res.hops), { movedTo: feed.movedTo, movedSeen: feed.movedSeen })
      : undefined;
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
      siteUrl: feed.siteUrl,
      namesPingd: feed.namesPingd,
      seen: feed.seen,
    };
    return this.settle(job, outcome, status, feed, [], update, started);
  }

  /** One GET when the host's manners allow it (platform/fetch/polite.ts), counted against the job's bound; failures become outcomes. */
  private async politeGet(
    run: Run,
    url: string,
    accept: string,
    headers: Record<string, string>,
    maxRedirects = MAX_REDIRECTS,
  ): Promise<
    | { kind: 'ok'; res: FetchResult }
    | { kind: 'deferred'; until: Date }
    | { kind: 'busy'; host: string; from: number }
    | { kind: 'failed'; outcome: Outcome; status: number | null; retryAt?: Date }
  > {
    const host = politeHost(url);
    if (!host) return { kind: 'failed', outcome: 'refused', status: null };
    const got = await this.hosts.send(host, async () => {
      // Counted as it leaves: every hop it follows is added when it answers.
      run.progress.requests++;
      run.progress.startedAt ??= new Date();
      const res = await this.fetcher.get(url, {
        accept,
        headers,
        maxBytes: this.opts.maxBytes,
        maxRedirects,
        timeoutMs: this.opts.timeoutMs,
      });
      run.progress.requests += res.hops.length;
      return res;
    });
    if (got.kind === 'busy') {
      if (got.blockedUntil && got.blockedUntil.getTime() - Date.now() > MAX_DEFER_MS)
        return { kind: 'failed', outcome: 'unreachable', status: null, retryAt: got.blockedUntil };
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
  private waitForHost(run: Run, host: string, from: number): Promise<Done> {
    return this.defer(run, new Date(this.hosts.turn(host, from)));
  }

  private async defer(run: Run, until: Date): Promise<Done> {
    if (run.job) await deferJob(this.db, run.job.pingId, until, run.progress);
    return { kind: 'deferred', until };
  }

  /**
   * Commits the outcome: feed state, found items, every open job of the weblog, the weblog's record (a
   * check has only the feed's state), and the watchers' work for a change, all in one transaction.
   */
  private async settle(
    job: Job | null,
    outcome: Outcome,
    httpStatus: number | null,
    feed: FeedRow | null,
    publish: PublishedItem[],
    update: FeedUpdate | undefined,
    started = new Date(),
    change?: FeedChange,
  ): Promise<Done> {
    const feedUrl = feed ? (update?.fetchUrl ?? feed.fetchUrl) : null;
    const newItems = publish.map((i) => ({ title: i.title, link: i.link, guid: i.guid }));
    const settled = await this.db.transaction(async (tx: Queryable) => {
      if (feed && update) await saveFeed(tx, feed.id, update);
      // In the outcome's transaction: the deliveries it promises are committed with it, or neither is.
      if (change) await this.changes?.write(tx, change);
      if (!job) return { n: 0, lastReceivedAt: null };
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
      const s = await settleJobs(
        tx,
        job.pingId,
        job.weblogId,
        started,
        outcome,
        httpStatus,
        feed?.id ?? null,
        outcome === 'verified' ? newItems : null,
      );
      await recordVerification(
        tx,
        job.weblogId,
        feed?.id ?? null,
        { outcome, at: new Date().toISOString(), httpStatus, feedUrl, newItems },
        outcome === 'verified' ? s.lastReceivedAt : null,
      );
      return s;
    });
    if (change) this.changes?.committed(change);
    return { kind: 'done', report: { outcome, httpStatus, feedUrl, newItems: publish.length, settled: settled.n } };
  }
}

function header(res: FetchResult, name: string): string | null {
  const v = res.headers[name];
  const s = Array.isArray(v) ? v[0] : v;
  return s && s.length <= 1024 ? s : null;
}
