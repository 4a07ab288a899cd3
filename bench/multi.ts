// Owns the multi-instance bench (issue "Scale", "A plan for outgrowing one machine"): BENCH_MULTI_INSTANCES
// (3) pingd processes on one PostgreSQL database (fresh, bench_multi_*), each with its renderer on (pingd's
// defaults), behind a round-robin TCP proxy on 127.0.0.90 (bench/lib/multi-proxy.ts), against one pingd
// behind the same proxy on a database of its own. Load: XML-RPC weblogUpdates.ping, a new weblog per ping,
// closed loop on BENCH_MULTI_CONNECTIONS (64) keep-alive connections through the proxy for
// BENCH_MULTI_SECONDS (30), after a 3-s warm-up; the run ends by waiting for every answer, so the
// acknowledged pings are known exactly (by URL). Then, per setup:
//   - intake: acknowledged pings/s, p50/p99 (from each request's send), failures (non-200, fault, socket
//     error, timeout);
//   - stored once: every acknowledged URL has exactly one row in `pings`, no (url, received_at) twice, and
//     the ids' range against the row count (a gap is an id taken by an insert that rolled back, not a lost
//     row: the rows are checked by URL);
//   - one renderer: pingd renders under a PostgreSQL advisory lock (RENDER_LOCK in
//     src/publishing/render/renderer.ts, pg_try_advisory_lock: an instance that does not get it skips the
//     tick and counts pingd_publish_render_lock_busy_total). Shown per instance from /metrics (renders and
//     busy ticks) and from the data: no two renderings' [created_at, created_at + render_ms] overlap
//     (within 50 ms: created_at is stamped a query after the render's clock starts);
//   - same document: once the renderer has caught up, every instance serves /changes.xml with the same
//     ETag and the same gzip bytes.
// pingd listens on 127.0.0.1 (startPingd's choice, a free port each); the proxy on 127.0.0.90.
//
//   node --import tsx bench/multi.ts [--write]      (writes bench/results/<date>-multi.md)
//
// Environment: BENCH_DATABASE_URL, BENCH_MULTI_INSTANCES (3), BENCH_MULTI_CONNECTIONS (64),
// BENCH_MULTI_SECONDS (30). PostgreSQL only (the embedded database has one owner process).
import { cpus, loadavg, totalmem } from 'node:os';
import { envNumber } from './lib/env.js';
import { git } from './lib/git.js';
import { recordRun } from './lib/results.js';
import { isMain, runDirect, type DirectOptions } from './lib/run-direct.js';
import { PINGD_ROOT, ROOT } from './lib/servers.js';
import { dropStaleScenarioDatabases } from './lib/soak-database.js';
import { runSetup, type SetupResult } from './lib/multi-run.js';

const log = (s: string) => process.stderr.write(`${s}\n`);
const f0 = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–');
const f1 = (n: number) => (Number.isFinite(n) ? (n < 100 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US')) : '–');
const ok = (b: boolean) => (b ? '✅' : '❌');

function table(rs: SetupResult[]): string[] {
  const base = rs.find((r) => r.instances === 1);
  const out = [
    '| setup | load avg (start → end) | acks/s | vs one | p50 / p99 ms | failures | acks / rows | URLs acked with ≠ 1 row | (url, received_at) twice | ids: range − rows | connections per instance | pings accepted per instance | group commits per instance: count, mean size, mean ms | PG sessions waiting on an advisory lock / active (mean) | renders / busy ticks per instance | overlapping renderings | /changes.xml same ETag and bytes |',
    '| --- | --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | --- | --- | --- | --- | --- | ---: | --- |',
  ];
  for (const r of rs) {
    out.push(
      `| ${r.instances} pingd | ${r.loadStart} → ${r.loadEnd} | ${f0(r.rps)} | ${base && r !== base ? `${(r.rps / base.rps).toFixed(2)}×` : '1'} | ${f1(r.p50)} / ${f1(r.p99)} | ${r.failures} | ${ok(r.acks === r.rows)} ${f0(r.acks)} / ${f0(r.rows)} | ${ok(r.notOnce === 0)} ${r.notOnce} | ${ok(r.duplicates === 0)} ${r.duplicates} | ${r.idGap} | ${r.handed.join(' / ')} | ${r.perInstance.map((p) => f0(p.accepted)).join(' / ')} | ${r.perInstance.map((p) => `${f0(p.batches)}, ${f1(p.batchPings / p.batches)}, ${f1((1000 * p.commitSec) / p.batches)}`).join(' · ')} | ${r.advisoryWaiting.toFixed(2)} / ${r.activeSessions.toFixed(2)} | ${r.perInstance.map((p) => `${p.rendered}/${p.busy}`).join(' · ')} | ${ok(r.overlaps === 0)} ${r.overlaps} of ${r.renderings} (closest gap ${f0(r.minGapMs)} ms) | ${ok(r.sameDocument)} ${r.documentNote} |`,
    );
  }
  return out;
}

export async function runMulti(o: DirectOptions): Promise<boolean> {
  if (!o.backends.includes('postgres')) {
    log('multi: PostgreSQL only (BENCH_BACKENDS has no postgres): nothing to run');
    return true;
  }
  const s = {
    instances: Math.round(envNumber('BENCH_MULTI_INSTANCES', 3)),
    connections: Math.round(envNumber('BENCH_MULTI_CONNECTIONS', 64)),
    seconds: envNumber('BENCH_MULTI_SECONDS', 30),
  };
  const started = new Date();
  const load0 = loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
  const commit = git(PINGD_ROOT, ['rev-parse', '--short', 'HEAD']);
  const dirty = git(PINGD_ROOT, ['status', '--porcelain', '--', 'src', 'migrations']);
  const measured = `${PINGD_ROOT === ROOT ? 'this checkout' : PINGD_ROOT} at ${commit || 'an unknown commit'} (${git(PINGD_ROOT, ['log', '-1', '--format=%s']).slice(0, 100)})${
    dirty
      ? `, with uncommitted changes in ${dirty
          .split('\n')
          .map((l) => l.replace(/^\s*\S+\s+/, ''))
          .join(', ')}`
      : ''
  }`;
  log(`multi: pingd of ${measured}; load ${load0}`);
  const stale = await dropStaleScenarioDatabases(o.databaseUrl, 'multi');
  if (stale.length) log(`multi: dropped ${stale.length} database(s) left by killed runs`);
  const results: SetupResult[] = [];
  const errors: string[] = [];
  for (const n of [1, s.instances]) {
    try {
      results.push(
        await runSetup({ adminUrl: o.databaseUrl, instances: n, connections: s.connections, seconds: s.seconds, proxyHost: '127.0.0.90' }),
      );
    } catch (err) {
      log(`multi: ${n} pingd failed: ${(err as Error).stack ?? err}`);
      errors.push(`${n} pingd: ${(err as Error).message.split('\n')[0].slice(0, 300)}`);
    }
  }
  const cpu = cpus();
  const md = [
    `### Multi-instance ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `pingd: ${measured}. Machine: ${cpu.length} × ${cpu[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}; load average at start ${load0}, at end ${loadavg()
      .map((x) => x.toFixed(2))
      .join(
        ' ',
      )}. Wall time ${Math.round((Date.now() - started.getTime()) / 1000)} s. ${s.connections} connections, ${s.seconds} s per setup, each on a fresh database; renderer on in every instance (RENDER_CRON default), VERIFY_PINGS=off.`,
    '',
    ...table(results),
    '',
    ...(errors.length ? [`Errors: ${errors.join('; ')}`, ''] : []),
    'Acks/s and latency are through the proxy (a Node process piping bytes) for both setups, on the same 2 cores as the instances, PostgreSQL and the load generator: more instances cannot add cores here, so the ratio shows the cost or gain of coordination on one machine, not horizontal scaling. Per-instance columns list the instances in start order; renders counts rendered documents (pingd_publish_renders_total{outcome="rendered"}), busy ticks pingd_publish_render_lock_busy_total.',
    '',
  ].join('\n');
  console.log(md);
  if (o.write)
    log(
      `results written to ${recordRun({ scenario: 'multi', title: 'Several instances on one PostgreSQL', started, markdown: md, backends: ['postgres'] }).join(', ')}`,
    );
  return errors.length === 0 && results.every((r) => r.pass);
}

// Run directly: node --import tsx bench/multi.ts [--write]
if (isMain(import.meta.url)) runDirect('multi', runMulti);
