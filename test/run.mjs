#!/usr/bin/env node
// Runs the whole suite: on the embedded database (PGlite) and, when TEST_DATABASE_URL is set, on a real
// PostgreSQL at the same time, from a compiled copy of the checkout (mirror.mjs). node --test gets an
// explicit file list (with .ts files, a glob finds none).
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, statSync, existsSync, mkdirSync, rmSync, renameSync, readFileSync, cpSync, mkdtempSync, chmodSync } from 'node:fs';
import { join, relative } from 'node:path';
import { tmpdir } from 'node:os';
import { buildMirror } from './mirror.mjs';

const root = new URL('..', import.meta.url).pathname;

function findTests(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...findTests(p));
    else if (name.endsWith('.test.ts')) out.push(relative(root, p));
  }
  return out;
}

const filter = process.argv.slice(2).filter((a) => a !== '--list');
let files = findTests(join(root, 'test'));
if (filter.length) files = files.filter((f) => filter.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}

// An initdb'd PGlite directory, made once and copied for each test: initdb takes seconds, a copy doesn't.
async function pgliteTemplate() {
  const version = JSON.parse(readFileSync(join(root, 'node_modules/@electric-sql/pglite/package.json'), 'utf8')).version;
  const dir = join(tmpdir(), `pingd-pglite-template-${version}`);
  if (existsSync(join(dir, 'PG_VERSION'))) return dir;
  const { PGlite } = await import('@electric-sql/pglite');
  const tmp = `${dir}.${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  const db = new PGlite(tmp);
  await db.waitReady;
  await db.close();
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return dir;
}

// The same with every migration applied, keyed by the migrations' bytes: an app on a fresh embedded database
// spent ~3.5 s of its ~5 s start applying them (measured), and the suite starts some 150 of them. Tests
// that need an empty database (migrations themselves, readiness before them) ask for the bare one.
function migrationsHash() {
  const dir = join(root, 'migrations');
  const hash = createHash('sha1');
  for (const f of readdirSync(dir).sort()) hash.update(f).update(readFileSync(join(dir, f)));
  return hash.digest('hex').slice(0, 12);
}

function migratedTemplate(bare) {
  const out = `${bare}-migrated-${migrationsHash()}`;
  if (existsSync(join(out, 'PG_VERSION'))) return out;
  const work = mkdtempSync(join(tmpdir(), 'pingd-migrate-'));
  try {
    cpSync(bare, join(work, 'pgdata'), { recursive: true });
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'migrate'], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: '', DATA_DIR: work, LOG_LEVEL: 'silent' },
      encoding: 'utf8',
    });
    if (r.status !== 0) {
      console.error(`could not build the migrated PGlite template (tests will migrate each database): ${r.stderr}`);
      return undefined;
    }
    const tmp = `${out}.${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    renameSync(join(work, 'pgdata'), tmp);
    rmSync(out, { recursive: true, force: true });
    renameSync(tmp, out);
    return out;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

// A test file whose code never reaches a database (parsers, decisions, renderers, docs) does the same work on
// either backend: it runs once (see filesFor). Reaching one: importing, through any chain of relative
// imports (type-only ones aside), the database layer, pg or PGlite, or the test app; or starting processes
// (a server the test spawns opens a database); or reading the backend from the environment.
const REACHES_DATABASE =
  /(?<![.\w])(?:spawn|spawnSync|execFile|execFileSync|fork|exec)\(|TEST_DATABASE_URL|TEST_BACKEND|from 'pg'|@electric-sql\/pglite/;
function reachesDatabase(file, seen = new Set()) {
  if (seen.has(file)) return false;
  seen.add(file);
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return true; // unresolved: assume it does
  }
  if (REACHES_DATABASE.test(text)) return true;
  const specs = [
    ...[...text.matchAll(/\b(?:import|export)\s+(type\s+)?[^;'"]*?\bfrom\s+'(\.{1,2}\/[^']+)'/g)].filter((m) => !m[1]).map((m) => m[2]),
    ...[...text.matchAll(/\bimport\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((m) => m[1]),
  ];
  for (const spec of specs) {
    const target = join(file, '..', spec);
    const candidates = [target.replace(/\.js$/, '.ts'), target, `${target}.ts`];
    const found = candidates.find((c) => existsSync(c) && statSync(c).isFile());
    if (!found || reachesDatabase(found, seen)) return true;
  }
  return false;
}

// `node test/run.mjs --list`: the files each backend runs, and nothing else.
if (process.argv.includes('--list')) {
  for (const f of files) console.log(`${reachesDatabase(join(root, f)) ? 'both' : 'once'} ${f}`);
  process.exit(0);
}

const backends = [['pglite', {}]];
if (process.env.TEST_DATABASE_URL) backends.push(['postgres', { TEST_DATABASE_URL: process.env.TEST_DATABASE_URL }]);
else console.log('TEST_DATABASE_URL is not set: running on the embedded database only.');

// Test databases are dropped by the tests that made them; a test process that was killed (or a test that
// kills its own server) can leave one behind. Drop those whose creating process is gone.
async function dropStaleTestDatabases(url) {
  const { default: pg } = await import('pg');
  const admin = new pg.Client({ connectionString: url });
  try {
    await admin.connect();
    const { rows } = await admin.query("select datname from pg_database where datname ~ '^pingd_test_[0-9]+_[0-9a-f]+$'");
    for (const { datname } of rows) {
      const pid = Number(datname.split('_')[2]);
      let alive = true;
      try {
        process.kill(pid, 0);
      } catch (err) {
        alive = err.code === 'EPERM';
      }
      if (!alive) await admin.query(`drop database if exists ${datname} with (force)`);
    }
  } catch (err) {
    console.log(`(could not clean up stale test databases: ${err.message})`);
  } finally {
    await admin.end().catch(() => {});
  }
}

// On the server: a database with every migration applied that test databases are created from
// (CREATE DATABASE … TEMPLATE), made once per set of migrations; this checkout's older ones are dropped.
// Named after the checkout too: two checkouts sharing one server (another branch, a bench worktree) each
// keep their own instead of dropping the other's while its tests create databases from it.
async function postgresTemplate(url) {
  const checkout = createHash('sha1').update(root).digest('hex').slice(0, 8);
  const name = `pingd_tpl_${checkout}_${migrationsHash()}`;
  const { default: pg } = await import('pg');
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    const { rows } = await admin.query('select datname from pg_database where datname like $1', [`pingd_tpl_${checkout}_%`]);
    if (rows.some((r) => r.datname === name)) return name;
    for (const { datname } of rows) await admin.query(`drop database if exists ${datname} with (force)`);
    await admin.query(`create database ${name}`);
    const u = new URL(url);
    u.pathname = `/${name}`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'migrate'], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: u.href, LOG_LEVEL: 'silent' },
      encoding: 'utf8',
    });
    if (r.status !== 0) {
      await admin.query(`drop database if exists ${name} with (force)`);
      console.error(`could not build the migrated PostgreSQL template (tests will migrate each database): ${r.stderr}`);
      return undefined;
    }
    return name;
  } finally {
    await admin.end();
  }
}

// The tests' temporary directories (each embedded test database is a 40 MB copy of the template) on a
// memory file system when there is one: copying the template to /tmp cost 320-550 ms of CPU per database
// (the page cache, then writeback), to /dev/shm 55-100 ms, and the suite opens some 200 of them per run.
function testTmpdir() {
  if (process.env.PINGD_TEST_TMPDIR === 'off') return undefined;
  try {
    const dir = mkdtempSync(join(process.env.PINGD_TEST_TMPDIR || '/dev/shm', 'pingd-tests-'));
    // As /tmp is: tests that run a private PostgreSQL as its own user make their directories in here.
    chmodSync(dir, 0o1777);
    return dir;
  } catch {
    return undefined;
  }
}

const testTmp = testTmpdir();
process.on('exit', () => testTmp && rmSync(testTmp, { recursive: true, force: true }));
const template = await pgliteTemplate();
// The compiled copy the files run from (test/mirror.mjs): without a loader, a test process costs ~0.75 s of
// CPU less. PINGD_TEST_MIRROR=off runs them from the checkout under tsx, as a developer's single file runs.
// In this run's own directory: two checkouts' runs at once must not replace each other's copy.
const mirrorHome = testTmp ?? mkdtempSync(join(tmpdir(), 'pingd-mirror-'));
if (!testTmp) process.on('exit', () => rmSync(mirrorHome, { recursive: true, force: true }));
const mirror = process.env.PINGD_TEST_MIRROR === 'off' ? undefined : await buildMirror(root, join(mirrorHome, 'pingd-mirror'));
const migrated = migratedTemplate(template);
// Both backends run at once, each with its own `node --test` (TEST_CONCURRENCY files at a time, default 3):
// one after the other, 1.4 of the 2 cores were busy on average (processes waiting on leases, timers and
// each other; each run's slow last files alone at the end), 1.7 at once (suite 535 -> 486 s).
// TEST_SERIAL_BACKENDS=1 runs them one after the other. Each run's report is printed whole once it is done.
// A file that never reaches a database runs once, in the PostgreSQL run when there is one, first: the
// embedded run is the longer (~425 against ~235 CPU-s of test processes), and these files hold the
// suite's longest (the hostile-text scans at 5 MiB: 77 s, 33 CPU-s), which must not start last.
const onBoth = files.filter((f) => reachesDatabase(join(root, f)));
const dbFree = files.filter((f) => !onBoth.includes(f));
// Files that measure the server's pace and need the machine to themselves run after both backends' runs, the
// two backends' copies at once and nothing else (each keeps about half a core busy). The spam replay
// compresses 12 corpus hours into 70 s, so a farm's 15-minute timer pings every 1.5 s: beside the rest of
// the suite on 2 cores, the stored times jittered and stretched and timers read as people (96 of 474
// splogs listed where 94 is the limit, in three CI runs out of three); alone, both copies at once, each
// listed 58-61 of 525 against a limit of 105 (83 s for the pair). The embedded copy replays in 120 s (its
// verifier lagged beside the PostgreSQL copy on a slow machine): 162 s for the pair, quiet machine.
const QUIET = ['test/spam/replay.test.ts'];
function filesFor(backend) {
  const rest = (fs) => fs.filter((f) => !QUIET.includes(f));
  if (backends.length === 1) return rest(files);
  return backend === 'postgres' ? [...dbFree, ...rest(onBoth)] : rest(onBoth);
}
const quietFiles = files.filter((f) => QUIET.includes(f));
// Files that took 20 s or more of their run in CI (2026-11-30, the longer of the two backends' figures,
// 20-81 s), longest first: each run starts them first, so none of them is what the run waits for at its
// end while the other places sit idle. The rest keep their order. A file not named here runs as before.
const LONGEST = [
  'test/hostile/feed-patterns.test.ts',
  'test/platform/db/first-start.test.ts',
  'test/platform/db/database.test.ts',
  'test/operations/cli.test.ts',
  'test/faults/full-disk.test.ts',
  'test/cli.test.ts',
  'test/push/relay/sigkill.test.ts',
  'test/operations/admin/commands-beside-server.test.ts',
  'test/operations/retention/retention.test.ts',
  'test/verification/hostile-feeds.test.ts',
  'test/publishing/render/weblogs-command.test.ts',
  'test/faults/verify-sigkill.test.ts',
  'test/faults/websub-sigkill.test.ts',
  'test/web/browser.test.ts',
  'test/publishing/render/big-documents.test.ts',
  'test/push/stream/eventsource.test.ts',
  'test/publishing/render/open-hour-stream.test.ts',
  'test/faults/failover-stream.test.ts',
  'test/spam/hold.test.ts',
  'test/faults/rsscloud-sigkill.test.ts',
  'test/faults/pid-one.test.ts',
  'test/publishing/render/paced.test.ts',
  'test/verification/verify.test.ts',
  'test/publishing/render/render-command.test.ts',
  'test/intake/rss-ping/publisher-auth.test.ts',
  'test/hostile/headers.test.ts',
  'test/hostile/fuzz.test.ts',
  'test/push/stream/stream.test.ts',
];
const rank = (f) => (LONGEST.includes(f) ? LONGEST.indexOf(f) : LONGEST.length);
// Array.prototype.sort is stable: files of one rank keep their order.
const longestFirst = (fs) => [...fs].sort((a, b) => rank(a) - rank(b));

// V8 optimizes a function later in test processes (see below) where it has --interrupt-budget (Node 22's
// V8 counts bytecode run, default ~132 KB). Node 24's V8 counts invocations and refuses that flag; its
// invocation-count flags raised 7.5x measured no better on two files (10.4 against 9.3 CPU-s, a busy
// machine), so it runs with V8's defaults. PINGD_TEST_V8_FLAGS overrides both.
function tierUpFlags() {
  if (process.env.PINGD_TEST_V8_FLAGS !== undefined) return process.env.PINGD_TEST_V8_FLAGS.split(' ').filter(Boolean);
  const budget = ['--interrupt-budget=1000000'];
  return spawnSync(process.execPath, [...budget, '-e', '0']).status === 0 ? budget : [];
}
const laterTierUp = tierUpFlags();

function runBackend(backend, extra, pgTemplate, runFiles, label = backend) {
  const child = spawn(
    process.execPath,
    [
      ...(mirror ? ['--enable-source-maps'] : ['--import', 'tsx']),
      // V8 optimizes a function once it has run through this much bytecode (default ~132 KB): a test process
      // lives seconds, and most of what it optimized ran a few times (loading the app, one app start).
      // Measured per file, CPU-s: documents 5.0 -> 4.0, intake 3.9 -> 3.3, stream 6.3 -> 5.5, fuzz
      // 12.0 -> 10.9; the one that runs a hot loop longest, big-documents, 8.0 -> 8.3. The same code, run
      // as it runs everywhere; only when it gets compiled again changes.
      ...laterTierUp,
      '--test',
      '--test-reporter=spec',
      '--test-reporter-destination=stdout',
      // TEST_JUNIT_DIR=dir also writes <dir>/<run>.xml (pglite, postgres, pglite-alone…): every test's time.
      ...(process.env.TEST_JUNIT_DIR
        ? ['--test-reporter=junit', `--test-reporter-destination=${join(process.env.TEST_JUNIT_DIR, `${label.replace(/\W+/g, '-')}.xml`)}`]
        : []),
      `--test-concurrency=${process.env.TEST_CONCURRENCY ?? 3}`,
      ...(mirror ? runFiles.map((f) => join(mirror, f.replace(/\.ts$/, '.js'))) : runFiles),
    ],
    {
      cwd: mirror ?? root,
      // Verification fetches what was pinged; servers the tests start fetch nothing unless a test turns it on
      // with loopback feed servers of its own (tests send traffic to loopback only).
      env: {
        VERIFY_PINGS: 'off',
        ...process.env,
        ...extra,
        TEST_BACKEND: backend,
        ...(testTmp ? { TMPDIR: testTmp } : {}),
        PINGD_PGLITE_TEMPLATE: template,
        ...(migrated ? { PINGD_PGLITE_MIGRATED_TEMPLATE: migrated } : {}),
        ...(pgTemplate ? { PINGD_PG_TEMPLATE_DB: pgTemplate } : {}),
        LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
  return new Promise((resolve) =>
    child.on('close', (status) => {
      const once = backends.length > 1 && label === 'postgres' ? dbFree.length : 0;
      const header = `\n=== test files on ${label} ===\n${once ? `(${once} of them never reach a database: they run here only)\n` : ''}`;
      resolve({ backend: label, status, stdout: header + stdout });
    }),
  );
}

const pgTemplates = new Map();
for (const [backend, extra] of backends)
  if (backend === 'postgres') pgTemplates.set(backend, await postgresTemplate(extra.TEST_DATABASE_URL));
const started = performance.now();
const runs = [];
for (const [backend, extra] of backends) {
  const runFiles = longestFirst(filesFor(backend));
  if (runFiles.length === 0) continue;
  const run = runBackend(backend, extra, pgTemplates.get(backend), runFiles);
  if (process.env.TEST_SERIAL_BACKENDS === '1') await run;
  runs.push(run);
}
const results = await Promise.all(runs);
if (quietFiles.length)
  results.push(
    ...(await Promise.all(
      backends.map(([backend, extra]) => runBackend(backend, extra, pgTemplates.get(backend), quietFiles, `${backend}, alone`)),
    )),
  );
let passed = 0;
let failed = 0;
let failedRuns = 0;
for (const r of results) {
  process.stdout.write(r.stdout);
  const pass = Number(/^ℹ pass (\d+)/m.exec(r.stdout)?.[1] ?? 0);
  const fail = Number(/^ℹ fail (\d+)/m.exec(r.stdout)?.[1] ?? 0);
  passed += pass;
  failed += fail;
  if (r.status !== 0) failedRuns++;
  console.log(`=== ${r.backend}: ${pass} passed, ${fail} failed (exit ${r.status}) ===`);
}
for (const [backend, extra] of backends) if (backend === 'postgres') await dropStaleTestDatabases(extra.TEST_DATABASE_URL);
// The spec reporter lists failures after each backend's run, which a long second backend pushes out of a
// CI log's tail: they are repeated last, so the tail alone says what broke and why.
for (const r of results) {
  const at = r.stdout.indexOf('\n✖ failing tests:');
  if (at >= 0) console.log(`\n=== failures on ${r.backend} (repeated) ===${r.stdout.slice(at, at + 6000)}`);
}
console.log(`\n${passed} passed, ${failed} failed in ${Math.round((performance.now() - started) / 1000)} s`);
process.exit(failedRuns > 0 || failed > 0 || passed === 0 ? 1 : 0);
