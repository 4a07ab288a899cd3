// Owns the `scale` benchmark's measurements against running pingd servers: durable intake with wrk (the
// empty and the big database in alternation, so that both see the same moment of a shared machine), the
// weblog lookup one request at a time, and intake while a retention pass runs inside pingd.
import { ensureWrk, pingScript, runWrk, scriptFile, type WrkRun } from './wrk.js';
import { median } from './load.js';
import type { Child } from './servers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface IntakePair {
  empty: WrkRun;
  big: WrkRun;
}

export interface IntakeResult {
  pairs: IntakePair[];
  emptyRps: number;
  bigRps: number;
  emptyP99: number;
  bigP99: number;
  /** Median of the per-pair ratios big / empty. */
  ratio: number;
  ratios: number[];
  failures: number;
}

/** Warm-up each, then `runs` pairs (order swapped every pair): XML-RPC pings naming a new weblog each. */
export async function intakePairs(
  empty: Child,
  big: Child,
  o: { runs: number; seconds: number; warmup: number; connections: number; tag: string },
  log: (s: string) => void,
): Promise<IntakeResult> {
  ensureWrk(log);
  const sf = scriptFile(pingScript());
  try {
    const wrk = (c: Child, seconds: number, run: string) =>
      runWrk(c.url, { script: sf.path, connections: o.connections, seconds, timeoutSec: 10, args: [`${o.tag}${run}`] });
    await wrk(empty, o.warmup, 'we');
    await wrk(big, o.warmup, 'wb');
    const pairs: IntakePair[] = [];
    for (let i = 0; i < o.runs; i++) {
      let e: WrkRun;
      let b: WrkRun;
      if (i % 2 === 0) {
        e = await wrk(empty, o.seconds, `e${i}`);
        b = await wrk(big, o.seconds, `b${i}`);
      } else {
        b = await wrk(big, o.seconds, `b${i}`);
        e = await wrk(empty, o.seconds, `e${i}`);
      }
      pairs.push({ empty: e, big: b });
      log(
        `    run ${i + 1}: empty ${Math.round(e.rps)} pings/s (p99 ${e.p99.toFixed(1)} ms), big ${Math.round(b.rps)} pings/s (p99 ${b.p99.toFixed(1)} ms), ratio ${(b.rps / e.rps).toFixed(3)}`,
      );
    }
    const ratios = pairs.map((p) => p.big.rps / p.empty.rps);
    return {
      pairs,
      emptyRps: median(pairs.map((p) => p.empty.rps)),
      bigRps: median(pairs.map((p) => p.big.rps)),
      emptyP99: median(pairs.map((p) => p.empty.p99)),
      bigP99: median(pairs.map((p) => p.big.p99)),
      ratio: median(ratios),
      ratios,
      failures: pairs.reduce(
        (a, p) => a + p.empty.errors + p.empty.timeouts + p.empty.status4xx5xx + p.big.errors + p.big.timeouts + p.big.status4xx5xx,
        0,
      ),
    };
  } finally {
    sf.dispose();
  }
}

export interface Lookup {
  n: number;
  p50: number;
  p99: number;
  max: number;
  bytes: number;
  statuses: string;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

/** `GET path` n times one after another (after one untimed request): latency percentiles in ms. */
export async function sequentialGets(baseUrl: string, path: string, n: number): Promise<Lookup> {
  await (await fetch(baseUrl + path)).arrayBuffer();
  const ms: number[] = [];
  const statuses = new Map<number, number>();
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const r = await fetch(baseUrl + path);
    const b = await r.arrayBuffer();
    ms.push(performance.now() - t);
    bytes = b.byteLength;
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
  }
  return {
    n,
    p50: pct(ms, 50),
    p99: pct(ms, 99),
    max: Math.max(...ms),
    bytes,
    statuses: [...statuses].map(([s, k]) => `${k}× ${s}`).join(', '),
  };
}

/** Reads pingd's retention counters from /metrics. */
export async function retentionCounters(
  url: string,
): Promise<{ pruned: number; failed: number; pings: number; payloads: number; items: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const one = (re: RegExp) => Number(re.exec(text)?.[1] ?? 0);
  return {
    pruned: one(/^pingd_retention_runs_total\{outcome="pruned"\} (\S+)$/m),
    failed: one(/^pingd_retention_runs_total\{outcome="failed"\} (\S+)$/m),
    pings: one(/^pingd_retention_deleted_rows_total\{table="pings"\} (\S+)$/m),
    payloads: one(/^pingd_retention_deleted_rows_total\{table="rssping_payloads"\} (\S+)$/m),
    items: one(/^pingd_retention_deleted_rows_total\{table="feed_items"\} (\S+)$/m),
  };
}

export interface PruneUnderLoad {
  /** Wall seconds of the pass: from the second it was scheduled to the first /metrics poll showing it done. */
  seconds: number;
  pingsDeleted: number;
  /** wrk slices: before the pass, overlapping it, after it. */
  before: WrkRun[];
  during: WrkRun[];
  after: WrkRun[];
  failures: number;
}

/**
 * Intake in back-to-back wrk slices of `slice` seconds on a pingd whose retention pass is scheduled at
 * `firesAt` (ms; its RETENTION_CRON names that second): keeps slicing until the pass has finished and
 * `afterSlices` more slices ran. The pass is over when pingd_retention_runs_total{outcome="pruned"} moves.
 */
export async function intakeDuringPrune(
  pingd: Child,
  firesAt: number,
  o: { slice: number; connections: number; afterSlices: number; timeoutSec: number; tag: string },
  log: (s: string) => void,
): Promise<PruneUnderLoad> {
  ensureWrk(log);
  const sf = scriptFile(pingScript());
  const c0 = await retentionCounters(pingd.url);
  let doneAt = 0;
  let stop = false;
  const poller = (async () => {
    while (!stop) {
      const c = await retentionCounters(pingd.url).catch(() => c0);
      if (c.failed > c0.failed) throw new Error('the retention pass failed (pingd_retention_runs_total{outcome="failed"})');
      if (c.pruned > c0.pruned) {
        doneAt = Date.now();
        return c;
      }
      if (Date.now() > firesAt + o.timeoutSec * 1000) throw new Error(`the retention pass did not finish within ${o.timeoutSec} s`);
      await sleep(100);
    }
    return c0;
  })();
  const before: WrkRun[] = [];
  const during: WrkRun[] = [];
  const after: WrkRun[] = [];
  try {
    let k = 0;
    let afterLeft = o.afterSlices;
    let failed: Error | undefined;
    poller.catch((err: Error) => (failed = err));
    while (afterLeft > 0) {
      if (failed) throw failed;
      const start = Date.now();
      const r = await runWrk(pingd.url, {
        script: sf.path,
        connections: o.connections,
        seconds: o.slice,
        timeoutSec: 10,
        args: [`${o.tag}${k++}`],
      });
      const end = Date.now();
      if (end < firesAt) before.push(r);
      else if (doneAt === 0 || start <= doneAt) during.push(r);
      else {
        after.push(r);
        afterLeft--;
      }
      log(
        `    slice ${k}: ${Math.round(r.rps)} pings/s, p99 ${r.p99.toFixed(1)} ms, max ${r.max.toFixed(0)} ms${end < firesAt ? ' (before the pass)' : doneAt === 0 || start <= doneAt ? ' (during the pass)' : ''}`,
      );
    }
    const c = await poller;
    const all = [...before, ...during, ...after];
    return {
      seconds: (doneAt - firesAt) / 1000,
      pingsDeleted: c.pings - c0.pings,
      before,
      during,
      after,
      failures: all.reduce((a, r) => a + r.errors + r.timeouts + r.status4xx5xx, 0),
    };
  } finally {
    stop = true;
    sf.dispose();
  }
}
