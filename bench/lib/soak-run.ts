// Owns one soak segment: a fresh database, pingd with its renderer on (its defaults: RENDER_CRON, and
// VERIFY_PINGS=off as startPingd sets it), pings at a fixed rate for a fixed time, a sample every 5 s
// (acknowledged pings, latency, failures, memory, document ages, render times), then the rows counted
// against the acknowledgements, and the bounds judged.
import { loadavg } from 'node:os';
import { startPingd, createPgliteDatabase, type BenchDatabase, type Child, type CompiledPingd } from './servers.js';
import { createScenarioDatabase } from './soak-database.js';
import { startPingLoad, percentile } from './soak-load.js';
import { startAgeProbe, procMb } from './soak-probe.js';
import { cpuMicros } from './cpu.js';

export const SHORT = '/shortChanges.xml';
export const CHANGES = '/changes.xml';

export interface Bounds {
  /** shortChanges.xml's largest age, s (2 × RENDER_CRON's period). */
  shortAgeSec: number;
  changesAgeSec: number;
  /** The embedded process's RSS, MB (not judged on PostgreSQL, where the database is another process). */
  embeddedRssMb: number;
  /** Every 30-s row accepts at least this share of the offered rate. */
  minRateShare: number;
}

export interface Sample {
  /** Seconds since the load began, at the sample's end. */
  t: number;
  seconds: number;
  acks: number;
  latencies: number[];
  failures: Map<string, number>;
  inFlight: number;
  rssMb: number;
  /** Private memory (RssAnon) of the PostgreSQL backends serving the database, MB. */
  pgMb: number;
  age: Record<string, number>;
  probeErrors: string[];
  /** Mean render time (ms) per document in the sample (from /metrics), NaN when none finished. */
  renderMs: Record<string, number>;
  renders: Record<string, number>;
}

export interface Verdict {
  bound: string;
  met: boolean;
  worst: string;
  /** When the bound first broke, e.g. "at 3:25". */
  when?: string;
}

export interface Segment {
  label: string;
  backend: 'postgres' | 'pglite';
  rate: number;
  seconds: number;
  connections: number;
  samples: Sample[];
  sent: number;
  acks: number;
  failures: Map<string, number>;
  rows: number;
  idleRssMb: number;
  /** CPU µs per acknowledged ping: pingd's process, and the bench process (the load generator and probes). */
  pingdUsPerPing: number;
  clientUsPerPing: number;
  peakRssMb: number;
  loadStart: string;
  loadEnd: string;
  verdicts: Verdict[];
  /** Every bound met (memory only on the embedded database). */
  pass: boolean;
}

const log = (s: string) => process.stderr.write(`${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const mmss = (sec: number) => `${Math.floor(sec / 60)}:${String(Math.floor(sec % 60)).padStart(2, '0')}`;
const loadStr = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

/** Render histogram sums and counts per document, from pingd's /metrics. */
async function renderTotals(origin: string): Promise<Map<string, { sum: number; count: number }>> {
  const out = new Map<string, { sum: number; count: number }>();
  try {
    const text = await (await fetch(`${origin}/metrics`)).text();
    for (const m of text.matchAll(/^pingd_publish_render_duration_seconds_(sum|count)\{document="([^"]+)"\} (\S+)$/gm)) {
      const e = out.get(m[2]) ?? { sum: 0, count: 0 };
      e[m[1] as 'sum' | 'count'] = Number(m[3]);
      out.set(m[2], e);
    }
  } catch {
    /* a busy pingd: no render figures in this sample */
  }
  return out;
}

export interface SegmentOptions {
  label: string;
  backend: 'postgres' | 'pglite';
  adminUrl: string;
  rate: number;
  seconds: number;
  connections: number;
  sampleSec: number;
  bounds: Bounds;
  /** pingd's tsc build (as `npm start` runs it: its RSS is what the bound is about); undefined: src/ under tsx. */
  compiled?: CompiledPingd;
}

export async function runSegment(o: SegmentOptions): Promise<Segment> {
  const db: BenchDatabase = o.backend === 'postgres' ? await createScenarioDatabase(o.adminUrl, 'soak') : await createPgliteDatabase();
  let pingd: Child | undefined;
  try {
    pingd = await startPingd({ env: db.env, compiled: o.compiled, nodeArgs: process.env.BENCH_SOAK_NODE_ARGS?.split(' ').filter(Boolean) });
    const pid = pingd.proc.pid!;
    await sleep(2000);
    const idleRssMb = procMb(pid);
    const loadStart = loadStr();
    log(
      `soak ${o.label}: pingd ${pingd.url} (pid ${pid}, ${idleRssMb.toFixed(0)} MB idle), ${o.rate} pings/s for ${o.seconds} s; load ${loadStart}`,
    );
    const fromMs = Date.now();
    const cpu0 = { pingd: cpuMicros(pid), self: process.cpuUsage() };
    const t0 = performance.now();
    const load = startPingLoad({
      origin: pingd.url,
      connections: o.connections,
      rate: o.rate,
      tag: `${o.label.replace(/\W+/g, '')}${Date.now().toString(36)}`,
    });
    const probe = startAgeProbe(pingd.url, [SHORT, CHANGES], fromMs);
    const samples: Sample[] = [];
    let prevRender = await renderTotals(pingd.url);
    const last = Math.floor(o.seconds / o.sampleSec);
    let totals: Awaited<ReturnType<typeof load.stop>> | undefined;
    for (let k = 1; k <= last; k++) {
      await sleep(Math.max(0, t0 + k * o.sampleSec * 1000 - performance.now()));
      // The last sample waits for every answer, so that every request sent is in some sample.
      if (k === last) totals = await load.stop();
      const w = load.take();
      const a = probe.take();
      const rssMb = procMb(pid);
      let pgMb = NaN;
      if (o.backend === 'postgres') pgMb = (await db.backendPids()).reduce((s, p) => s + (procMb(p, 'RssAnon') || 0), 0);
      const rendered = await renderTotals(pingd.url);
      const renderMs: Record<string, number> = {};
      const renders: Record<string, number> = {};
      for (const [doc, v] of rendered) {
        const p = prevRender.get(doc) ?? { sum: 0, count: 0 };
        renders[doc] = v.count - p.count;
        renderMs[doc] = renders[doc] > 0 ? ((v.sum - p.sum) * 1000) / renders[doc] : NaN;
      }
      prevRender = rendered;
      const s: Sample = {
        t: (performance.now() - t0) / 1000,
        seconds: w.seconds,
        acks: w.acks,
        latencies: w.latencies,
        failures: w.failures,
        inFlight: w.inFlight,
        rssMb,
        pgMb,
        age: a.maxAge,
        probeErrors: a.errors,
        renderMs,
        renders,
      };
      samples.push(s);
      const nf = [...w.failures.values()].reduce((x, y) => x + y, 0);
      log(
        `  ${mmss(s.t)} ${(w.acks / w.seconds).toFixed(0)}/s p50 ${percentile(w.latencies, 50).toFixed(1)} p99 ${percentile(w.latencies, 99).toFixed(1)} ms` +
          `${nf ? ` FAIL ${nf} (${[...w.failures].map(([k, v]) => `${k}: ${v}`).join(', ')})` : ''} in flight ${w.inFlight}, RSS ${rssMb.toFixed(0)} MB${o.backend === 'postgres' ? ` (pg ${pgMb.toFixed(0)})` : ''},` +
          ` age short ${a.maxAge[SHORT].toFixed(1)} s changes ${a.maxAge[CHANGES].toFixed(1)} s${a.errors.length ? ` probe errors: ${a.errors.slice(0, 2).join('; ')}` : ''}`,
      );
    }
    totals ??= await load.stop();
    const self = process.cpuUsage(cpu0.self);
    const pingdUsPerPing = (cpuMicros(pid) - cpu0.pingd) / Math.max(1, totals.acks);
    const clientUsPerPing = (self.user + self.system) / Math.max(1, totals.acks);
    await probe.stop();
    const peakRssMb = procMb(pid, 'VmHWM');
    const loadEnd = loadStr();
    await pingd.stop();
    pingd = undefined;
    const rows = await db.countPings();
    const nf = [...totals.failures.values()].reduce((x, y) => x + y, 0);
    log(
      `soak ${o.label}: sent ${totals.sent}, acknowledged ${totals.acks}, failures ${nf}, rows ${rows}, peak RSS ${peakRssMb.toFixed(0)} MB; load ${loadEnd}`,
    );
    const seg: Segment = {
      label: o.label,
      backend: o.backend,
      rate: o.rate,
      seconds: o.seconds,
      connections: o.connections,
      samples,
      sent: totals.sent,
      acks: totals.acks,
      failures: totals.failures,
      rows,
      idleRssMb,
      pingdUsPerPing,
      clientUsPerPing,
      peakRssMb,
      loadStart,
      loadEnd,
      verdicts: [],
      pass: false,
    };
    seg.verdicts = judge(seg, o.bounds, o.sampleSec);
    seg.pass = seg.verdicts.every((v) => v.met);
    return seg;
  } finally {
    if (pingd) await pingd.stop().catch(() => undefined);
    await db.drop().catch((e: Error) => log(`soak ${o.label}: dropping the database failed: ${e.message}`));
  }
}

/** Samples grouped in rows of `rowSec` (the table's rows, and the rate bound's unit). */
export function rows(samples: Sample[], sampleSec: number, rowSec = 30): Sample[][] {
  const per = Math.max(1, Math.round(rowSec / sampleSec));
  const out: Sample[][] = [];
  for (let i = 0; i < samples.length; i += per) out.push(samples.slice(i, i + per));
  return out;
}

export const maxOf = (xs: number[]) => xs.reduce((a, b) => (Number.isFinite(b) && !(a >= b) ? b : a), NaN);

function judge(seg: Segment, b: Bounds, sampleSec: number): Verdict[] {
  const v: Verdict[] = [];
  const firstOver = (f: (s: Sample) => boolean) => {
    const s = seg.samples.find(f);
    return s ? `first at ${mmss(s.t)}` : undefined;
  };
  for (const [path, limit] of [
    [SHORT, b.shortAgeSec],
    [CHANGES, b.changesAgeSec],
  ] as const) {
    const worst = maxOf(seg.samples.map((s) => s.age[path]));
    v.push({
      bound: `${path} age ≤ ${limit} s`,
      met: worst <= limit,
      worst: `${worst.toFixed(1)} s`,
      when: firstOver((s) => s.age[path] > limit),
    });
  }
  const groups = rows(seg.samples, sampleSec);
  const rates = groups.map((g) => g.reduce((a, s) => a + s.acks, 0) / g.reduce((a, s) => a + s.seconds, 0));
  const low = Math.min(...rates);
  const lowAt = rates.findIndex((r) => r < b.minRateShare * seg.rate);
  v.push({
    bound: `every 30 s ≥ ${Math.round(b.minRateShare * 100)}% of ${seg.rate}/s accepted`,
    met: lowAt < 0,
    worst: `${low.toFixed(0)}/s`,
    when: lowAt >= 0 ? `first at ${mmss(groups[lowAt][0].t - sampleSec)}` : undefined,
  });
  // p99 drift: the last third of the run against the first third (its first 30 s, warm-up, left out).
  const third = Math.max(1, Math.floor(groups.length / 3));
  const lat = (gs: Sample[][]) => gs.flat().flatMap((s) => s.latencies);
  const early = percentile(lat(groups.slice(1, Math.max(2, third))), 99);
  const late = percentile(lat(groups.slice(-third)), 99);
  const allowed = Math.max(2 * early, early + 10);
  v.push({
    bound: 'p99 does not drift (last third ≤ max(2×, +10 ms) of the first)',
    met: late <= allowed,
    worst: `${early.toFixed(1)} → ${late.toFixed(1)} ms`,
  });
  const nf = [...seg.failures.values()].reduce((x, y) => x + y, 0);
  v.push({
    bound: 'no failed ping',
    met: nf === 0,
    worst: nf ? [...seg.failures].map(([k, n]) => `${n} × ${k}`).join(', ') : '0',
    when: firstOver((s) => s.failures.size > 0),
  });
  // A ping the client gave up on (timeout, reset) may still have committed: rows may exceed acks by those.
  const unsure = [...seg.failures].filter(([k]) => k === 'timeout' || k.startsWith('error:')).reduce((a, [, n]) => a + n, 0);
  v.push({
    bound: 'every acknowledged ping stored (rows = acks, + at most the pings given up on)',
    met: seg.rows >= seg.acks && seg.rows - seg.acks <= unsure,
    worst: `${seg.rows.toLocaleString('en-US')} rows, ${seg.acks.toLocaleString('en-US')} acks${unsure ? `, ${unsure} given up on` : ''}`,
  });
  if (seg.backend === 'pglite') {
    const worst = maxOf(seg.samples.map((s) => s.rssMb));
    v.push({
      bound: `embedded RSS < ${b.embeddedRssMb} MB`,
      met: worst < b.embeddedRssMb && seg.peakRssMb < b.embeddedRssMb,
      worst: `${worst.toFixed(0)} MB sampled, ${seg.peakRssMb.toFixed(0)} MB peak (VmHWM)`,
      when: firstOver((s) => s.rssMb >= b.embeddedRssMb),
    });
  }
  return v;
}
