// The PostgreSQL backup of docs/guides/operations.md, run as written: pg_dump -Fc while pingd runs, then
// pg_restore into an empty database, and pingd started on the copy with every row. Regression for the guide's restore
// with `pg_restore --clean --if-exists` over the old database, which exits 1 on the day partitions'
// constraints. On the embedded database the backup is a copy of DATA_DIR (nothing to run here).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import pg from 'pg';
import { BACKEND, startApp, methodCall, readReply, uniqueUrl, createTestDatabase } from '../helpers/app.js';

const run = promisify(execFile);

if (BACKEND === 'postgres')
  test(
    'pg_dump, then pg_restore into an empty database: pingd starts on the copy with every ping (restoring with --clean over the old one failed)',
    { timeout: 120_000 },
    async () => {
      const source = await createTestDatabase({ migrated: true });
      const dir = mkdtempSync(join(tmpdir(), 'pingd-backup-'));
      const url = new URL(source.config.DATABASE_URL!);
      const copyName = `pingd_restore_${process.pid}`;
      const admin = new pg.Client({ connectionString: source.config.DATABASE_URL });
      await admin.connect();
      try {
        const t = await startApp({}, source);
        const weblog = uniqueUrl('backup');
        try {
          const r = await t.app.inject({
            method: 'POST',
            url: '/RPC2',
            headers: { 'content-type': 'text/xml' },
            payload: methodCall('weblogUpdates.ping', ['Backup', weblog]),
          });
          assert.equal(readReply(r.statusCode, r.body).flerror, false);
          // While pingd runs, as the guide says.
          await run('pg_dump', ['-Fc', '-f', join(dir, 'pingd.dump'), source.config.DATABASE_URL!]);
        } finally {
          await t.app.close();
        }
        await admin.query(`drop database if exists ${copyName}`);
        await admin.query(`create database ${copyName}`);
        const copyUrl = new URL(url.href);
        copyUrl.pathname = `/${copyName}`;
        await run('pg_restore', ['-d', copyUrl.href, join(dir, 'pingd.dump')]);
        const copy = await startApp({ DATABASE_URL: copyUrl.href });
        try {
          const [row] = await copy.app.db.query<{ n: number }>('select count(*)::int as n from pings where url = $1', [weblog]);
          assert.equal(row.n, 1, 'the ping is in the restored copy');
          const after = await copy.app.inject({
            method: 'POST',
            url: '/RPC2',
            headers: { 'content-type': 'text/xml' },
            payload: methodCall('weblogUpdates.ping', ['After restore', uniqueUrl('restored')]),
          });
          assert.equal(readReply(after.statusCode, after.body).flerror, false, 'the copy takes pings');
        } finally {
          await copy.close();
        }
      } finally {
        await admin.query(`drop database if exists ${copyName} with (force)`).catch(() => undefined);
        await admin.end();
        await source.drop();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
