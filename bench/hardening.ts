// Owns the `hardening` scenario of `npm run bench`: what each amplification class found by an attacker costs
// pingd, one case per class, each against its own pingd process (started as the other benchmarks start it,
// on a fresh database, of this checkout or of BENCH_PINGD_ROOT's) on each backend: wall ms per hostile
// request sent alone, pingd's CPU and SQL statements per request, /healthz latency idle and while 4
// connections attack, pingd's memory before and after a flood, and what the class is about (tokens a
// stranger gets, URL spellings accepted). The `attacks` set (bench/lib/intake-attack-cases.ts, issue 43) is
// timed differently: a canary ping every 100 ms before and during each of six attacks, on pingd as deployed.
//
//   BENCH_SCENARIOS=hardening npm run bench [-- --write]      (or: node --import tsx bench/hardening.ts)
//   BENCH_PINGD_ROOT=/path/to/other/checkout BENCH_SCENARIOS=hardening npm run bench   (an earlier commit)
//   BENCH_SCENARIOS=hardening BENCH_HOSTILE_CASES=attacks npm run bench -- --write   (bench/results/attacks.md)
//
// Environment: BENCH_BACKENDS (postgres,pglite), BENCH_DATABASE_URL, BENCH_HOSTILE_CASES (xff,inm,tokens,
// rssping,variants; the fetched-feed classes of bench/lib/feed-hardening-cases.ts, verification on: feed-redos,
// feed-parse,feed-redirect,feed-drip), BENCH_HOSTILE_REQUESTS (flood size, 100000), BENCH_HOSTILE_RSSPING_REQUESTS (flood size of
// 256 KiB rss_pings, 200: 100k of them would take hours on the earlier code), BENCH_HOSTILE_SAMPLES (requests
// timed one at a time, 50; 20 for If-None-Match and 8 per rss_ping body), BENCH_HOSTILE_SECONDS (longest
// flood, 75 s), BENCH_HOSTILE_ATTACK_SECONDS (/healthz sampling, 4), BENCH_HOSTILE_VARIANTS (spellings per
// kind, 200: more than a per-host budget of 100), BENCH_HOSTILE_TOKENS (150), BENCH_PINGD_<VAR> (passed to pingd
// as <VAR>), BENCH_HOSTILE_PROFILE (a directory: pingd under --cpu-prof, one .cpuprofile per case; summarise with
// bench/profile-summary.ts). The attacks set (BENCH_HOSTILE_CASES=attacks, or attack-bearer, attack-relay,
// attack-stream-burst, attack-subscribe, attack-unsubscribe, attack-replays): BENCH_ATTACK_CANARY_MS (100),
// BENCH_ATTACK_BEFORE_SECONDS (canary alone, 5), BENCH_ATTACK_SECONDS (canary and attack, 12),
// BENCH_ATTACK_STREAM_CLIENTS (the /stream burst, 3000), BENCH_ATTACK_UNSUBSCRIBES (10000),
// BENCH_ATTACK_REPLAY_EVENTS (stored history, 50000), BENCH_ATTACK_REPLAY_CLIENTS (200), BENCH_RELAY_TARGETS (50).
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { cpus, loadavg, totalmem } from 'node:os';
import { envNumber } from './lib/env.js';
import { ROOT, PINGD_ROOT, startPingd, createPostgresDatabase, createPgliteDatabase, track, type Child } from './lib/servers.js';
import { recordRun } from './lib/results.js';
import type { QueryCount } from './lib/hostile-http.js';
import { CASES, type Case, type CaseResult, type Settings } from './lib/hardening-cases.js';
import { FEED_CASES, feedMethod, feedTables, isFeedCase } from './lib/feed-hardening-cases.js';
import { STREAM_CASES } from './lib/fanout-stream-cases.js';
import { STREAM_REPLAY_CASES } from './lib/stream-replay-cases.js';
import { WEBSUB_CASES } from './lib/fanout-websub-cases.js';
import { RELAY_CASES } from './lib/fanout-relay-cases.js';
import { OPEN_HUB_CASES } from './lib/open-hub-cases.js';
import { ATTACK_CASES, attackMethod, attackTable, isAttackCase } from './lib/intake-attack-cases.js';
import { rssPingShapes } from './lib/hostile.js';
import { describeConfig } from '../src/platform/config.js';
import { isMain, runDirect } from './lib/run-direct.js';

const env = process.env;
const num = (name: string, def: number) => Math.round(envNumber(name, def));
const log = (s: string) => process.stderr.write(`${s}\n`);
const COUNTER = new URL('./lib/query-counter.ts', import.meta.url).href;

export interface HardeningOptions {
  databaseUrl: string;
  backends: ('postgres' | 'pglite')[];
  write: boolean;
}

function settings(): Settings {
  return {
    requests: num('BENCH_HOSTILE_REQUESTS', 100_000),
    rsspingRequests: num('BENCH_HOSTILE_RSSPING_REQUESTS', 200),
    samples: num('BENCH_HOSTILE_SAMPLES', 50),
    floodSeconds: num('BENCH_HOSTILE_SECONDS', 75),
    attackSeconds: num('BENCH_HOSTILE_ATTACK_SECONDS', 4),
    variants: num('BENCH_HOSTILE_VARIANTS', 200),
    tokenRequests: num('BENCH_HOSTILE_TOKENS', 150),
    concurrency: 32,
  };
}

/** BENCH_PINGD_<VAR> as <VAR>, except BENCH_PINGD_ROOT (which checkout, not a pingd setting). */
function userPingdEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env))
    if (k.startsWith('BENCH_PINGD_') && k !== 'BENCH_PINGD_ROOT' && v !== undefined) out[k.slice(12)] = v;
  return out;
}

/** Asks pingd's query counter (bench/lib/query-counter.ts) for its count through SIGUSR2 and stderr. */
function queryCounter(proc: ChildProcess): QueryCount {
  let buf = '';
  const waiting: ((n: number) => void)[] = [];
  proc.stderr!.on('data', (d: Buffer) => {
    buf += d.toString();
    for (let m = /bench-queries (\d+)\n/.exec(buf); m; m = /bench-queries (\d+)\n/.exec(buf)) {
      buf = buf.slice(m.index + m[0].length);
      waiting.shift()?.(Number(m[1]));
    }
    if (buf.length > 4096) buf = buf.slice(-256);
  });
  return () =>
    new Promise((resolve) => {
      const t = setTimeout(() => {
        waiting.splice(waiting.indexOf(done), 1);
        resolve(NaN);
      }, 5000);
      const done = (n: number) => {
        clearTimeout(t);
        resolve(n);
      };
      waiting.push(done);
      proc.kill('SIGUSR2');
    });
}

/** Runs the measured checkout's `pingd <args>` (migrate, publisher add) on the case's database. */
async function cli(args: string[], pingdEnv: Record<string, string>): Promise<void> {
  const inherited: Record<string, string | undefined> = { ...env };
  for (const { name } of describeConfig()) delete inherited[name];
  const p = spawn(process.execPath, ['--import', 'tsx', join(PINGD_ROOT, 'src/cli.ts'), ...args], {
    cwd: PINGD_ROOT,
    env: { ...inherited, LOG_LEVEL: 'warn', ...pingdEnv },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  track(p);
  let err = '';
  p.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((r) => p.on('exit', r));
  if (code !== 0) throw new Error(`pingd ${args[0]} ${args[1] ?? ''} exited with ${code}: ${err.trim().slice(-500)}`);
}

async function runCase(c: Case, backend: 'postgres' | 'pglite', s: Settings, databaseUrl: string): Promise<CaseResult> {
  const db = backend === 'postgres' ? await createPostgresDatabase(databaseUrl) : await createPgliteDatabase();
  let pingd: Child | undefined;
  try {
    const pingdEnv = { ...c.env, ...userPingdEnv(), ...db.env };
    if (c.publishers?.length || c.seed) {
      await cli(['migrate'], pingdEnv);
      for (const p of c.publishers ?? []) await cli(['publisher', 'add', p.site, '--password', p.password], pingdEnv);
      await c.seed?.(pingdEnv);
    }
    // BENCH_HOSTILE_PROFILE=<dir>: pingd under --cpu-prof (summarise with bench/profile-summary.ts).
    const profile = env.BENCH_HOSTILE_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${env.BENCH_HOSTILE_PROFILE}`] : [];
    pingd = await startPingd({ env: pingdEnv, imports: [COUNTER], nodeArgs: profile });
    const queries = queryCounter(pingd.proc);
    if (!Number.isFinite(await queries())) log('  warning: the query counter does not answer: statements not counted');
    const r = await c.run({ url: pingd.url, pid: pingd.proc.pid!, queries }, s, log);
    const code = await pingd.stop();
    pingd = undefined;
    if (code !== 0) log(`  pingd exited with ${code}`);
    return r;
  } finally {
    await pingd?.stop();
    await db.drop();
  }
}

const f1 = (n: number | undefined) =>
  n === undefined || !Number.isFinite(n) ? '–' : n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US');
const f2 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '–' : n < 1 ? n.toFixed(2) : f1(n));

interface Measured {
  c: Case;
  backend: string;
  r?: CaseResult;
  error?: string;
}

function tables(measured: Measured[], s: Settings): string {
  const attacks = measured.filter((m) => isAttackCase(m.c));
  const all = measured.filter((m) => !isFeedCase(m.c) && !isAttackCase(m.c));
  const feeds = measured.filter((m) => isFeedCase(m.c));
  if (attacks.length) return [...(all.length || feeds.length ? [tables([...all, ...feeds], s), ''] : []), attackTable(attacks)].join('\n');
  if (!all.length) return feedTables(feeds);
  const out = [
    '| class | backend | hostile request | ms/request p50 (max), sent alone | pingd CPU ms/request | SQL statements/request | /healthz p50 / p99 ms: idle → 4 attacking connections | pingd RSS MB: before → after flood (peak) | flood | what the class is about |',
    '| --- | --- | --- | ---: | ---: | ---: | --- | --- | --- | --- |',
  ];
  for (const { c, backend, r, error } of all) {
    if (!r) {
      out.push(`| ${c.title} | ${backend} | failed: ${error} | | | | | | | |`);
      continue;
    }
    const cost = r.cost;
    const few = (n: number) => (n < 20 ? ` (${n} answered)` : '');
    const hz =
      r.idle && r.attack ? `${f1(r.idle.p50)} / ${f1(r.idle.p99)} → **${f1(r.attack.p50)} / ${f1(r.attack.p99)}**${few(r.attack.n)}` : '–';
    const mem = r.memory ? `${f1(r.memory.before)} → **${f1(r.memory.after)}** (${f1(r.memory.peak)})` : '–';
    const fl = r.memory
      ? `${r.memory.flood.sent.toLocaleString('en-US')} in ${f1(r.memory.flood.seconds)} s${Number.isFinite(r.memory.after) ? '' : ', **pingd died**'}`
      : '–';
    out.push(
      `| ${c.title} | ${backend} | ${r.label} | **${cost ? `${f1(cost.p50)}** (${f1(cost.max)})` : '–**'} | ${f1(cost?.cpuMs)} | ${f2(cost?.queries)} | ${hz} | ${mem} | ${fl} | ${r.outcome} |`,
    );
  }
  const shapes = all.filter((m) => m.c.id === 'rssping' && m.r?.details);
  if (shapes.length) {
    out.push(
      '',
      '| rss_ping body | backend | ms/request p50 (max) | pingd CPU ms/request | answers |',
      '| --- | --- | ---: | ---: | --- |',
    );
    for (const m of shapes)
      for (const d of m.r!.details!)
        out.push(`| ${d.what} | ${m.backend} | ${f1(d.cost?.p50)} (${f1(d.cost?.max)}) | ${f1(d.cost?.cpuMs)} | ${d.answers} |`);
  }
  const kinds = all.filter((m) => m.c.id === 'variants' && m.r?.details);
  if (kinds.length) {
    out.push(
      '',
      `| spellings of one site, after its canonical URL (PING_MIN_INTERVAL 300 s) | backend | accepted of ${s.variants} | answers |`,
      '| --- | --- | ---: | --- |',
    );
    for (const m of kinds) for (const d of m.r!.details!) out.push(`| ${d.what} | ${m.backend} | **${d.accepted}** | ${d.answers} |`);
  }
  if (feeds.length) out.push('', feedTables(feeds));
  return out.join('\n');
}

function git(args: string[]): string {
  try {
    return execFileSync('git', ['-C', PINGD_ROOT, ...args], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
}

function method(s: Settings): string {
  return [
    `How measured: each class runs against its own \`pingd serve\` (child process, LOG_LEVEL=warn, VERIFY_PINGS=off, RENDER_SCHEDULER=false except in (3), the class's settings) on a fresh database. ` +
      `**ms/request**: wall time of the hostile request sent alone, one after another on one keep-alive connection (${s.samples} requests; 20 for If-None-Match, 8 per rss_ping body; each case stops early after 15–30 s). ` +
      `**CPU**: pingd's user+system time over those requests (/proc/<pid>/stat), per request. ` +
      `**SQL statements**: counted inside pingd by a preloaded module wrapping the drivers' query calls (pg \`Client.query\`, PGlite \`query\`/\`exec\` and a transaction's statements; BEGIN/COMMIT/ROLLBACK not counted), ` +
      `minus what pingd sends idle over the same time (render ticks, queue polls), per request. ` +
      `**/healthz**: sent one at a time for ${s.attackSeconds} s, idle, then while 4 keep-alive connections send the hostile request back to back. ` +
      `**RSS**: VmRSS of pingd (/proc/<pid>/status) before and after a flood of the hostile request, ${s.concurrency} in flight on keep-alive connections ` +
      `(${s.requests.toLocaleString('en-US')} requests, ${s.rsspingRequests} for 256 KiB rss_pings, each flood stopped after ${s.floodSeconds} s: the number sent is given), peak = VmHWM; ` +
      `"before" is after the few hundred hostile requests of the other figures.`,
    '',
    'Cases: (1) `TRUST_PROXY=true RATE_LIMIT_PER_IP=5`, the same weblog pinged each time (throttled after the first), so only what a client address costs grows; ' +
      '(3) `/changes.xml` rendered twice (200 weblogs, then 20 more) so that it has delta cut points, then entity tags shaped as ours naming renderings that do not exist, never repeated; ' +
      '(4) `RSSPING_SECRET` set, one publisher registered with `pingd publisher add`; the publisher (127.0.0.3) takes a token, a stranger (127.0.0.2) asks for tokens one after another, then the publisher uses its first token and asks for another; ' +
      `(5) rss_pings of ${Object.keys(rssPingShapes('https://x.example/', 4096)).length} shapes, each as close to \`RSSPING_BODY_LIMIT\` (256 KiB) as it goes, each for a weblog that has just pinged (throttled) and for a new weblog each time (8 requests of each); the worst (most pingd CPU) is the class row, the attack and the flood; ` +
      '(6) each kind on a host of its own, its canonical URL pinged first, then the spellings one after another.',
  ].join('\n');
}

export async function runHardening(opts: HardeningOptions): Promise<boolean> {
  const s = settings();
  const wanted = env.BENCH_HOSTILE_CASES ? env.BENCH_HOSTILE_CASES.split(',').map((x) => x.trim()) : undefined;
  // A set's name stands for its cases: `attacks` for the six of bench/lib/intake-attack-cases.ts.
  const sets: Record<string, readonly Case[]> = { attacks: ATTACK_CASES };
  const chosen = (c: Case) => !wanted || wanted.includes(c.id) || wanted.some((w) => sets[w]?.includes(c));
  const cases = [
    ...CASES,
    ...FEED_CASES,
    ...STREAM_CASES,
    ...STREAM_REPLAY_CASES,
    ...WEBSUB_CASES,
    ...RELAY_CASES,
    ...OPEN_HUB_CASES,
    ...ATTACK_CASES,
  ].filter(chosen);
  const commit = git(['rev-parse', '--short', 'HEAD']);
  const dirty = git(['status', '--porcelain', '--', 'src']);
  const measured = `${PINGD_ROOT === ROOT ? 'this checkout' : PINGD_ROOT} at ${commit || 'an unknown commit'} (${git(['log', '-1', '--format=%s']).slice(0, 100)})${dirty ? `, with uncommitted changes in ${dirty.split('\n').length} file(s) under src/` : ''}`;
  const started = new Date();
  const load0 = loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
  log(`hardening: pingd of ${measured}`);
  const all: Measured[] = [];
  for (const backend of opts.backends) {
    for (const c of cases) {
      log(`${c.title} — ${backend}`);
      try {
        all.push({ c, backend, r: await runCase(c, backend, s, opts.databaseUrl) });
      } catch (err) {
        log(`  failed: ${(err as Error).stack ?? err}`);
        all.push({ c, backend, error: (err as Error).message.split('\n')[0].slice(0, 200) });
      }
    }
  }
  const cpu = cpus();
  const md = [
    `### Hardening benchmark ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `pingd: ${measured}. Machine: ${cpu.length} × ${cpu[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}; load average at start ${load0}, at end ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}. Wall time ${Math.round((Date.now() - started.getTime()) / 1000)} s.`,
    '',
    tables(all, s),
    '',
    ...(cases.some((c) => !isFeedCase(c) && !isAttackCase(c)) ? [method(s), ''] : []),
    ...(cases.some(isAttackCase) ? [attackMethod(cases)] : []),
    ...(cases.some((c) => FEED_CASES.includes(c as never)) ? [feedMethod(), ''] : []),
    ...cases.filter(isFeedCase).flatMap((c) => (c.method ? [`**${c.id}**: ${c.method}`, ''] : [])),
  ].join('\n');
  console.log(md);
  if (opts.write) {
    // The page is the cases' group (hostile HTTP, hostile feeds, bounded fan-out) when one group ran.
    const fanout: readonly unknown[] = [...STREAM_CASES, ...WEBSUB_CASES, ...RELAY_CASES];
    const group =
      cases.length && cases.every(isAttackCase)
        ? { scenario: 'attacks', title: 'Attacks on intake' }
        : cases.length && cases.every((c) => (STREAM_REPLAY_CASES as readonly unknown[]).includes(c))
          ? { scenario: 'replay', title: 'Stream replays' }
          : cases.every((c) => fanout.includes(c))
            ? { scenario: 'fanout', title: 'Bounded fan-out' }
            : cases.every((c) => (FEED_CASES as readonly unknown[]).includes(c))
              ? { scenario: 'feeds', title: 'Hostile feeds' }
              : { scenario: 'hardening', title: 'Hostile clients and inputs' };
    log(`results written to ${recordRun({ ...group, started, markdown: md, backends: opts.backends }).join(', ')}`);
  }
  return all.every((m) => m.r);
}

// Run directly: node --import tsx bench/hardening.ts [--write]
if (isMain(import.meta.url)) runDirect('hardening', runHardening);
