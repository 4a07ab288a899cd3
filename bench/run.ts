// Owns `npm run bench`: which scenarios run and in what order, their shared start (baseline, weblog hosts,
// stale databases cleared) and what a run leaves behind. Each scenario is a module of its own (listed in
// SCENARIOS below and by --help); every one measures pingd against a minimal Fastify app answering the same
// bytes (the baseline) on this machine, each in its own process, and reports ratios, not bare figures.
//
//   npm run bench                  the default set, results printed
//   npm run bench -- --write       also each scenario's page bench/results/<scenario>.md, a line in
//                                  bench/results/history.jsonl, and docs/performance.md and the README's
//                                  table regenerated from the pages
//   npm run bench -- --help        this text, the scenarios and the flags; measures nothing
//   BENCH_SCENARIOS=ping BENCH_BACKENDS=postgres BENCH_PROFILE=1 npm run bench
//
// Environment: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres: a database is
// created and dropped on it), BENCH_DURATION (s per timed run, 4), BENCH_RUNS (3), BENCH_WARMUP (s, 2),
// BENCH_CONNECTIONS (64), BENCH_BACKENDS (postgres,pglite), BENCH_SCENARIOS (ids below), BENCH_SHORT_WEBLOGS
// (weblogs in the served shortChanges.xml, 5000), BENCH_HOUR_WEBLOGS (weblogs in the hour the renderer re-renders
// during the ping+render row, 100000), BENCH_PROFILE=1 (pingd under --cpu-prof, summarised),
// BENCH_PINGD_<VAR>=… (passed to pingd as <VAR>), BENCH_PINGD_ROOT (measure another checkout: history only).
// Each scenario module's own opening comment lists its settings; most also run alone:
// node --import tsx bench/<module>.ts [--write].
import { readFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import pg from 'pg';
import { dropStaleDatabases, removeStaleDataDirs, startBaseline } from './lib/servers.js';
import { spreadWeblogHosts } from './lib/feed-hosts.js';
import { loadTable, renderTable, type Row } from './lib/report.js';
import { recordRun } from './lib/results.js';
import { OPTS, wanted, log } from './lib/options.js';
import { INTAKE, runIntake } from './intake.js';
import { documents } from './documents.js';
import { renders } from './renders.js';
import { runHardening } from './hardening.js';
import { runWeb } from './web.js';
import { runWrkBench } from './wrk.js';
import { runRenderTick } from './render-tick.js';
import { runSoak } from './soak.js';
import { runScale } from './scale.js';
import { runMulti } from './multi.js';
import { runFailover } from './failover.js';
import { runSpam } from './spam.js';
import { runPush } from './push.js';
import type { DirectOptions } from './lib/run-direct.js';

async function environment(): Promise<string> {
  let pgVersion: string;
  try {
    const c = new pg.Client({ connectionString: OPTS.databaseUrl });
    await c.connect();
    pgVersion = (await c.query<{ v: string }>("select current_setting('server_version') as v")).rows[0].v;
    await c.end();
  } catch (err) {
    pgVersion = `unreachable (${(err as Error).message})`;
  }
  const cpu = cpus();
  return `${cpu.length} × ${cpu[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}; PostgreSQL ${pgVersion}; load average at start ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`;
}

/** The long scenarios run alone when asked for by flag. */
const ALONE: Record<string, (o: DirectOptions) => Promise<boolean>> = {
  '--soak': runSoak,
  '--scale': runScale,
  '--multi': runMulti,
  '--failover': runFailover,
};

/** `npm run bench -- --help`: this module's own opening comment (scenarios, flags, environment), as usage. */
/** Every scenario: its ids (BENCH_SCENARIOS), the module that owns it, what it measures. */
export const SCENARIOS: { ids: string[]; module: string; what: string; by?: string }[] = [
  {
    ids: [...INTAKE.map((x) => x.id), 'ping-hosts', 'ping-spam', 'ping+render'],
    module: 'bench/intake.ts',
    what: 'durable intake as deployed and with parts stopped; verification on and off; intake while rendering',
  },
  {
    ids: ['short-200-gzip', 'short-304', 'short-226'],
    module: 'bench/documents.ts',
    what: 'polling /shortChanges.xml: 200, 304, 226 delta',
  },
  { ids: ['render'], module: 'bench/renders.ts', what: 'render time, peak memory and bytes of each document (bench/publish-render.ts)' },
  { ids: ['hardening'], module: 'bench/hardening.ts', what: 'hostile clients, hostile feeds and bounded fan-out: intake meanwhile' },
  { ids: ['web'], module: 'bench/web.ts', what: 'intake with /status open in Chromium; /api/stats and /weblog on 1M pings' },
  { ids: ['wrk'], module: 'bench/wrk.ts', what: 'the HTTP ratios with wrk, as deployed and stopped, optional profiles (only when named)' },
  {
    ids: ['render-tick'],
    module: 'bench/render-tick.ts',
    what: "the renderer's CPU per tick with 10k, 100k and 720k weblogs in the hour, 200 new a second (only when named)",
  },
  {
    ids: ['push'],
    module: 'bench/push.ts',
    what: 'WebSub and rssCloud fan-out to 10, 100, 1,000 subscribers beside a bare Node sender (embedded unless BENCH_BACKENDS)',
  },
  { ids: ['spam'], module: 'bench/spam.ts', what: 'the spam score on a synthetic labelled corpus: precision, recall, µs per family' },
  { ids: [], by: '--soak', module: 'bench/soak.ts', what: 'sustained intake with the renderer on, document age over time' },
  { ids: [], by: '--scale', module: 'bench/scale.ts', what: 'a month of pings (100M on PostgreSQL) against an empty database' },
  { ids: [], by: '--multi', module: 'bench/multi.ts', what: 'three instances on one PostgreSQL behind a round-robin proxy' },
  {
    ids: [],
    by: '--failover',
    module: 'bench/failover.ts',
    what: 'the primary crashed and the standby promoted under 200 pings/s: lost, refused, write and stream gaps',
  },
];

/** `npm run bench -- --help`: this module's opening comment, then the scenarios and the flags. */
export function benchHelp(source = readFileSync(new URL(import.meta.url), 'utf8')): string {
  const lines: string[] = [];
  for (const line of source.split('\n')) {
    if (!line.startsWith('//')) break;
    lines.push(line.replace(/^\/\/ ?/, ''));
  }
  const rows = SCENARIOS.map((x) => `  ${(x.by ?? x.ids.join(', ')).padEnd(44)} ${x.module}: ${x.what}`);
  return [
    ...lines,
    '',
    'Scenarios (BENCH_SCENARIOS, comma-separated ids; default all but wrk and render-tick; a flag runs its scenario alone):',
    ...rows,
    `Flags: --help, --write, ${Object.keys(ALONE).join(', ')}.`,
  ].join('\n');
}

async function main(): Promise<number> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    console.log(benchHelp());
    return 0;
  }
  const alone = Object.keys(ALONE).filter((f) => process.argv.includes(f));
  if (alone.length) {
    let okAll = true;
    for (const f of alone) okAll = (await ALONE[f]({ databaseUrl: OPTS.databaseUrl, backends: OPTS.backends, write: OPTS.write })) && okAll;
    return okAll ? 0 : 1;
  }
  // The spam scenario alone needs no database: not even the environment line's PostgreSQL check.
  if (OPTS.scenarios?.every((s) => s === 'spam'))
    return (await runSpam({ databaseUrl: OPTS.databaseUrl, backends: OPTS.backends, write: OPTS.write })) ? 0 : 1;
  const started = new Date();
  const loadAtStart = loadavg()[0];
  const envLine = await environment();
  log(`pingd benchmark: ${envLine}`);
  log(
    `${OPTS.connections} connections, warm-up ${OPTS.warmup} s, ${OPTS.runs} runs of ~${OPTS.duration} s each (pingd and baseline in turn)`,
  );
  if (OPTS.backends.includes('postgres')) {
    if (envLine.includes('PostgreSQL unreachable')) {
      console.error(
        `bench: PostgreSQL at BENCH_DATABASE_URL (${OPTS.databaseUrl.replace(/\/\/[^@/]*@/, '//…@')}) is unreachable; start one or set BENCH_BACKENDS=pglite to measure the embedded database only.`,
      );
      return 2;
    }
    const stale = await dropStaleDatabases(OPTS.databaseUrl);
    if (stale.length) log(`dropped databases left by killed runs: ${stale.join(', ')}`);
  }
  const staleDirs = removeStaleDataDirs();
  if (staleDirs.length) log(`removed data directories left by killed runs: ${staleDirs.join(', ')}`);
  // `hardening` (bench/hardening.ts) prints and writes its own tables; alone, nothing else runs or is written.
  const hardening = () =>
    wanted('hardening')
      ? runHardening({ databaseUrl: OPTS.databaseUrl, backends: OPTS.backends, write: OPTS.write })
      : Promise.resolve(true);
  // `web` (bench/web.ts) likewise prints and writes its own tables.
  const web = () =>
    wanted('web') ? runWeb({ databaseUrl: OPTS.databaseUrl, backends: OPTS.backends, write: OPTS.write }) : Promise.resolve(true);
  // `wrk` (bench/wrk.ts) likewise; only when named (it installs wrk when missing).
  const wrkBench = () =>
    OPTS.scenarios?.includes('wrk')
      ? runWrkBench({ databaseUrl: OPTS.databaseUrl, backends: OPTS.backends, write: OPTS.write })
      : Promise.resolve(true);
  // `render-tick` (bench/render-tick.ts) likewise; only when named (seeding 720k weblogs takes minutes).
  const renderTick = () =>
    OPTS.scenarios?.includes('render-tick')
      ? runRenderTick({ databaseUrl: OPTS.databaseUrl, backends: OPTS.backends, write: OPTS.write })
      : Promise.resolve(true);
  // `spam` (bench/spam.ts) likewise; pure CPU, no server or database.
  const spam = () =>
    wanted('spam') ? runSpam({ databaseUrl: OPTS.databaseUrl, backends: OPTS.backends, write: OPTS.write }) : Promise.resolve(true);
  // `push` (bench/push.ts) likewise: its own servers, the embedded database unless BENCH_BACKENDS says.
  const push = () => (wanted('push') ? runPush() : Promise.resolve(true));
  if (OPTS.scenarios?.every((s) => ['hardening', 'web', 'wrk', 'render-tick', 'spam', 'push'].includes(s))) {
    const hardened = await hardening();
    const tickOk = await renderTick();
    const webOk = await web();
    const spamOk = await spam();
    const pushOk = await push();
    return (await wrkBench()) && webOk && hardened && spamOk && pushOk && tickOk ? 0 : 1;
  }
  const baseline = await startBaseline();
  const feedHosts = wanted('ping') || wanted('ping-hosts') ? await spreadWeblogHosts() : undefined;
  const rows: Row[] = [];
  const checks: string[] = [];
  const profiles: string[] = [];
  let ok = true;
  try {
    const r = await runIntake(baseline, feedHosts);
    rows.push(...r.rows);
    checks.push(...r.checks);
    profiles.push(...r.profiles);
    ok &&= r.ok;
    if (OPTS.backends.includes('postgres')) {
      const d = await documents(baseline);
      rows.push(...d.rows);
      if (d.profile) profiles.push(d.profile);
    }
  } finally {
    await baseline.stop();
    if (feedHosts) log(`weblog hosts served ${feedHosts.served.pages} homepages and ${feedHosts.served.feeds} feeds to verification`);
    await feedHosts?.close();
  }
  const head = (end: Date) => [
    `### Benchmark ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `Machine: ${envLine}, at end ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}. Load generator (autocannon, ${OPTS.connections} connections) on the same machine. ` +
      `Warm-up ${OPTS.warmup} s, then ${OPTS.runs} runs of ~${OPTS.duration} s of pingd and of the baseline in turn; medians, ratio = median of the per-pair ratios. ` +
      `Wall time ${Math.round((end.getTime() - started.getTime()) / 1000)} s.`,
    '',
  ];
  const load = [loadTable(rows), '', ...(checks.length ? ['Acknowledged vs stored: ' + checks.join('; ') + '.', ''] : [])];
  // The load table first: the render scenarios take minutes, and an interrupted run still shows it.
  if (rows.length) console.log([...head(new Date()), ...load].join('\n'));
  const render = await renders();
  const renderPart = render
    ? [render.rows.length ? renderTable(render.rows) : '', render.raw ? '```\n' + render.raw + '\n```' : '', '']
    : [];
  if (render) console.log(renderPart.join('\n'));
  for (const p of profiles) console.log(`\n${p}`);
  if (OPTS.write) {
    // One page per scenario: intake, verification's cost (ping-hosts), polling (documents), renders.
    const part = (ids: (id: string) => boolean) => rows.filter((r) => ids(r.scenario.split(' ')[0]));
    const pages = [
      {
        scenario: 'intake',
        title: 'Intake against the baseline',
        rows: part((id) => INTAKE.some((x) => x.id === id) || id === 'ping+render'),
      },
      { scenario: 'ping-hosts', title: 'Intake with verification on and off', rows: part((id) => id === 'ping-hosts') },
      { scenario: 'spam-intake', title: 'Intake with spam scoring off and on', rows: part((id) => id === 'ping-spam') },
      { scenario: 'documents', title: 'Polling the documents against the baseline', rows: part((id) => id.startsWith('short-')) },
    ];
    for (const p of pages.filter((x) => x.rows.length)) {
      const markdown = [
        ...head(new Date()),
        loadTable(p.rows),
        '',
        ...(p.scenario === 'intake' && checks.length ? [`Acknowledged vs stored: ${checks.join('; ')}.`] : []),
      ].join('\n');
      log(`results written to ${recordRun({ ...p, started, markdown, backends: OPTS.backends, loadAtStart }).join(', ')}`);
    }
    if (render?.rows.length)
      log(
        `results written to ${recordRun({ scenario: 'renders', title: 'Rendering the documents', started, markdown: renderPart.join('\n'), backends: OPTS.backends, loadAtStart }).join(', ')}`,
      );
  }
  if (!(await hardening())) ok = false;
  if (!(await web())) ok = false;
  if (!(await wrkBench())) ok = false;
  if (!(await renderTick())) ok = false;
  if (!(await spam())) ok = false;
  if (!(await push())) ok = false;
  return ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    console.error(`bench failed: ${err.stack ?? err.message}`);
    process.exit(1);
  },
);
