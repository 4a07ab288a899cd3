// Owns the verification loop of one instance: claim due jobs from the shared queue while fewer than
// VERIFY_CONCURRENCY run, run each through the verifier, and look again when a job ends, when this
// instance accepts a ping, or every poll interval (jobs queued by other instances, deferred jobs coming
// due). Closing stops claiming and waits for the jobs in hand; an unfinished job's lease runs out and
// another instance (or the next start) claims it again, so nothing queued is lost.
import type { Job } from './job-repository.js';

export interface WorkerOptions {
  concurrency: number;
  pollMs: number;
  claim(limit: number): Promise<Job[]>;
  run(job: Job): Promise<unknown>;
  onError(err: Error, job?: Job): void;
}

export class VerifyWorker {
  private running = 0;
  private claiming = false;
  private again = false;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly opts: WorkerOptions) {}

  start(): void {
    this.schedule(0);
  }

  /** Something may be due now (a ping was accepted here): claim soon. */
  wake(): void {
    if (this.closed) return;
    if (this.claiming) this.again = true;
    else this.schedule(0);
  }

  get active(): number {
    return this.running;
  }

  private schedule(ms: number): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.closed || this.claiming) return;
    const free = this.opts.concurrency - this.running;
    if (free <= 0) return this.schedule(this.opts.pollMs);
    this.claiming = true;
    this.again = false;
    let jobs: Job[] = [];
    try {
      jobs = await this.opts.claim(free);
    } catch (err) {
      this.opts.onError(err as Error);
    } finally {
      this.claiming = false;
    }
    for (const job of jobs) this.launch(job);
    // A full claim may have left more behind; an empty one waits for the next ping or poll.
    this.schedule(this.again || (jobs.length === free && free > 0 && !this.closed) ? 0 : this.opts.pollMs);
  }

  private launch(job: Job): void {
    this.running++;
    this.opts
      .run(job)
      .catch((err: Error) => this.opts.onError(err, job))
      .finally(() => {
        this.running--;
        if (this.running === 0) for (const w of this.idleWaiters.splice(0)) w();
        if (!this.closed) this.wake();
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
