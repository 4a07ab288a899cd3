// Owns the in-memory tally behind the status page: what this instance counted per UTC minute (pings by
// outcome, verification outcomes, pings per host) since its last flush to the database, and the intake
// latency of its last 24 hours. Pure bookkeeping: the stats plugin feeds it and writes what it drains.

export const MINUTE_MS = 60_000;

/** How many hosts one flush names (the busiest); the rest only count in the totals. */
export const HOSTS_PER_FLUSH = 20;
/** (minute, host) pairs remembered between two flushes: past this, a new one is not tracked (memory stays bounded). */
export const MAX_TRACKED_HOSTS = 10_000;

/** Upper bounds (ms) of the latency buckets; the last bucket is everything slower. */
export const LATENCY_BOUNDS_MS = [1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000] as const;
const LATENCY_MINUTES = 24 * 60;

export interface SeriesCount {
  minute: number;
  series: string;
  n: number;
}

export interface HostCount {
  minute: number;
  host: string;
  accepted: number;
  refused: number;
}

export interface Drained {
  counts: SeriesCount[];
  hosts: HostCount[];
}

export const minuteOf = (ms: number): number => Math.floor(ms / MINUTE_MS) * MINUTE_MS;

export class MinuteTally {
  /** minute → series → n */
  private counts = new Map<number, Map<string, number>>();
  /** minute → host → [accepted, refused] */
  private hosts = new Map<number, Map<string, [number, number]>>();
  private trackedHosts = 0;
  /** Ring of per-minute latency histograms: slot = minute index modulo a day. */
  private readonly latency: { minute: number; buckets: number[] }[] = [];

  count(series: string, at: number, n = 1): void {
    const m = minuteOf(at);
    let s = this.counts.get(m);
    if (!s) this.counts.set(m, (s = new Map()));
    s.set(series, (s.get(series) ?? 0) + n);
  }

  host(host: string, accepted: boolean, at: number): void {
    const m = minuteOf(at);
    let h = this.hosts.get(m);
    if (!h) this.hosts.set(m, (h = new Map()));
    let c = h.get(host);
    if (!c) {
      if (this.trackedHosts >= MAX_TRACKED_HOSTS) return;
      this.trackedHosts++;
      h.set(host, (c = [0, 0]));
    }
    c[accepted ? 0 : 1]++;
  }

  latencyMs(ms: number, at: number): void {
    const m = minuteOf(at);
    const slot = (m / MINUTE_MS) % LATENCY_MINUTES;
    let e = this.latency[slot];
    if (!e || e.minute !== m) this.latency[slot] = e = { minute: m, buckets: new Array(LATENCY_BOUNDS_MS.length + 1).fill(0) };
    let i = 0;
    while (i < LATENCY_BOUNDS_MS.length && ms > LATENCY_BOUNDS_MS[i]) i++;
    e.buckets[i]++;
  }

  /** What was counted since the last drain, without taking it (merged into answers before the flush). */
  pending(): Drained {
    return this.collect();
  }

  /** What was counted since the last drain, taken: the caller writes it or gives it back with restore(). */
  drain(): Drained {
    const d = this.collect();
    this.counts = new Map();
    this.hosts = new Map();
    this.trackedHosts = 0;
    return d;
  }

  /** Puts back what a failed flush could not write, so the next flush carries it. */
  restore(d: Drained): void {
    for (const c of d.counts) this.count(c.series, c.minute, c.n);
    for (const h of d.hosts) {
      const m = this.hosts.get(h.minute) ?? new Map<string, [number, number]>();
      this.hosts.set(h.minute, m);
      const c = m.get(h.host) ?? [0, 0];
      if (!m.has(h.host)) this.trackedHosts++;
      m.set(h.host, [c[0] + h.accepted, c[1] + h.refused]);
    }
  }

  /**
   * This instance's intake latency per minute from `from` to `to` (minute starts): the p50 and p99 bucket
   * bounds in ms (null for a minute without pings; the slowest bucket reports its lower bound).
   */
  latencyPercentiles(from: number, to: number): { p50: (number | null)[]; p99: (number | null)[] } {
    const p50: (number | null)[] = [];
    const p99: (number | null)[] = [];
    for (let m = from; m <= to; m += MINUTE_MS) {
      const e = this.latency[(m / MINUTE_MS) % LATENCY_MINUTES];
      if (!e || e.minute !== m) {
        p50.push(null);
        p99.push(null);
        continue;
      }
      p50.push(percentile(e.buckets, 0.5));
      p99.push(percentile(e.buckets, 0.99));
    }
    return { p50, p99 };
  }

  private collect(): Drained {
    const counts: SeriesCount[] = [];
    for (const [minute, s] of this.counts) for (const [series, n] of s) counts.push({ minute, series, n });
    const hosts: HostCount[] = [];
    for (const [minute, h] of this.hosts) {
      const busiest = [...h].sort((a, b) => b[1][0] + b[1][1] - (a[1][0] + a[1][1])).slice(0, HOSTS_PER_FLUSH);
      for (const [host, [accepted, refused]] of busiest) hosts.push({ minute, host, accepted, refused });
    }
    return { counts, hosts };
  }
}

/** The upper bound of the bucket holding quantile q (the last, open bucket reports its lower bound). */
export function percentile(buckets: readonly number[], q: number): number | null {
  const total = buckets.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = Math.ceil(total * q);
  let seen = 0;
  for (let i = 0; i < buckets.length; i++) {
    seen += buckets[i];
    if (seen >= rank) return LATENCY_BOUNDS_MS[Math.min(i, LATENCY_BOUNDS_MS.length - 1)];
  }
  return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1];
}
