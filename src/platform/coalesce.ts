// Owns running an async job one at a time: calls made while it runs are folded into one more run after
// it, so a burst of triggers costs two runs, not one per trigger.

export interface Coalesced {
  /** Runs the job (or, when it is running, once more after it); resolves when that run is done. */
  (): Promise<void>;
  /** Resolves when no run is in progress or pending (errors are the callers'). */
  idle(): Promise<void>;
}

export function coalesced(job: () => Promise<void>): Coalesced {
  let running: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  const start = (): Promise<void> => {
    const p = job().finally(() => {
      if (running === p) running = undefined;
    });
    running = p;
    return p;
  };
  const run = (() => {
    if (!running) return start();
    // One follow-up run, shared by every call made while the current one runs.
    next ??= running
      .catch(() => {})
      .then(() => {
        next = undefined;
        return start();
      });
    return next;
  }) as Coalesced;
  run.idle = async () => {
    while (running || next) await (next ?? running)!.catch(() => {});
  };
  return run;
}
