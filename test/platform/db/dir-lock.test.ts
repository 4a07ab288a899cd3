// The embedded database's directory lock: held as long as its holder's heartbeat goes on. Regressions
// for the container that never started again: pingd is PID 1 at every start, and a lock saying "1" from
// the killed run read as "already open in this process" (exit 1, forever under a restart policy).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync, existsSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { acquireDirLock } from '../../../src/platform/db/dir-lock.js';
import { DatabaseError } from '../../../src/platform/db/db-interface.js';

const FAST = { heartbeatMs: 100, staleMs: 600 };
const lost = () => assert.fail('the lock was lost');
const tmp = () => mkdtempSync(join(tmpdir(), 'pingd-lock-'));
/** A lock file as a holder wrote it, last touched `ageMs` ago. */
function leftLock(path: string, pid: number, ageMs: number, token = 'earlier-life'): void {
  writeFileSync(path, `${pid} ${token} ${hostname()}\n`);
  const t = new Date(Date.now() - ageMs);
  utimesSync(path, t, t);
}

test('a lock left by this very pid in an earlier life (a restarted container) is taken over', async () => {
  const dir = tmp();
  const path = join(dir, 'pingd.lock');
  try {
    leftLock(path, process.pid, 60_000);
    const lock = await acquireDirLock(path, lost, FAST);
    assert.equal(readFileSync(path, 'utf8').split(' ')[0], String(process.pid));
    assert.notEqual(readFileSync(path, 'utf8').split(' ')[1], 'earlier-life');
    lock.release();
    assert.equal(existsSync(path), false, 'released');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a restart right after a kill waits for the old heartbeat to go stale, then starts', async () => {
  const dir = tmp();
  const path = join(dir, 'pingd.lock');
  try {
    leftLock(path, process.pid, 0);
    const started = Date.now();
    const lock = await acquireDirLock(path, lost, FAST);
    assert.ok(Date.now() - started >= FAST.staleMs - 50, `waited ${Date.now() - started} ms for the lock to go stale`);
    lock.release();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a lock of a dead pid on this host is taken over at once; an old pid-only lock file too', async () => {
  const dir = tmp();
  const path = join(dir, 'pingd.lock');
  try {
    leftLock(path, 999_999, 0);
    const started = Date.now();
    (await acquireDirLock(path, lost, { heartbeatMs: 100, staleMs: 60_000 })).release();
    assert.ok(Date.now() - started < 30_000);
    writeFileSync(path, '999999');
    const t = new Date(Date.now() - 120_000);
    utimesSync(path, t, t);
    (await acquireDirLock(path, lost, FAST)).release();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a second opener in this process is refused: already open in this process', async () => {
  const dir = tmp();
  const path = join(dir, 'pingd.lock');
  const lock = await acquireDirLock(path, lost, FAST);
  try {
    await assert.rejects(
      acquireDirLock(path, lost, FAST),
      (e: unknown) =>
        e instanceof DatabaseError &&
        e.code === 'DB_LOCKED' &&
        e.message === `the embedded database in ${dir} is already open in this process`,
    );
  } finally {
    lock.release();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a lock whose holder is alive is refused, whatever pid its file names (two PID 1s sharing a volume)', async () => {
  const dir = tmp();
  const path = join(dir, 'pingd.lock');
  // The holder: another process heartbeating the lock, which then claims our pid (as a PID 1 in another namespace would).
  const holder = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      `
    import { acquireDirLock } from ${JSON.stringify(new URL('../../../src/platform/db/dir-lock.ts', import.meta.url).href)};
    import { readFileSync, writeFileSync } from 'node:fs';
    await acquireDirLock(${JSON.stringify(path)}, () => process.exit(3), { heartbeatMs: 100, staleMs: 600 });
    const [, token, host] = readFileSync(${JSON.stringify(path)}, 'utf8').trim().split(' ');
    writeFileSync(${JSON.stringify(path)}, '${process.pid} ' + token + ' ' + host + '\\n');
    process.stdout.write('held\\n');
    setInterval(() => {}, 1000);
  `,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  try {
    await new Promise<void>((resolve, reject) => {
      holder.stdout?.on('data', (d) => String(d).includes('held') && resolve());
      holder.once('exit', (c) => reject(new Error(`the holder exited (${c})`)));
    });
    await assert.rejects(
      acquireDirLock(path, lost, FAST),
      (e: unknown) =>
        e instanceof DatabaseError &&
        e.code === 'DB_LOCKED' &&
        new RegExp(
          `^the embedded database in ${dir} is in use by another pingd process \\(pid ${process.pid} on ${hostname()}, alive \\d+ ms ago\\); stop it or set DATA_DIR to another directory$`,
        ).test(e.message),
    );
  } finally {
    holder.kill('SIGKILL');
    await new Promise((r) => holder.once('exit', r));
  }
  // Killed: its heartbeat stops, and the lock is taken over once stale.
  (await acquireDirLock(path, lost, FAST)).release();
  rmSync(dir, { recursive: true, force: true });
});

test('a holder whose lock was taken over while it stalled is told at once', async () => {
  const dir = tmp();
  const path = join(dir, 'pingd.lock');
  let told!: () => void;
  const lostIt = new Promise<void>((r) => (told = r));
  const lock = await acquireDirLock(path, () => told(), FAST);
  writeFileSync(path, `1 another-token ${hostname()}\n`);
  // The heartbeat's timer does not keep a process alive: this one does until the holder is told.
  const keep = setInterval(() => undefined, 1000);
  await lostIt;
  clearInterval(keep);
  lock.release();
  assert.equal(readFileSync(path, 'utf8'), `1 another-token ${hostname()}\n`, "the new holder's lock is left alone");
  rmSync(dir, { recursive: true, force: true });
});
