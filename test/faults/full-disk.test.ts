// A full disk under the embedded database, on a real filesystem that fills up: a tmpfs of its own in a new
// user and mount namespace (`unshare -rm`, no root needed), which this test reaches from outside through
// /proc/<pid>/root to fill and free it. Regression: on a full DATA_DIR pings were refused only as "did not
// answer in time", PGlite then spun at 100% CPU for good (a WAL segment it could not create), /changes.xml,
// /status and /api/stats hung, /healthz said ok, it did not recover when space was freed, and SIGTERM ran
// into the shutdown bound.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { open, statfs, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BACKEND, methodCall, readReply, startApp, uniqueUrl } from '../helpers/app.js';
import { freePort } from './private-postgres.js';
import type { Outcome } from './full-disk-engine.js';
import { waitFor } from '../helpers/wait.js';
import { CLI } from '../helpers/cli.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const TEMPLATE = process.env.PINGD_PGLITE_MIGRATED_TEMPLATE || process.env.PINGD_PGLITE_TEMPLATE || '';
const DISK_FULL_MESSAGE = "The ping could not be stored: the server's disk is full; please ping again later.";
/** A refusal slower than this is a hang, not a refusal (it takes milliseconds). */
const FAST_MS = 3000;
const SHUTDOWN_TIMEOUT_MS = 10_000;
/** How many cores' worth of CPU pingd may use while it waits on a full disk: a spin is a whole one. */
const IDLE_CORES = 0.5;

/** utime+stime of a process and all its threads, in ms (USER_HZ is 100 on Linux). */
function cpuMs(pid: number): number {
  const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

/**
 * Appends zeros to `path` until `leaveBytes` are free on its filesystem, or (0) until the filesystem says
 * ENOSPC: 1 MiB at a time, then smaller.
 */
async function fill(path: string, leaveBytes = 0): Promise<void> {
  const f = await open(path, 'a');
  const dir = path.slice(0, path.lastIndexOf('/'));
  try {
    for (const size of [1024 * 1024, 4096, 512]) {
      const chunk = Buffer.alloc(size);
      for (;;) {
        if (leaveBytes > 0) {
          const s = await statfs(dir);
          if (s.bavail * s.bsize - size < leaveBytes) break;
        }
        try {
          await f.write(chunk);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw err;
        }
      }
    }
  } finally {
    await f.close().catch(() => undefined);
  }
}

/**
 * A shell in a new user and mount namespace with a tmpfs of `sizeMb` on `mnt`, holding a copy of the
 * migrated test database, that runs `pingd serve` on it twice: the second start waits for a line on its
 * stdin, so the test frees the disk in between. The shell outlives the first pingd, and with it the tmpfs.
 */
function namespaceWithPingd(mnt: string, sizeMb: number, port: number) {
  const serve = `${[process.execPath, ...CLI].map((a) => JSON.stringify(a)).join(' ')} serve`;
  const script = [
    `mount -t tmpfs -o size=${sizeMb}m tmpfs "$MNT" || exit 90`,
    TEMPLATE ? `cp -r "$TEMPLATE" "$MNT/pgdata" || exit 91` : ':',
    `${serve} </dev/null; echo "first pingd exited $?" >&2`,
    'read go',
    `exec ${serve}`,
  ].join('\n');
  const child = spawn('unshare', ['-rm', 'sh', '-c', script], {
    cwd: ROOT,
    env: {
      ...process.env,
      MNT: mnt,
      TEMPLATE,
      DATABASE_URL: '',
      DATA_DIR: mnt,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      VERIFY_PINGS: 'off',
      SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
    },
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return {
    child,
    exited,
    stderr: () => stderr,
    /** The tmpfs as this process sees it: through the shell's root, in its mount namespace. */
    path: (name: string) => `/proc/${child.pid}/root${mnt}/${name}`,
    /** The pid of the pingd the shell runs now (its only child), or of the shell once it exec'd the second. */
    pingd(): number {
      const kids = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
      return kids.length === 1 ? Number(kids[0]) : child.pid!;
    },
  };
}

async function xmlrpcPing(port: number, url: string) {
  const t0 = performance.now();
  const r = await fetch(`http://127.0.0.1:${port}/RPC2`, {
    method: 'POST',
    headers: { 'content-type': 'text/xml' },
    body: methodCall('weblogUpdates.ping', ['Full disk', url]),
    signal: AbortSignal.timeout(30_000),
  });
  return { ...readReply(r.status, await r.text()), ms: performance.now() - t0 };
}

async function timedGet(port: number, path: string) {
  const t0 = performance.now();
  const r = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(30_000) });
  const body = await r.text();
  return { status: r.status, body, headers: r.headers, ms: performance.now() - t0 };
}

async function readyReason(port: number): Promise<string> {
  const r = await timedGet(port, '/readyz');
  return r.status === 200 ? 'ready' : (JSON.parse(r.body) as { reason: string }).reason;
}

const MiB = 1024 * 1024;
/** Imported when used, so that the tests of behaviour below also run against code without the module. */
const diskGuard = () => import('../../src/platform/db/disk-guard.js');

test('the disk guard decides: low below DISK_MIN_FREE_MB and back at it, 0 never low, a stopped database opens again only with a WAL segment free, an unreadable filesystem changes nothing', async () => {
  const { REOPEN_MIN_FREE_BYTES, nextDiskMode, reopenBackoffMs } = await diskGuard();
  assert.equal(nextDiskMode('ok', 63 * MiB, 64 * MiB), 'low');
  assert.equal(nextDiskMode('ok', 64 * MiB, 64 * MiB), 'ok');
  assert.equal(nextDiskMode('low', 63 * MiB, 64 * MiB), 'low');
  assert.equal(nextDiskMode('low', 64 * MiB, 64 * MiB), 'ok');
  assert.equal(nextDiskMode('ok', 0, 0), 'ok', 'DISK_MIN_FREE_MB=0: only a failed write stops it');
  assert.equal(nextDiskMode('stopped', 63 * MiB, 64 * MiB), 'stopped');
  assert.equal(nextDiskMode('stopped', 64 * MiB, 64 * MiB), 'reopen');
  assert.equal(nextDiskMode('stopped', REOPEN_MIN_FREE_BYTES - 1, 0), 'stopped');
  assert.equal(nextDiskMode('stopped', REOPEN_MIN_FREE_BYTES, 0), 'reopen');
  for (const mode of ['ok', 'low', 'stopped'] as const) assert.equal(nextDiskMode(mode, null, 64 * MiB), mode);
  assert.deepEqual([1, 2, 3, 6, 7, 50].map(reopenBackoffMs), [1000, 2000, 4000, 32_000, 60_000, 60_000]);
});

test('a disk-full error is SQLSTATE 53100 or ENOSPC, whatever its wording; other errors are not', async () => {
  const { isDiskFullError } = await diskGuard();
  assert.equal(isDiskFullError({ code: '53100', message: 'could not extend file "base/5/16385": No space left on device' }), true);
  assert.equal(isDiskFullError({ code: '53100', message: 'could not access status of transaction 0' }), true);
  assert.equal(isDiskFullError({ code: 'ENOSPC', message: 'write failed' }), true);
  assert.equal(isDiskFullError(new Error("the embedded database's thread failed: No space left on device")), true);
  assert.equal(isDiskFullError({ code: '23505', message: 'duplicate key value violates unique constraint' }), false);
  assert.equal(isDiskFullError({ code: '53200', message: 'out of memory' }), false);
  assert.equal(isDiskFullError(undefined), false);
});

// PostgreSQL's disk is the server's: pingd knows it only from SQLSTATE 53100, which a real server raises
// here on demand (a DO block), no disk filled. On the embedded database the same error stops the engine
// until it is opened again (the tests below fill a real disk).
test(
  'SQLSTATE 53100 disk_full from the database: pings are refused at once saying the disk is full, /readyz and /healthz say so, and pings are taken again once it writes again',
  { timeout: 60_000 },
  async () => {
    const t = await startApp();
    const rpc = async (url: string) => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/RPC2',
        headers: { 'content-type': 'text/xml' },
        payload: methodCall('weblogUpdates.ping', ['Disk', url]),
      });
      return readReply(res.statusCode, res.body);
    };
    try {
      assert.equal((await rpc(uniqueUrl('disk-53100-before'))).flerror, false);
      await assert.rejects(
        t.app.db.query("do $$ begin raise exception 'could not extend file: No space left on device' using errcode = 'disk_full'; end $$"),
        { code: 'DISK_FULL' },
      );
      const refused = await rpc(uniqueUrl('disk-53100'));
      assert.equal(refused.status, 200);
      assert.equal(refused.flerror, true);
      assert.equal(refused.message, DISK_FULL_MESSAGE);
      const form = await t.app.inject({
        method: 'GET',
        url: `/pingSiteForm?name=D&url=${encodeURIComponent(uniqueUrl('disk-53100-form'))}`,
      });
      assert.equal(form.statusCode, 503);
      assert.equal(form.headers['retry-after'], '60');
      assert.ok(form.body.includes(DISK_FULL_MESSAGE.replace("'", '&#39;')), form.body);
      const ready = await t.app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(ready.statusCode, 503);
      assert.deepEqual(ready.json(), { status: 'unavailable', reason: 'disk full' });
      const health = await t.app.inject({ method: 'GET', url: '/healthz' });
      assert.equal(health.statusCode, 200);
      assert.equal(health.json().status, 'degraded');
      assert.equal(health.json().reason, 'disk full');
      // PostgreSQL: asked again after SERVER_DISK_FULL_HOLD_MS; embedded: opened again (space is there).
      await waitFor(async () => (await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode === 200, {
        what: '/readyz is ready again',
        timeoutMs: 30_000,
        intervalMs: 100,
        retryErrors: true,
      });
      assert.equal((await rpc(uniqueUrl('disk-53100-after'))).message, 'Thanks for the ping.');
    } finally {
      await t.close();
    }
  },
);

if (BACKEND === 'pglite') {
  test(
    'a WAL segment that cannot be created no longer wedges the embedded database: statements are refused at once, its thread stops spinning, and it opens again once space is freed',
    { timeout: 90_000 },
    async () => {
      const work = mkdtempSync(join(tmpdir(), 'pingd-full-disk-'));
      try {
        const script = [
          'mount -t tmpfs -o size=96m tmpfs "$MNT" || exit 90',
          TEMPLATE ? 'cp -r "$TEMPLATE" "$MNT/pgdata" || exit 91' : ':',
          `exec ${JSON.stringify(process.execPath)} --import tsx test/faults/full-disk-engine.ts "$MNT"`,
        ].join('\n');
        const child = spawn('unshare', ['-rm', 'sh', '-c', script], {
          cwd: ROOT,
          env: { ...process.env, MNT: work, TEMPLATE },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let out = '';
        let err = '';
        child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
        child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
        const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
        assert.equal(code, 0, err);
        const o = JSON.parse(out.trim().split('\n').pop()!) as Outcome;
        const seen = JSON.stringify(o);
        // REGRESSION: every statement after the failed WAL write hung, the engine's thread at 100% CPU.
        assert.deepEqual(
          o.whileFull.map((s) => s.replace(/^(refused DISK_FULL): the disk holding the embedded database in .* is full .*$/, '$1')),
          Array(6).fill('refused DISK_FULL'),
          seen,
        );
        assert.ok(o.idleCpuMs < 2000 * IDLE_CORES, `CPU while waiting on a full disk: ${o.idleCpuMs} ms in 2000 ms; ${seen}`);
        assert.equal(o.firstError?.code, 'DISK_FULL', `the first failed write says the disk is full: ${seen}`);
        assert.match(
          o.firstError.message,
          /could not write to file "pg_wal\/.*No space left on device/,
          `the WAL segment could not be created: ${seen}`,
        );
        assert.deepEqual(o.disk && { full: (o.disk as { full: boolean }).full, cause: (o.disk as { cause: string }).cause }, {
          full: true,
          cause: 'write_failed',
        });
        assert.notEqual(o.recoveredMs, null, `writes are taken again once the filler is deleted, without a restart: ${seen}`);
        assert.equal(o.found, o.committed, 'every row committed before the disk filled is there');
        assert.notEqual(o.closeMs, null, 'close() finishes');
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    },
  );

  test(
    'on a full DATA_DIR pings are refused at once saying the disk is full, /healthz and /readyz say so, reads answer, the CPU idles, pings are taken again once space is freed, and SIGTERM on a full disk exits 0 with every acknowledged ping kept',
    { timeout: 150_000 },
    async () => {
      const work = mkdtempSync(join(tmpdir(), 'pingd-full-disk-'));
      const port = await freePort();
      const ns = namespaceWithPingd(work, 160, port);
      const acked: string[] = [];
      const unexpected: string[] = [];
      let filling = true;
      let load: Promise<unknown> = Promise.resolve();
      try {
        await waitFor(
          async () => {
            if (ns.child.exitCode !== null) assert.fail(`the namespace ended: ${ns.stderr()}`);
            return (await timedGet(port, '/healthz')).status === 200;
          },
          { what: 'pingd answers', timeoutMs: 60_000, intervalMs: 100, retryErrors: true },
        );
        const pingd = ns.pingd();
        assert.notEqual(pingd, ns.child.pid, 'pingd runs under the shell');
        for (let i = 0; i < 20; i++) {
          const url = uniqueUrl('full-disk-before');
          assert.equal((await xmlrpcPing(port, url)).flerror, false);
          acked.push(url);
        }

        // Below DISK_MIN_FREE_MB (64 MiB) but not yet full: pings are refused, the database still reads.
        await fill(ns.path('filler'), 32 * 1024 * 1024);
        await waitFor(async () => (await readyReason(port)) === 'disk full', {
          what: '/readyz says the disk is full below DISK_MIN_FREE_MB',
          timeoutMs: 15_000,
          intervalMs: 100,
          retryErrors: true,
        });
        assert.equal((await xmlrpcPing(port, uniqueUrl('full-disk-low'))).message, DISK_FULL_MESSAGE);
        for (const path of ['/changes.xml', '/api/stats', '/status'])
          assert.equal((await timedGet(port, path)).status, 200, `${path} is read while writes are refused`);
        await unlink(ns.path('filler'));
        await waitFor(async () => (await readyReason(port)) === 'ready', {
          what: '/readyz is ready once above DISK_MIN_FREE_MB',
          timeoutMs: 15_000,
          intervalMs: 100,
          retryErrors: true,
        });

        // Pings keep coming while the disk fills up: an acknowledged one must be stored, a refused one says why.
        load = Promise.all(
          Array.from({ length: 4 }, async () => {
            while (filling) {
              const url = uniqueUrl('full-disk-during');
              const r = await xmlrpcPing(port, url).catch((err: Error) => ({
                flerror: undefined,
                message: `no answer: ${err.message}`,
                body: '',
              }));
              if (r.flerror === false) acked.push(url);
              else if (!/^The ping could not be stored(: the server's disk is full| \(database unavailable\));/.test(r.message ?? '')) {
                unexpected.push(r.message ?? r.body);
                break;
              }
            }
          }),
        );
        await fill(ns.path('filler'));
        await waitFor(async () => (await readyReason(port)) === 'disk full', {
          what: '/readyz says the disk is full',
          timeoutMs: 15_000,
          intervalMs: 100,
          retryErrors: true,
        });
        filling = false;
        await load;
        assert.deepEqual(unexpected, [], 'refusals while the disk filled up');

        // The refusal, per protocol: XML-RPC flerror 1 with the reason, the HTTP form 503 with it and Retry-After.
        const rpc = await xmlrpcPing(port, uniqueUrl('full-disk-refused'));
        assert.equal(rpc.status, 200);
        assert.equal(rpc.flerror, true);
        assert.equal(rpc.message, DISK_FULL_MESSAGE);
        assert.ok(rpc.ms < FAST_MS, `refused in ${Math.round(rpc.ms)} ms`);
        const form = await timedGet(port, `/pingSiteForm?name=Full&url=${encodeURIComponent(uniqueUrl('full-disk-form'))}`);
        assert.equal(form.status, 503);
        assert.equal(form.headers.get('retry-after'), '60');
        assert.ok(form.body.includes(DISK_FULL_MESSAGE.replace("'", '&#39;')), form.body);
        assert.ok(form.ms < FAST_MS, `refused in ${Math.round(form.ms)} ms`);

        const health = await timedGet(port, '/healthz');
        assert.equal(health.status, 200, 'alive: a restart would not free the disk');
        assert.deepEqual({ ...JSON.parse(health.body), uptimeSeconds: 0 }, { status: 'degraded', reason: 'disk full', uptimeSeconds: 0 });
        const ready = await timedGet(port, '/readyz');
        assert.equal(ready.status, 503);
        assert.deepEqual(JSON.parse(ready.body), { status: 'unavailable', reason: 'disk full' });
        // REGRESSION: these hung for 30 s and more.
        for (const path of ['/changes.xml', '/api/stats', '/status']) {
          const r = await timedGet(port, path);
          assert.ok(r.status === 200 || r.status === 503, `${path}: ${r.status}`);
          assert.ok(r.ms < FAST_MS, `${path} answered in ${Math.round(r.ms)} ms`);
        }
        // REGRESSION: PGlite's thread spun at 100% CPU. A generous bound over a few seconds of waiting.
        const cpu0 = cpuMs(pingd);
        const t0 = performance.now();
        await new Promise((r) => setTimeout(r, 3000));
        const used = cpuMs(pingd) - cpu0;
        assert.ok(
          used < (performance.now() - t0) * IDLE_CORES,
          `pingd used ${used} ms of CPU in ${Math.round(performance.now() - t0)} ms on a full disk`,
        );

        // Space is freed: the same process takes pings again.
        await unlink(ns.path('filler'));
        await waitFor(async () => (await readyReason(port)) === 'ready', {
          what: '/readyz is ready again after space was freed',
          timeoutMs: 30_000,
          intervalMs: 100,
          retryErrors: true,
        });
        assert.equal((await timedGet(port, '/healthz')).body.includes('"status":"ok"'), true);
        const again = uniqueUrl('full-disk-after');
        assert.equal((await xmlrpcPing(port, again)).message, 'Thanks for the ping.');
        acked.push(again);
        assert.equal(ns.pingd(), pingd, 'without a restart');

        // Full again, and the operator stops it: SIGTERM exits 0 within the shutdown bound.
        await fill(ns.path('filler'));
        await waitFor(async () => (await readyReason(port)) === 'disk full', {
          what: '/readyz says the disk is full again',
          timeoutMs: 15_000,
          intervalMs: 100,
          retryErrors: true,
        });
        const stopAt = performance.now();
        process.kill(pingd, 'SIGTERM');
        await waitFor(async () => /first pingd exited \d+/.test(ns.stderr()), {
          what: 'the first pingd exits',
          timeoutMs: SHUTDOWN_TIMEOUT_MS + 5000,
          intervalMs: 100,
          retryErrors: true,
        });
        assert.match(ns.stderr(), /first pingd exited 0\n/, ns.stderr());
        assert.ok(performance.now() - stopAt < SHUTDOWN_TIMEOUT_MS, `stopped in ${Math.round(performance.now() - stopAt)} ms`);

        // Space freed, the next start opens the same files: every acknowledged ping is there.
        await unlink(ns.path('filler'));
        ns.child.stdin!.write('go\n');
        await waitFor(
          async () => {
            if (ns.child.exitCode !== null) assert.fail(`the namespace ended: ${ns.stderr()}`);
            return (await timedGet(port, '/readyz')).status === 200;
          },
          { what: 'the second pingd answers', timeoutMs: 60_000, intervalMs: 100, retryErrors: true },
        );
        const missing: string[] = [];
        for (const url of acked)
          if ((await timedGet(port, `/api/weblogs?url=${encodeURIComponent(url)}`)).status !== 200) missing.push(url);
        assert.deepEqual(missing, [], `of ${acked.length} acknowledged pings`);
        process.kill(ns.child.pid!, 'SIGTERM');
        assert.equal(await ns.exited, 0, ns.stderr());
      } finally {
        filling = false;
        await load;
        if (ns.child.exitCode === null) {
          try {
            process.kill(ns.pingd(), 'SIGKILL');
          } catch {
            /* gone */
          }
          ns.child.kill('SIGKILL');
          await ns.exited;
        }
        rmSync(work, { recursive: true, force: true });
      }
    },
  );
}
