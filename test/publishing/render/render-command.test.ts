// `pingd render` (everything now) and `pingd render --hour` (one archive again), run as a process on the
// test database, and PUBLISH_DIR: the same bytes as served, written atomically as files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import zlib from 'node:zlib';
import { createTestDatabase, startApp, uniqueUrl, type TestDatabase } from '../../helpers/app.js';
import { HOUR_MS, archivePath, hourStart } from '../../../src/publishing/documents/archive.js';
import { insertPings, strictParse } from '../helpers.js';
import { CLI } from '../../helpers/cli.js';

function cli(
  args: string[],
  db: TestDatabase,
  env: Record<string, string> = {},
): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...CLI, ...args],
      {
        env: {
          ...process.env,
          LOG_LEVEL: 'silent',
          DATABASE_URL: db.config.DATABASE_URL ?? '',
          DATA_DIR: db.config.DATA_DIR ?? './data',
          ...env,
        },
        encoding: 'utf8',
      },
      (err, stdout, stderr) =>
        resolve({ status: err ? Number((err as NodeJS.ErrnoException & { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const H = hourStart(Date.now()) - 3 * HOUR_MS;
const hourArg = (ms: number) => new Date(ms).toISOString().slice(0, 13);

test('pingd render: renders everything now; --hour renders one archive again; bad hours are usage errors', async () => {
  const db = await createTestDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'pingd-publish-'));
  try {
    // Pings in a past hour, and one now; then the server stops (the embedded database has one owner).
    const setup = await startApp({ RENDER_SCHEDULER: false }, db);
    await insertPings(setup.app.db, [
      { name: 'Past 1', url: 'http://past1.example.com/', at: H + 60_000 },
      { name: 'Past 2', url: 'http://past2.example.com/', at: H + 120_000 },
    ]);
    const now = uniqueUrl('cli');
    assert.equal((await setup.app.pings.accept({ method: 'ping', name: 'Now', url: now })).ok, true);
    await setup.app.close();

    const all = await cli(['render'], db, { PUBLISH_DIR: dir });
    assert.equal(all.status, 0, all.stderr);
    assert.match(all.stdout, /^rendered \/changes\.xml: 1 entries, \d+ bytes \(gzip \d+, br \d+\) in \d+ ms$/m);
    assert.match(all.stdout, /^rendered \/shortChanges\.xml: 1 entries/m);
    // Everything the server publishes, /updates.xml (RSS Ping) included.
    assert.match(all.stdout, /^rendered \/updates\.xml: 0 entries/m);
    assert.match(all.stdout, new RegExp(`^rendered ${archivePath(H).replace(/\//g, '\\/')} \\(closed\\): 2 entries`, 'm'));
    assert.match(all.stdout, new RegExp(`^rendered ${archivePath(hourStart(Date.now())).replace(/\//g, '\\/')}: 1 entries`, 'm'));

    const again = await cli(['render', '--hour', hourArg(H)], db);
    assert.equal(again.status, 0, again.stderr);
    assert.equal(again.stdout.trim(), `${hourArg(H)}: unchanged (same bytes as the published archive)`);

    for (const bad of ['2026-13-01T00', 'yesterday', '2026-11-22 08', '2026-11-22T24']) {
      const r = await cli(['render', '--hour', bad], db);
      assert.equal(r.status, 2, bad);
      assert.match(r.stderr, /--hour must be a UTC hour like 2026-11-22T08/);
    }
    const future = await cli(['render', '--hour', hourArg(hourStart(Date.now()) + 3 * HOUR_MS)], db);
    assert.equal(future.status, 2);
    assert.match(future.stderr, /has not begun yet/);

    // The server serves what the command stored, and the files under PUBLISH_DIR are the same bytes.
    const t = await startApp({ RENDER_SCHEDULER: false }, db);
    try {
      for (const path of ['/changes.xml', '/shortChanges.xml', archivePath(H)]) {
        const identity = await t.app.inject({ url: path });
        assert.equal(identity.statusCode, 200, path);
        assert.deepEqual(readFileSync(join(dir, path)), identity.rawPayload, `${path} file`);
        const gz = await t.app.inject({ url: path, headers: { 'accept-encoding': 'gzip' } });
        assert.deepEqual(readFileSync(join(dir, `${path}.gz`)), gz.rawPayload, `${path}.gz file`);
        const br = await t.app.inject({ url: path, headers: { 'accept-encoding': 'br' } });
        assert.deepEqual(readFileSync(join(dir, `${path}.br`)), br.rawPayload, `${path}.br file`);
      }
      const archive = await t.app.inject({ url: archivePath(H) });
      assert.equal(archive.headers['cache-control'], 'public, max-age=31536000, immutable');
      assert.deepEqual(
        strictParse(archive.rawPayload).children.map((c) => c.attrs.name),
        ['Past 1', 'Past 2'],
      );
      assert.ok((await t.app.inject({ url: '/changes.xml' })).body.includes(now));
    } finally {
      await t.app.close();
    }
  } finally {
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('PUBLISH_DIR: every rendering replaces the files atomically (a new inode, no temporary file left)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pingd-publish-'));
  const t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_DIR: dir, PUBLISH_POINTER_TTL_MS: 0 });
  try {
    await t.app.pings.accept({ method: 'ping', name: 'One', url: uniqueUrl('dir') });
    await t.app.renderer.tick();
    const first = statSync(join(dir, 'changes.xml')).ino;
    const url = uniqueUrl('dir');
    await t.app.pings.accept({ method: 'ping', name: 'Two', url });
    await t.app.renderer.tick();
    assert.notEqual(statSync(join(dir, 'changes.xml')).ino, first, 'renamed into place, not rewritten');
    const file = readFileSync(join(dir, 'changes.xml'));
    assert.ok(file.toString().includes(url));
    assert.deepEqual(zlib.gunzipSync(readFileSync(join(dir, 'changes.xml.gz'))), file);
    assert.deepEqual(zlib.brotliDecompressSync(readFileSync(join(dir, 'changes.xml.br'))), file);
    const walk = (d: string): string[] => readdirSync(d).flatMap((f) => (statSync(join(d, f)).isDirectory() ? walk(join(d, f)) : [f]));
    assert.deepEqual(
      walk(dir).filter((f) => f.includes('.tmp-')),
      [],
    );
    assert.ok(existsSync(join(dir, archivePath(hourStart(Date.now())))));
  } finally {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
