// Owns one autocannon measurement of pingd against the baseline: the baseline primed with pingd's own
// answer, warm-up, runs in alternating order, medians and the per-pair ratio, CPU per request of pingd and
// PostgreSQL, acknowledgements counted; and the optional --cpu-prof of the run.
import { existsSync, readdirSync, statSync, readFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, setBaselineAnswer, type Child, type BenchDatabase } from './servers.js';
import { runLoad, median, type LoadSpec, type LoadRun } from './load.js';
import { snapshot, diff } from './cpu.js';
import { sample } from './scenarios.js';
import type { Row } from './report.js';
import { summarize } from '../profile-summary.js';
import { OPTS, log } from './options.js';

// Headers the baseline copies from pingd's answer, so both send the same response head and body.
const COPIED = ['content-type', 'content-encoding', 'etag', 'last-modified', 'cache-control', 'im', 'vary', 'retry-after'];

export async function metricsText(url: string): Promise<string> {
  try {
    const r = await fetch(`${url}/metrics`);
    return r.ok ? await r.text() : '';
  } catch {
    return '';
  }
}
export function metricSum(text: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*ok="true"[^}]*\\})? (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

export interface Measured {
  row: Row;
  acks: number;
  unsure: number;
}

/**
 * Warm-up, then `runs` pairs of (pingd run, baseline run) in alternating order; medians of each and of
 * the per-pair ratios. Intake runs are bounded by a request count (calibrated on the warm-up to last about
 * BENCH_DURATION) so that every answer is read and the acknowledgements counted are exact.
 */
export async function measure(
  id: string,
  backend: string,
  spec: LoadSpec,
  pingd: Child,
  baseline: Child,
  db: BenchDatabase | undefined,
  countAcks: boolean,
): Promise<Measured> {
  const { connections, duration, runs, warmup } = OPTS;
  let acks = 0;
  let unsure = 0;
  const s = await sample(pingd.url, spec);
  if (countAcks && spec.isAck?.(s.status, s.body.toString('utf8'))) acks++;
  const headers: Record<string, string> = {};
  for (const h of COPIED) if (s.headers[h]) headers[h] = s.headers[h];
  await setBaselineAnswer(baseline, s.status, headers, s.body);

  await runLoad(baseline.url, spec, { connections, duration: warmup });
  const warm = await runLoad(pingd.url, spec, countAcks ? { connections, amount: connections * 40 } : { connections, duration: warmup });
  acks += warm.acks;
  unsure += warm.unsure;
  const amount = Math.max(connections * 20, Math.round(warm.rps * duration));

  const t: LoadRun[] = [];
  const b: LoadRun[] = [];
  const ratios: number[] = [];
  const cpu: { server: number; db: number; loadgen: number }[] = [];
  const baselineCpu: number[] = [];
  let batchSize = 0;
  let batchCount = 0;
  let commitSec = 0;
  for (let i = 0; i < runs; i++) {
    const runPingd = async () => {
      const m0 = countAcks ? await metricsText(pingd.url) : '';
      const c0 = await snapshot(pingd.proc.pid!, () => db?.backendPids() ?? Promise.resolve([]));
      const r = await runLoad(pingd.url, spec, countAcks ? { connections, amount } : { connections, duration });
      const c = diff(c0, await snapshot(pingd.proc.pid!, () => db?.backendPids() ?? Promise.resolve([])));
      if (countAcks) {
        const m1 = await metricsText(pingd.url);
        batchSize += metricSum(m1, 'pingd_commit_batch_size_sum') - metricSum(m0, 'pingd_commit_batch_size_sum');
        batchCount += metricSum(m1, 'pingd_commit_batch_size_count') - metricSum(m0, 'pingd_commit_batch_size_count');
        commitSec += metricSum(m1, 'pingd_commit_duration_seconds_sum') - metricSum(m0, 'pingd_commit_duration_seconds_sum');
      }
      acks += r.acks;
      unsure += r.unsure;
      cpu.push({ server: c.serverUs / r.requests, db: c.dbUs / r.requests, loadgen: c.loadgenUs / r.requests });
      return r;
    };
    const runBaseline = async () => {
      const c0 = await snapshot(baseline.proc.pid!, () => Promise.resolve([]));
      const r = await runLoad(baseline.url, spec, { connections, duration });
      const c = diff(c0, await snapshot(baseline.proc.pid!, () => Promise.resolve([])));
      baselineCpu.push(c.serverUs / r.requests);
      return r;
    };
    let tr: LoadRun;
    let br: LoadRun;
    if (i % 2 === 0) {
      tr = await runPingd();
      br = await runBaseline();
    } else {
      br = await runBaseline();
      tr = await runPingd();
    }
    t.push(tr);
    b.push(br);
    ratios.push(tr.rps / br.rps);
    log(
      `  ${id}/${backend} run ${i + 1}: pingd ${Math.round(tr.rps)} req/s (p99 ${tr.p99} ms), baseline ${Math.round(br.rps)} req/s, ratio ${(tr.rps / br.rps).toFixed(3)}`,
    );
  }
  const failures = t.reduce((a, r) => a + r.bad + r.errors + r.timeouts, 0);
  return {
    acks,
    unsure,
    row: {
      scenario: id,
      backend,
      rps: median(t.map((r) => r.rps)),
      p50: median(t.map((r) => r.p50)),
      p99: median(t.map((r) => r.p99)),
      baselineRps: median(b.map((r) => r.rps)),
      ratio: median(ratios),
      ratioMin: Math.min(...ratios),
      ratioMax: Math.max(...ratios),
      serverUsPerReq: median(cpu.map((c) => c.server)),
      baselineUsPerReq: median(baselineCpu),
      dbUsPerReq: db?.backend === 'postgres' ? median(cpu.map((c) => c.db)) : undefined,
      loadgenUsPerReq: median(cpu.map((c) => c.loadgen)),
      batch: batchCount > 0 ? `${(batchSize / batchCount).toFixed(1)}, ${((commitSec / batchCount) * 1000).toFixed(1)}` : undefined,
      failures,
    },
  };
}

export function profileArgs(tag: string): { args: string[]; dir?: string } {
  if (!OPTS.profile) return { args: [] };
  const dir = join(ROOT, 'bench', 'profiles', `${new Date().toISOString().replace(/[:.]/g, '-')}-${tag}`);
  mkdirSync(dir, { recursive: true });
  return { args: ['--cpu-prof', `--cpu-prof-dir=${dir}`], dir };
}

export function reportProfile(dir: string | undefined): string {
  if (!dir || !existsSync(dir)) return '';
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  if (!files.length) return '';
  // The main thread's profile: thread 0 in Node's file name (CPU.<date>.<time>.<pid>.<thread>.<seq>), not
  // the largest (the embedded database's thread can be busier).
  const main = join(
    dir,
    files.find((f) => f.split('.').at(-3) === '0') ?? files.sort((a, b) => statSync(join(dir, b)).size - statSync(join(dir, a)).size)[0],
  );
  return `profile ${main}\n${summarize(JSON.parse(readFileSync(main, 'utf8')), 25, ['parseMethodCall', 'fastParseMethodCall', 'validatePing', 'insertPingBatch', 'flush', 'serveDocument'])}`;
}
