// Owns the relay's work in one instance: deriving jobs from committed pings (a page per transaction,
// woken by accepted pings, at most every deriveGapMs, polling for other instances' pings), running claimed
// jobs (each target's turn and in-flight limit, Retry-After honoured, the extendedPing → ping fallback
// remembered), and what a batch of their outcomes writes (one statement per batch, in the shared outbox
// runner's transaction: platform/outbox/outbox.ts), so the relay's database work stays a few statements a
// second however many pings pass through.
import type { Db, Queryable } from '../../platform/db/database.js';
import type { Ran } from '../../platform/outbox/outbox.js';
import { deriveJobs, type RelayRule } from './derive-repository.js';
import { recordOutcomes, type JobOutcome, type OutcomeRow, type RelayJob, type TargetUpdate } from './job-repository.js';
import { RELAY_MARKER, type RelaySender, type SendResult } from './sender.js';
import type { RelayTarget } from './targets.js';
import { HostGate } from '../../platform/host-gate.js';
import { doublingBackoffMs } from '../../platform/retry.js';

export interface RelayTiming {
  /** First retry after a failure; doubled per attempt up to retryMaxMs. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** Failures in a row that open a target's breaker, and how long it stays open before a probe. */
  breakerAfter: number;
  breakerPauseMs: number;
  /** How far ahead one claim takes a target's turns. */
  windowMs: number;
  /** Longest an outcome waits before it is written (with the others of its batch). */
  flushMs: number;
  /** Least time between two derivations prompted by accepted pings (1 s while intake is busy). */
  deriveGapMs: number;
  /** How often an instance looks for pings accepted by other instances. */
  pollMs: number;
}

export const DEFAULT_RELAY_TIMING: RelayTiming = {
  retryBaseMs: 30_000,
  retryMaxMs: 3_600_000,
  breakerAfter: 5,
  breakerPauseMs: 60_000,
  windowMs: 5_000,
  flushMs: 100,
  deriveGapMs: 200,
  pollMs: 1_000,
};

/** Pings read per derivation statement. */
export const DERIVE_PAGE = 500;
/** While intake is busy, pages are this far apart. */
const BUSY_GAP_MS = 1_000;
/** How long a job waits when the outbound client is full (FETCH_BUSY), as the hubs' deliveries do. */
const BUSY_WAIT_MS = 1_000;

export type RelayEvent = { job: RelayJob; outcome: JobOutcome | 'dead'; result?: SendResult };

/** One job's outcome, and what it says of its target (none when no request was made). */
export interface RelayRecord {
  row: OutcomeRow;
  update: TargetUpdate | null;
}

export interface RelayOptions {
  rule: RelayRule;
  targets: readonly RelayTarget[];
  maxAttempts: number;
  minIntervalSec: number;
  /** RELAY_LOOP_WINDOW: a weblog relayed to a target this recently is not relayed to it again. */
  loopWindowSec: number;
  /** RELAY_QUEUE_MAX: weblogs one target may have waiting; beyond it the stalest are dropped. */
  queueMax: number;
  /** Requests in flight at once in this instance (RELAY_CONCURRENCY). */
  concurrency: number;
  /** Jobs the worker holds at once (claimed, waiting for their turn or a slot, or in flight). */
  hand: number;
  /** A job's lease, and the longest one request (with its fallback) may take. */
  leaseMs: number;
  sendMs: number;
  timing: RelayTiming;
  intakeBusy(): boolean;
  /** Told after derived jobs were committed (the worker claims them). */
  onQueued(): void;
  onEvent(e: RelayEvent): void;
  /** Told after a derivation dropped waiting weblogs at the bound or suppressed pings by the loop window. */
  onSkipped(target: string, reason: 'dropped' | 'suppressed', n: number): void;
  onError(err: Error, what: string): void;
}

/** A per-target count of requests in flight, with waiters. */
class Slots {
  private readonly used = new Map<string, number>();
  private readonly waiting = new Map<string, (() => void)[]>();

  async enter(key: string, max: number): Promise<() => void> {
    while ((this.used.get(key) ?? 0) >= max) await new Promise<void>((r) => this.waiting.set(key, [...(this.waiting.get(key) ?? []), r]));
    this.used.set(key, (this.used.get(key) ?? 0) + 1);
    return () => {
      this.used.set(key, (this.used.get(key) ?? 1) - 1);
      const w = this.waiting.get(key)?.shift();
      if (w) w();
    };
  }
}

export class Relay {
  private readonly byUrl: Map<string, RelayTarget>;
  /** Targets found to answer a fault to extendedPing (also stored: ping_only). */
  private readonly pingOnly = new Set<string>();
  /** Retry-After heard by this instance: no request to the target before then. */
  private readonly blocked = new Map<string, number>();
  /** Per target, the rate's spacing kept between the requests that actually leave this instance. */
  private readonly departures = new HostGate(1);
  private readonly slots = new Slots();
  private deriveTimer: NodeJS.Timeout | undefined;
  private deriving: Promise<void> | undefined;
  private deriveAgain = false;
  private lastDerive = 0;
  private closed = false;
  private readonly closing = new AbortController();

  constructor(
    private readonly db: Db,
    private readonly sender: RelaySender,
    private readonly opts: RelayOptions,
  ) {
    this.byUrl = new Map(opts.targets.map((t) => [t.url, t]));
  }

  get targetUrls(): string[] {
    return [...this.byUrl.keys()];
  }

  start(): void {
    this.scheduleDerive(0);
  }

  /** Pings were accepted (or released): derive soon, but not more often than deriveGapMs (1 s under a burst). */
  pinged(): void {
    if (this.closed) return;
    if (this.deriving) this.deriveAgain = true;
    else this.scheduleDerive(Math.max(0, this.lastDerive + this.gap() - performance.now()));
  }

  private gap(): number {
    return this.opts.intakeBusy() ? BUSY_GAP_MS : this.opts.timing.deriveGapMs;
  }

  private scheduleDerive(ms: number): void {
    if (this.closed) return;
    if (this.deriveTimer) {
      if (ms >= this.opts.timing.pollMs) return;
      clearTimeout(this.deriveTimer);
    }
    this.deriveTimer = setTimeout(() => {
      this.deriveTimer = undefined;
      this.deriving = this.deriveAll().finally(() => {
        this.deriving = undefined;
        const again = this.deriveAgain;
        this.deriveAgain = false;
        this.scheduleDerive(again ? this.gap() : this.opts.timing.pollMs);
      });
    }, ms);
    this.deriveTimer.unref();
  }

  /** Derives page after page until the cursor has caught up (or another instance holds it). */
  async deriveAll(): Promise<void> {
    const targets = this.targetUrls;
    for (;;) {
      if (this.closed) return;
      this.lastDerive = performance.now();
      let page;
      try {
        page = await deriveJobs(this.db, {
          rule: this.opts.rule,
          targets,
          marker: RELAY_MARKER,
          minIntervalSec: this.opts.minIntervalSec,
          loopWindowSec: this.opts.loopWindowSec,
          queueMax: this.opts.queueMax,
          pageSize: DERIVE_PAGE,
        });
      } catch (err) {
        this.opts.onError(err as Error, 'deriving relay jobs');
        return;
      }
      if (!page) return;
      for (const [target, n] of Object.entries(page.dropped)) this.opts.onSkipped(target, 'dropped', n);
      for (const [target, n] of Object.entries(page.suppressed)) this.opts.onSkipped(target, 'suppressed', n);
      if (page.queued > 0) this.opts.onQueued();
      if (page.read < DERIVE_PAGE) return;
      // A backlog: page after page, spaced while intake is busy.
      if (this.opts.intakeBusy()) await sleep(BUSY_GAP_MS, this.closing.signal);
    }
  }

  /**
   * Runs one claimed job: waits for the target's turn and a free slot, sends, and returns the outcome for
   * the batch (record()). Not deferred (the worker claims more at once) only when the jobs in hand have
   * fallen to half the hand: claims then take many jobs each, instead of one statement per finished job
   * (on the embedded database, one session shared with intake, a claim per relay cost intake most of its
   * speed).
   */
  async run(job: RelayJob): Promise<Ran<RelayRecord>> {
    this.inHand++;
    let record: RelayRecord;
    try {
      record = await this.runJob(job);
    } finally {
      this.inHand--;
    }
    return { record, deferred: this.inHand > this.opts.hand / 2 };
  }

  private inHand = 0;

  private async runJob(job: RelayJob): Promise<RelayRecord> {
    const target = this.byUrl.get(job.target);
    if (!target) return this.defer(job, new Date(Date.now() + this.opts.timing.pollMs));
    await sleep(job.sendAt.getTime() - Date.now(), this.closing.signal);
    if (this.closed) return this.defer(job, new Date());
    const releaseTarget = await this.slots.enter(job.target, target.concurrency);
    const release = await this.slots.enter('', this.opts.concurrency);
    let result: SendResult;
    try {
      if (this.closed) return this.defer(job, new Date());
      // Checked once a slot is ours: the request before may just have brought a Retry-After.
      const blockedUntil = this.blocked.get(job.target) ?? 0;
      if (blockedUntil > Date.now()) return this.defer(job, new Date(blockedUntil));
      // Turns are handed out ahead, by the target's row; a request that left late (a busy event loop, a
      // slow slot) must not bring the next one closer than the rate allows, so within this instance the
      // spacing is also kept from the requests that actually left (as verification does per host).
      await this.departures.spaced(job.target, 60_000 / target.ratePerMin, this.closing.signal);
      if (this.closed) return this.defer(job, new Date());
      // A job that waited so long for a slot that its lease could run out mid-request is given back
      // (another instance may claim it then: it must not be sent twice).
      if (Date.now() + this.opts.sendMs > job.claimedAt + this.opts.leaseMs) return this.defer(job, new Date());
      const ping = { name: job.name, url: job.weblogUrl, changesUrl: job.changesUrl, rssUrl: job.rssUrl, tags: job.tags };
      result = await this.sender.send(job.target, ping, target.method === 'ping' || job.pingOnly || this.pingOnly.has(job.target));
    } finally {
      release();
      releaseTarget();
    }
    if (result.fellBack) this.pingOnly.add(job.target);
    const u: TargetUpdate = { ...noUpdate(job.target), pingOnly: result.fellBack };
    // The app's outbound client had no room (its in-flight bound is shared with verification and the
    // hubs): not the target's failure, so no attempt is spent; tried again shortly.
    if (result.outcome === 'failed' && result.code === 'FETCH_BUSY') return this.defer(job, new Date(Date.now() + BUSY_WAIT_MS), u);
    if (result.outcome === 'failed') {
      u.failed++;
      u.lastError = `${result.code}: ${result.error}`.slice(0, 300);
      let retryAt = Date.now() + doublingBackoffMs(job.attempts, this.opts.timing.retryBaseMs, this.opts.timing.retryMaxMs);
      if (result.blockedUntil) {
        const until = result.blockedUntil.getTime();
        this.blocked.set(job.target, until);
        u.openUntil = new Date(until);
        retryAt = Math.max(retryAt, until);
      }
      this.opts.onEvent({ job, outcome: job.attempts >= this.opts.maxAttempts ? 'dead' : 'failed', result });
      const row: OutcomeRow = {
        id: job.id,
        seq: job.seq,
        target: job.target,
        outcome: 'failed',
        error: u.lastError,
        retryAt: new Date(retryAt),
      };
      return { row, update: u };
    }
    if (result.outcome === 'delivered') u.delivered++;
    else u.refused++;
    this.opts.onEvent({ job, outcome: result.outcome, result });
    return { row: { id: job.id, seq: job.seq, target: job.target, outcome: result.outcome, error: null, retryAt: null }, update: u };
  }

  private defer(job: RelayJob, until: Date, update: TargetUpdate | null = null): RelayRecord {
    this.opts.onEvent({ job, outcome: 'deferred' });
    return { row: { id: job.id, seq: job.seq, target: job.target, outcome: 'deferred', error: null, retryAt: until }, update };
  }

  /** Writes a batch of outcomes, with what they say of each target summed, in one statement. */
  async record(q: Queryable, records: readonly RelayRecord[]): Promise<void> {
    await recordOutcomes(
      q,
      records.map((r) => r.row),
      mergeUpdates(records.flatMap((r) => (r.update ? [r.update] : []))),
      {
        maxAttempts: this.opts.maxAttempts,
        // A ping folded into a job after its lease ran out, while it was being sent: within the loop window.
        minIntervalSec: Math.max(this.opts.minIntervalSec, this.opts.loopWindowSec),
        breakerAfter: this.opts.timing.breakerAfter,
        breakerPauseSec: this.opts.timing.breakerPauseMs / 1000,
      },
    );
  }

  /** Stops deriving and waiting; jobs still waiting for their turn are given back (the outbox writes them on close). */
  stop(): void {
    this.closed = true;
    clearTimeout(this.deriveTimer);
    this.closing.abort();
  }

  /** Resolves once the derivation under way (if any) has ended. */
  async drained(): Promise<void> {
    await this.deriving;
  }
}

function noUpdate(target: string): TargetUpdate {
  return { target, delivered: 0, refused: 0, failed: 0, lastError: null, openUntil: null, pingOnly: false };
}

/**
 * The jobs' updates of one batch, one per target, in the batch's order: counts summed, the last error
 * seen, the latest Retry-After, and pingOnly if any said so.
 */
export function mergeUpdates(updates: readonly TargetUpdate[]): TargetUpdate[] {
  const by = new Map<string, TargetUpdate>();
  for (const u of updates) {
    const m = by.get(u.target) ?? noUpdate(u.target);
    by.set(u.target, {
      target: u.target,
      delivered: m.delivered + u.delivered,
      refused: m.refused + u.refused,
      failed: m.failed + u.failed,
      lastError: u.lastError ?? m.lastError,
      openUntil: u.openUntil && (!m.openUntil || m.openUntil < u.openUntil) ? u.openUntil : m.openUntil,
      pingOnly: m.pingOnly || u.pingOnly,
    });
  }
  return [...by.values()];
}

/** Resolves after `ms` or when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
