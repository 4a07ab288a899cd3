// pingd as PID 1, as in a container, without a container engine: each `pingd serve` runs as PID 1 of a
// new PID namespace (`unshare -p -f --mount-proc`, as root) on one data directory. Regression for the
// embedded image that never started again after an unclean stop: the lock said "1", the next PID 1 read
// it as "already open in this process" and exited 1, forever.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BACKEND, createTestDatabase, testConfig, methodCall, readReply, uniqueUrl } from '../helpers/app.js';
import { freePort } from './private-postgres.js';
import { CLI } from '../helpers/cli.js';

const ROOT = new URL('../../', import.meta.url).pathname;

interface PidOne {
  child: ChildProcess;
  port: number;
  exited: Promise<number | null>;
  stderr(): string;
}

/** `pingd serve` as PID 1 of a PID namespace of its own; `--kill-child`: killing unshare kills it too. */
async function serveAsPidOne(dataDir: string): Promise<PidOne> {
  const port = await freePort();
  const child = spawn('unshare', ['-p', '-f', '--mount-proc', '--kill-child', process.execPath, ...CLI, 'serve'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: '',
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      RENDER_CRON: '0 0 1 1 *',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, port, exited, stderr: () => err };
}

/** Resolves once the server answers, or with its exit code if it exits first. */
async function upOrExit(s: PidOne): Promise<'up' | number | null> {
  for (;;) {
    if (s.child.exitCode !== null) return s.child.exitCode;
    if (
      await fetch(`http://127.0.0.1:${s.port}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return 'up';
    const code = await Promise.race([s.exited, new Promise<'wait'>((r) => setTimeout(() => r('wait'), 100))]);
    if (code !== 'wait') return code;
  }
}

/** The host pid of the namespace's PID 1: unshare's only child. */
function pingdOf(s: PidOne): number {
  const children = readFileSync(`/proc/${s.child.pid}/task/${s.child.pid}/children`, 'utf8').trim().split(/\s+/);
  assert.equal(children.length, 1, `unshare's children: ${children.join(' ')}`);
  return Number(children[0]);
}

async function ping(port: number, url: string): Promise<boolean> {
  const r = await fetch(`http://127.0.0.1:${port}/RPC2`, {
    method: 'POST',
    headers: { 'content-type': 'text/xml' },
    body: methodCall('weblogUpdates.ping', ['PID 1', url]),
  });
  return readReply(r.status, await r.text()).flerror === false;
}

if (BACKEND === 'pglite')
  test(
    'as PID 1: a second live server on the directory is refused; after SIGKILL the next PID 1 starts with every row',
    { timeout: 180_000 },
    async () => {
      const tdb = await createTestDatabase({ migrated: true });
      const cfg = testConfig(tdb);
      const first = await serveAsPidOne(cfg.DATA_DIR);
      const servers = [first];
      try {
        assert.equal(await upOrExit(first), 'up', first.stderr());
        assert.equal(readFileSync(join(cfg.DATA_DIR, 'pingd.lock'), 'utf8').split(' ')[0], '1', 'the holder is PID 1 of its namespace');
        const before = uniqueUrl('pid-one');
        assert.equal(await ping(first.port, before), true);

        // Another PID 1 on the same directory while the first lives: refused, naming the holder.
        const second = await serveAsPidOne(cfg.DATA_DIR);
        servers.push(second);
        // Busy (75, try again later), as the command line's exit codes say; it was 1.
        assert.equal(await upOrExit(second), 75, second.stderr());
        assert.match(second.stderr(), /the embedded database in .* is in use by another pingd process \(pid 1 on .+, alive \d+ ms ago\)/);

        // An unclean stop (docker kill, the OOM killer): the lock file stays, saying "1".
        first.child.kill('SIGKILL');
        await first.exited;
        assert.equal(readFileSync(join(cfg.DATA_DIR, 'pingd.lock'), 'utf8').split(' ')[0], '1');
        const third = await serveAsPidOne(cfg.DATA_DIR);
        servers.push(third);
        assert.equal(await upOrExit(third), 'up', third.stderr());
        assert.equal(await ping(third.port, uniqueUrl('pid-one-after')), true);
        const r = await fetch(`http://127.0.0.1:${third.port}/api/weblogs?url=${encodeURIComponent(before)}`);
        assert.equal(r.status, 200, 'the ping acknowledged before the kill is there');
        // A graceful stop goes to pingd itself (PID 1 inside; unshare does not pass SIGTERM on).
        process.kill(pingdOf(third), 'SIGTERM');
        assert.equal(await third.exited, 0, third.stderr());
      } finally {
        for (const s of servers) if (s.child.exitCode === null) s.child.kill('SIGKILL');
        await tdb.drop();
      }
    },
  );
