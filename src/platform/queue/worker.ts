// Owns the loop of one instance over a durable queue in the database (verification's jobs, WebSub's
// tasks): claim due jobs while fewer than `concurrency` run, run each, and look again when a job ends, when
// this instance queued work (wake), or every poll interval (work queued by other instances, deferred jobs
// coming due). What a job is and how it is claimed (FOR UPDATE SKIP LOCKED under a lease) is the caller's.
// Closing stops claiming and waits for the jobs in hand; an unfinished job's lease runs out and another
// instance (or the next start) claims it again, so nothing queued is lost.

/** Least time between two claims prompted by wake() (work queued here, finished jobs). */
const WAKE_GAP_MS = 20;
/** While intake is busy: how often to look whether it still is, and the longest the worker yields to it. */
const YIELD_CHECK_MS = 100;
const YIELD_MAX_MS = 10_000;

export interface WorkerOptions<J> {
  concurrency: number;
  pollMs: number;
  claim(limit: number): Promise<J[]>;
  /** Runs a job; 'deferred' when it was put back for later (no point looking for more work at once). */
  run(job: J): Promise<'done' | 'deferred'>;
  onError(err: Error, job?: J): void;
  /**
   * Whether intake is busy right now (a burst of pings). Queued work is promised, not urgent:
   * while intake is busy the worker claims nothing (but at least once every YIELD_MAX_MS), so a burst of
   * pings is not slowed by its own verifications; they catch up when it ends. Measured: a claim per second
   * under a burst still rewrote every waiting job of a busy host once (deferral), which doubled the
   * database's cost per ping (docs/design/verification.md).
   */
  intakeBusy?(): boolean;
  /**
   * A finished job's place is refilled at once, not one wake gap later: for a claim served from memory
   * (the outbox keeps claimed rows). Wakes from outside (work queued) keep the gap either way.
   */
  refillAtOnce?: boolean;
}

export class QueueWorker<J> {
  private running = 0;
  private claiming = false;
  private again = false;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  private lastClaimAt = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly opts: WorkerOptions<J>) {}

  start(): void {
    this.schedule(0);
  }

  /**
   * Something may be due now (work was queued here, a job finished): claim soon, but not more often
   * than every WAKE_GAP_MS. Under a burst of pings every request wakes the verification worker, and a claim
   * per request would cost the database as much as intake itself.
   */
  wake(): void {
    if (this.closed) return;
    if (this.claiming) this.again = true;
    else this.schedule(Math.max(0, this.lastClaimAt + WAKE_GAP_MS - performance.now()));
  }

  get active(): number {
    return this.running;
  }

  private schedule(ms: number): void {
    if (this.closed) return;
    const at = performance.now() + ms;
    // An earlier claim already planned stands.
    if (this.timer && this.timerAt <= at) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Number.POSITIVE_INFINITY;
      void this.tick();
    }, ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.closed || this.claiming) return;
    if (this.opts.intakeBusy?.() && performance.now() - this.lastClaimAt < YIELD_MAX_MS) return this.schedule(YIELD_CHECK_MS);
    const free = this.opts.concurrency - this.running;
    if (free <= 0) return this.schedule(this.opts.pollMs);
    this.claiming = true;
    this.again = false;
    this.lastClaimAt = performance.now();
    let jobs: J[] = [];
    try {
      jobs = await this.opts.claim(free);
    } catch (err) {
      this.opts.onError(err as Error);
    } finally {
      this.claiming = false;
    }
    for (const job of jobs) this.launch(job);
    // A full claim may have left more behind; an empty one waits for the next wake or poll.
    if (this.again || (jobs.length === free && free > 0)) this.wake();
    else this.schedule(this.opts.pollMs);
  }

  private launch(job: J): void {
    this.running++;
    this.opts
      .run(job)
      .catch((err: Error) => {
        this.opts.onError(err, job);
        return 'done' as const;
      })
      .then((r) => {
        this.running--;
        if (this.running === 0) for (const w of this.idleWaiters.splice(0)) w();
        // A finished job frees a place for the next; a deferred one says its host is busy: the next poll,
        // a wake or another job's end looks again.
        if (r !== 'done') return;
        if (!this.opts.refillAtOnce) this.wake();
        else if (this.claiming) this.again = true;
        else this.schedule(0);
      });
  }

  /** Stops claiming; resolves when the jobs in hand have ended or `timeoutMs` passed (leases cover the rest). */
  async close(timeoutMs: number): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.running === 0) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, timeoutMs);
      t.unref();
      this.idleWaiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}
