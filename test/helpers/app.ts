// Test harness: a fresh database per test file on the backend the run selected (TEST_BACKEND), and the
// app built in-process on it. No mocks: PGlite on disk, or a throw-away database on the real server.
import { mkdtempSync, cpSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { FastifyInstance } from 'fastify';
import { buildApp, type BuildOptions } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/platform/config.js';

export const BACKEND = (process.env.TEST_BACKEND ?? 'pglite') as 'pglite' | 'postgres';

export interface TestDatabase {
  /** Config fields that point an app at this database. */
  config: Partial<Config>;
  drop(): Promise<void>;
}

/**
 * A new database on the selected backend: empty (no migrations applied), or on the embedded database with
 * `migrated` a copy of one with every migration applied (test/run.mjs builds them: a data directory for the
 * embedded database, a template database on the server; the app's own migration step then finds nothing
 * to do).
 */
export async function createTestDatabase(opts: { migrated?: boolean } = {}): Promise<TestDatabase> {
  if (BACKEND === 'postgres') {
    const url = process.env.TEST_DATABASE_URL;
    if (!url) throw new Error('TEST_BACKEND=postgres needs TEST_DATABASE_URL');
    const name = `pingd_test_${process.pid}_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    const template = opts.migrated ? process.env.PINGD_PG_TEMPLATE_DB : undefined;
    await admin.query(template ? `create database ${name} template ${template}` : `create database ${name}`);
    await admin.end();
    const u = new URL(url);
    u.pathname = `/${name}`;
    return {
      config: { DATABASE_URL: u.href },
      async drop() {
        const c = new pg.Client({ connectionString: url });
        await c.connect();
        await c.query(`drop database if exists ${name} with (force)`);
        await c.end();
      },
    };
  }
  const dir = mkdtempSync(join(tmpdir(), 'pingd-test-'));
  const template = (opts.migrated && process.env.PINGD_PGLITE_MIGRATED_TEMPLATE) || process.env.PINGD_PGLITE_TEMPLATE;
  if (template) cpSync(template, join(dir, 'pgdata'), { recursive: true });
  return {
    config: { DATABASE_URL: undefined, DATA_DIR: dir },
    async drop() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function testConfig(db: TestDatabase, overrides: Partial<Config> = {}): Config {
  // Verification fetches what was pinged: off unless a test serves the feeds itself (loopback only).
  return loadConfig({ LOG_LEVEL: 'silent', VERIFY_PINGS: 'off' }, { ...db.config, ...overrides });
}

export interface TestApp {
  app: FastifyInstance;
  db: TestDatabase;
  config: Config;
  /** Base URL once listen() was called. */
  url: string;
  listen(): Promise<string>;
  close(): Promise<void>;
}

/** Builds the app on a fresh database; close() closes the app and drops the database. */
export async function startApp(
  overrides: Partial<Config> = {},
  db?: TestDatabase,
  build: Pick<BuildOptions, 'lookup'> = {},
): Promise<TestApp> {
  const tdb = db ?? (await createTestDatabase({ migrated: true }));
  const config = testConfig(tdb, overrides);
  const app = await buildApp({ config, logger: false, ...build });
  const t: TestApp = {
    app,
    db: tdb,
    config,
    url: '',
    async listen() {
      await app.listen({ port: 0, host: '127.0.0.1' });
      const addr = app.server.address();
      if (!addr || typeof addr === 'string') throw new Error('no address');
      t.url = `http://127.0.0.1:${addr.port}`;
      return t.url;
    },
    async close() {
      await app.close();
      if (!db) await tdb.drop();
    },
  };
  return t;
}

let seq = 0;
/** A weblog URL no other test in this process uses, so throttling never couples tests. */
export function uniqueUrl(prefix = 'blog'): string {
  return `http://${prefix}-${process.pid}-${++seq}-${randomBytes(3).toString('hex')}.example.com/`;
}

/** An XML-RPC methodCall with string params, as most clients write it. */
export function methodCall(method: string, params: (string | null)[], typed = true): string {
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const ps = params.map((p) => `<param><value>${p === null ? '' : typed ? `<string>${esc(p)}</string>` : esc(p)}</value></param>`).join('');
  return `<?xml version="1.0"?>\n<methodCall><methodName>${method}</methodName><params>${ps}</params></methodCall>`;
}

export interface RpcReply {
  status: number;
  body: string;
  flerror?: boolean;
  message?: string;
  faultCode?: number;
  faultString?: string;
}

/** Reads a ping reply or fault out of a methodResponse body (strictly: regexes on the exact bytes we write). */
export function readReply(status: number, body: string): RpcReply {
  const out: RpcReply = { status, body };
  const fl = /<member><name>flerror<\/name><value><boolean>([01])<\/boolean><\/value><\/member>/.exec(body);
  if (fl) out.flerror = fl[1] === '1';
  const msg = /<member><name>message<\/name><value><string>([^<]*)<\/string><\/value><\/member>/.exec(body);
  if (msg) out.message = unescapeXml(msg[1]);
  const fc = /<name>faultCode<\/name><value><int>(-?\d+)<\/int><\/value>/.exec(body);
  if (fc) out.faultCode = Number(fc[1]);
  const fs = /<name>faultString<\/name><value><string>([^<]*)<\/string>/.exec(body);
  if (fs) out.faultString = unescapeXml(fs[1]);
  return out;
}

export function unescapeXml(s: string): string {
  return s.replace(/&(lt|gt|quot|apos|amp);/g, (_m, e: string) => ({ lt: '<', gt: '>', quot: '"', apos: "'", amp: '&' })[e] as string);
}

/** POSTs an XML-RPC body through app.inject and reads the reply. */
export async function rpc(
  app: FastifyInstance,
  body: string | Buffer,
  headers: Record<string, string> = { 'content-type': 'text/xml' },
  url = '/RPC2',
): Promise<RpcReply> {
  const res = await app.inject({ method: 'POST', url, headers, payload: body });
  return readReply(res.statusCode, res.body);
}
