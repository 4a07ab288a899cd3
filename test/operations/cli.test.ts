// `pingd prune` and `pingd stats` as a script runs them: the real CLI process against a database with
// known pings; what they print, and the exit codes (0 done, 1 failure, 2 usage, 75 busy).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import pg from 'pg';
import { openDatabase, type Db } from '../../src/platform/db/database.js';
import { RETENTION_LOCK } from '../../src/operations/retention/prune.js';
import { formatStats } from '../../src/operations/stats/stats-command.js';
import { main } from '../../src/cli.js';
import { adminSocketPath } from '../../src/operations/admin/socket.js';
import { existsSync, rmSync } from 'node:fs';
import { BACKEND, createTestDatabase, startApp, uniqueUrl, type TestDatabase } from '../helpers/app.js';
import { CLI } from '../helpers/cli.js';

let tdb: TestDatabase;
let env: Record<string, string>;
const busy = uniqueUrl('busy');
const quiet = uniqueUrl('quiet');
const old = uniqueUrl('old');
const HOUR = 3_600_000;

const cli = (args: string[], extra: Record<string, string> = {}) =>
  spawnSync(process.execPath, [...CLI, ...args], {
    env: { ...process.env, LOG_LEVEL: 'silent', ...env, ...extra },
    encoding: 'utf8',
    timeout: 30_000,
  });

const openDb = (): Promise<Db> =>
  openDatabase({ databaseUrl: tdb.config.DATABASE_URL, dataDir: tdb.config.DATA_DIR ?? '', poolMax: 1, timeoutMs: 5000 });

before(async () => {
  tdb = await createTestDatabase();
  env = { DATABASE_URL: tdb.config.DATABASE_URL ?? '', DATA_DIR: tdb.config.DATA_DIR ?? '' };
  const t = await startApp({ PING_MIN_INTERVAL: 0, RENDER_SCHEDULER: false }, tdb);
  const accept = async (url: string, name: string) => assert.equal((await t.app.pings.accept({ method: 'ping', name, url })).ok, true);
  for (let i = 0; i < 5; i++) await accept(busy, 'Busy blog');
  for (let i = 0; i < 2; i++) await accept(quiet, 'Quiet blog');
  for (let i = 0; i < 3; i++) await accept(old, 'Old blog');
  // Two of the busy blog's pings were two hours ago; the old blog's pings are 40 days old.
  await t.app.db.query(
    `update pings set received_at = received_at - interval '2 hours' where id in (select id from pings where url = $1 order by id limit 2)`,
    [busy],
  );
  await t.app.db.query(`update pings set received_at = received_at - interval '40 days' where url = $1`, [old]);
  await t.close(); // the CLI opens the database itself (on the embedded one, it must be free)
});
after(async () => {
  await tdb?.drop();
});

test('pingd stats --json: totals, pings per UTC hour for the last day, most pinged weblogs', async () => {
  const r = cli(['stats', '--json']);
  assert.equal(r.status, 0, r.stderr);
  const s = JSON.parse(r.stdout);
  assert.deepEqual(
    {
      weblogs: s.totals.weblogs,
      accepted: s.totals.pingsAccepted,
      stored: s.totals.pingsStored,
      hour: s.totals.weblogsPingedLastHour,
      day: s.totals.weblogsPingedLastDay,
    },
    { weblogs: 3, accepted: 10, stored: 10, hour: 3, day: 3 }, // last_ping_at of the old blog was not moved
  );
  assert.equal(s.perHour.length, 24);
  const db = await openDb();
  try {
    // Each stored ping of the last day is counted in the hour that holds it; nothing else is counted.
    const times = (await db.query<{ received_at: Date }>('select received_at from pings where url <> $1', [old])).map((p) =>
      new Date(p.received_at).getTime(),
    );
    const expected = s.perHour.map(
      (h: { hour: string }) => times.filter((t) => t >= Date.parse(h.hour) && t < Date.parse(h.hour) + HOUR).length,
    );
    assert.deepEqual(
      s.perHour.map((h: { pings: number }) => h.pings),
      expected,
    );
    assert.equal(
      expected.reduce((a: number, b: number) => a + b, 0),
      7,
    );
  } finally {
    await db.close();
  }
  for (const h of s.perHour) assert.equal(Date.parse(h.hour) % HOUR, 0, 'hours start on the hour, UTC');
  assert.deepEqual(
    s.top.map((w: { url: string; pingCount: number; name: string }) => [w.url, w.pingCount, w.name]),
    [
      [busy, 5, 'Busy blog'],
      [old, 3, 'Old blog'],
      [quiet, 2, 'Quiet blog'],
    ],
  );
  const two = cli(['stats', '--json', '--top', '1', '--hours', '3']);
  assert.equal(two.status, 0, two.stderr);
  const s2 = JSON.parse(two.stdout);
  assert.equal(s2.top.length, 1);
  assert.equal(s2.perHour.length, 3);
});

test('pingd stats prints a table a person can read', () => {
  const r = cli(['stats']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^weblogs +3$/m);
  assert.match(r.stdout, /^pings accepted \(ever\) +10$/m);
  assert.match(r.stdout, /^pings per hour \(UTC\), last 24 hours:$/m);
  assert.match(r.stdout, new RegExp(`^ +5  \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ  ${busy.replace(/[.]/g, '\\.')}  "Busy blog"$`, 'm'));
  // formatStats is pure: a weblog name cannot break the layout (quoted as JSON).
  const out = formatStats({
    generatedAt: new Date(0),
    totals: {
      weblogs: 0,
      pingsAccepted: 0,
      pingsStored: 0,
      oldestStoredPing: null,
      newestPing: null,
      weblogsPingedLastHour: 0,
      weblogsPingedLastDay: 0,
    },
    perHour: [{ hour: new Date(Date.UTC(2026, 0, 2, 3)), pings: 0 }],
    top: [{ url: 'http://x.example/', name: 'two\nlines', pingCount: 1, lastPingAt: new Date(0) }],
  });
  assert.match(out, /^ {2}2026-01-02 03:00 +0 {2}$/m);
  assert.match(out, /"two\\nlines"$/m);
});

test('pingd prune: --dry-run counts, then deletes only pings older than --days, and says so', async () => {
  const dry = cli(['prune', '--dry-run', '--json']);
  assert.equal(dry.status, 0, dry.stderr);
  const d = JSON.parse(dry.stdout);
  assert.deepEqual([d.pingsDeleted, d.dryRun, d.archiveCutoff], [3, true, null]);

  const r = cli(['prune', '--days', '30']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(
    r.stdout,
    /^deleted 3 pings received before \d{4}-\d\d-\d\dT[\d:.]+Z \(and 0 RSS Ping payloads, 0 verifications, 0 found items\)$/m,
  );
  assert.match(r.stdout, /^hourly archives are kept forever \(archive days = 0\)$/m);
  const db = await openDb();
  try {
    const rows = await db.query<{ url: string; n: number }>('select url, count(*)::int as n from pings group by url order by url');
    assert.deepEqual(Object.fromEntries(rows.map((x) => [x.url, Number(x.n)])), { [busy]: 5, [quiet]: 2 });
    const [w] = await db.query<{ n: number }>('select ping_count as n from weblogs where url = $1', [old]);
    assert.equal(Number(w.n), 3, 'the weblog and its total stay');
  } finally {
    await db.close();
  }
  // An hour-old ping is kept even with --days 1; nothing is left to delete past 30 days.
  const again = cli(['prune', '--days', '1', '--json']);
  assert.equal(again.status, 0, again.stderr);
  assert.equal(JSON.parse(again.stdout).pingsDeleted, 0);
});

/** Runs the CLI's main() in this process (no database is opened for these), capturing what it prints. */
async function inProcess(args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const { log, error } = console;
  console.log = (...a: unknown[]) => void out.push(a.join(' ') + '\n');
  console.error = (...a: unknown[]) => void err.push(a.join(' ') + '\n');
  try {
    const status = await main(args);
    return { status, stdout: out.join(''), stderr: err.join('') };
  } finally {
    console.log = log;
    console.error = error;
  }
}

test('usage errors exit 2 with the usage; --help exits 0 for prune and stats', async () => {
  for (const [args, message] of [
    [['prune', '--days', 'abc'], /--days must be a whole number of days between 0 and 36500, got "abc"/],
    [['prune', '--archive-days=-1'], /--archive-days must be a whole number of days between 0 and 36500, got "-1"/],
    [['stats', '--top', '0'], /--top must be a whole number between 1 and 1000, got "0"/],
    [['stats', '--hours', '721'], /--hours must be a whole number between 1 and 720/],
    [['stats', '--frobnicate'], /Unknown option '--frobnicate'/],
  ] as const) {
    const r = await inProcess([...args]);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.match(r.stderr, /Usage: pingd (prune|stats)/);
  }
  for (const cmd of ['prune', 'stats']) {
    const h = await inProcess([cmd, '--help']);
    assert.equal(h.status, 0);
    assert.match(h.stdout, new RegExp(`Usage: pingd ${cmd} \\[`));
    assert.match(h.stdout, /Exit codes: 0 done, 1 failure/);
  }
  const top = await inProcess(['--help']);
  assert.match(top.stdout, /^ {2}prune +Delete raw pings/m);
  assert.match(top.stdout, /^ {2}stats +Print totals/m);
  // And once through the real process: the exit code is what a shell sees.
  const real = cli(['prune', '--days', 'abc']);
  assert.equal(real.status, 2);
  assert.match(real.stderr, /--days must be a whole number/);
});

test("prune exits 75 while another instance prunes, stats 75 while the embedded database is held without a server's socket; stats and prune exit 1 when the database is unavailable", async () => {
  if (BACKEND === 'postgres') {
    const other = new pg.Client({ connectionString: tdb.config.DATABASE_URL });
    await other.connect();
    try {
      await other.query('select pg_advisory_lock($1)', [RETENTION_LOCK]);
      const r = cli(['prune']);
      assert.equal(r.status, 75, r.stderr);
      assert.match(r.stderr, /another instance is pruning now; try again later/);
    } finally {
      await other.end();
    }
  } else {
    // The embedded database is owned by one process at a time. A server lets commands in through its
    // socket (test/operations/admin/commands-beside-server.test.ts); a holder without one (this process,
    // or a command running) keeps the CLI out, naming it, even where a crashed server left a socket file.
    const socket = adminSocketPath(tdb.config.DATA_DIR!);
    const crashed = spawnSync(process.execPath, [
      '-e',
      `require('net').createServer().listen(${JSON.stringify(socket)}, () => process.kill(process.pid, 'SIGKILL'))`,
    ]);
    assert.equal(crashed.signal, 'SIGKILL');
    const db = await openDb();
    try {
      assert.ok(existsSync(socket));
      // Not spawnSync: the holder's heartbeat must go on meanwhile, or its lock looks abandoned after 10 s.
      const r = await new Promise<{ status: number; stderr: string }>((resolve) =>
        execFile(
          process.execPath,
          [...CLI, 'stats'],
          { env: { ...process.env, LOG_LEVEL: 'silent', ...env }, encoding: 'utf8', timeout: 30_000 },
          (err, _out, stderr) => resolve({ status: err ? Number((err as { code?: unknown }).code) : 0, stderr }),
        ),
      );
      assert.equal(r.status, 75);
      assert.match(
        r.stderr,
        new RegExp(
          `pingd stats: the embedded database in .* is in use by another pingd process \\(pid ${process.pid} on .+, alive \\d+ ms ago\\)`,
        ),
      );
    } finally {
      await db.close();
      rmSync(socket, { force: true });
    }
  }
  const down = { DATABASE_URL: 'postgres://pingd:pw-not-printed@127.0.0.1:1/pingd', DB_TIMEOUT_MS: '1000' };
  for (const cmd of ['stats', 'prune']) {
    const r = cli([cmd], down);
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`^pingd ${cmd}: .*ECONNREFUSED`, 'm'));
    assert.ok(!r.stderr.includes('pw-not-printed'));
  }
});
