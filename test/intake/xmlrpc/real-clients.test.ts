// Real clients against a listening server: Python's xmlrpc.client, the npm xmlrpc client, curl, and byte
// replays of what other blog engines send (test/fixtures/xmlrpc, see its README for provenance).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:net';
import xmlrpc from 'xmlrpc';
import { startApp, uniqueUrl, readReply, type TestApp } from '../../helpers/app.js';
import { findPingsByUrl } from '../../helpers/rows.js';

const run = promisify(execFile);
const FIXTURES = join(import.meta.dirname, '..', '..', 'fixtures', 'xmlrpc');

let t: TestApp;
let port: number;
before(async () => {
  t = await startApp();
  const base = await t.listen();
  port = Number(new URL(base).port);
});
after(async () => {
  await t.close();
});

test('Python xmlrpc.client: ping, extendedPing, refusal, fault, listMethods', async () => {
  const url1 = uniqueUrl('py');
  const url2 = uniqueUrl('py');
  const script = `
import json, sys, xmlrpc.client
s = xmlrpc.client.ServerProxy(sys.argv[1])
out = {}
out['ping'] = s.weblogUpdates.ping('Python Blog ♥', sys.argv[2])
out['ext'] = s.weblogUpdates.extendedPing('Ext & Co', sys.argv[3], sys.argv[3] + 'changes', sys.argv[3] + 'feed.xml', 'a|b')
out['again'] = s.weblogUpdates.ping('Python Blog', sys.argv[2])
out['bad'] = s.weblogUpdates.ping('x', 'notaurl')
try:
    s.weblogUpdates.nope()
except xmlrpc.client.Fault as f:
    out['fault'] = [f.faultCode, f.faultString]
out['methods'] = s.system.listMethods()
print(json.dumps(out))
`;
  const { stdout } = await run('python3', ['-c', script, `${t.url}/RPC2`, url1, url2]);
  const out = JSON.parse(stdout);
  assert.deepEqual(out.ping, { flerror: false, message: 'Thanks for the ping.' });
  assert.deepEqual(out.ext, { flerror: false, message: 'Thanks for the ping.' });
  assert.equal(out.again.flerror, true);
  assert.match(out.again.message, /was pinged less than 300 seconds ago/);
  assert.deepEqual(out.bad, { flerror: true, message: 'The weblog URL is not an absolute URL: it must start with http:// or https://.' });
  assert.deepEqual(out.fault, [-32601, 'Method not found: weblogUpdates.nope.']);
  assert.ok(out.methods.includes('weblogUpdates.extendedPing'));
  const [r1] = await findPingsByUrl(t.app.db, url1);
  assert.equal(r1.name, 'Python Blog ♥');
  assert.equal(r1.user_agent?.startsWith('Python-xmlrpc/'), true);
  const [r2] = await findPingsByUrl(t.app.db, url2);
  assert.deepEqual([r2.name, r2.changes_url, r2.rss_url, r2.tags], ['Ext & Co', `${url2}changes`, `${url2}feed.xml`, ['a', 'b']]);
});

test('npm xmlrpc client: ping and extendedPing', async () => {
  const client = xmlrpc.createClient({ host: '127.0.0.1', port, path: '/RPC2' });
  const call = (m: string, p: unknown[]) =>
    new Promise<unknown>((res, rej) => client.methodCall(m, p, (err, v) => (err ? rej(err) : res(v))));
  const url = uniqueUrl('npm');
  assert.deepEqual(await call('weblogUpdates.ping', ['Nöde <blog>', url]), { flerror: false, message: 'Thanks for the ping.' });
  const url2 = uniqueUrl('npm');
  assert.deepEqual(await call('weblogUpdates.extendedPing', ['N2', url2, `${url2}rss`]), {
    flerror: false,
    message: 'Thanks for the ping.',
  });
  await assert.rejects(call('weblogUpdates.ping', ['only one']), (e: Error & { code?: number }) => {
    assert.equal(e.code, -32602);
    return true;
  });
  assert.equal((await findPingsByUrl(t.app.db, url))[0].name, 'Nöde <blog>');
  assert.equal((await findPingsByUrl(t.app.db, url2))[0].rss_url, `${url2}rss`);
});

test('curl: a ping with no Content-Type at all (Ghost, davexmlrpc) and HTTP/1.0', async () => {
  const url = uniqueUrl('curl');
  const body = `<?xml version="1.0"?><methodCall><methodName>weblogUpdates.ping</methodName><params><param><value>Curl</value></param><param><value>${url}</value></param></params></methodCall>`;
  const { stdout } = await run('curl', [
    '-s',
    '--http1.0',
    '-H',
    'Content-Type:',
    '-H',
    'Connection: close',
    '--data-binary',
    body,
    `${t.url}/`,
  ]);
  assert.match(stdout, /<member><name>flerror<\/name><value><boolean>0<\/boolean><\/value><\/member>/);
  assert.equal((await findPingsByUrl(t.app.db, url)).length, 1);
});

/** Sends raw request bytes on a fresh TCP connection and reads one HTTP response. */
function replay(bytes: Buffer): Promise<{ status: number; headers: string; body: string }> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error('no response within 10 s'));
    }, 10_000);
    const tryParse = () => {
      const all = Buffer.concat(chunks);
      const sep = all.indexOf('\r\n\r\n');
      if (sep < 0) return false;
      const head = all.subarray(0, sep).toString('latin1');
      const len = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? -1);
      const body = all.subarray(sep + 4);
      if (len < 0 || body.length < len) return false;
      clearTimeout(timer);
      sock.destroy();
      resolve({ status: Number(head.split(' ')[1]), headers: head, body: body.subarray(0, len).toString('utf8') });
      return true;
    };
    sock.on('data', (d) => {
      chunks.push(d);
      tryParse();
    });
    sock.on('end', () => {
      if (!tryParse()) reject(new Error(`connection closed early: ${Buffer.concat(chunks).toString('latin1').slice(0, 200)}`));
    });
    sock.on('error', reject);
    sock.write(bytes);
  });
}

interface FixtureEntry {
  file: string;
  client: string;
  expect: {
    flerror?: boolean;
    fault?: number;
    messageContains?: string;
    name?: string;
    url?: string;
    changesUrl?: string | null;
    rssUrl?: string | null;
    tags?: string[];
  };
}
const index: FixtureEntry[] = JSON.parse(readFileSync(join(FIXTURES, 'index.json'), 'utf8'));

for (const f of index) {
  test(`replay ${f.file} (${f.client})`, async () => {
    const res = await replay(readFileSync(join(FIXTURES, f.file)));
    assert.equal(res.status, 200, res.body);
    const r = readReply(res.status, res.body);
    if (f.expect.fault !== undefined) {
      assert.equal(r.faultCode, f.expect.fault, res.body);
      return;
    }
    assert.equal(r.flerror, f.expect.flerror, res.body);
    if (f.expect.flerror) {
      assert.ok(r.message?.includes(f.expect.messageContains ?? ''), r.message);
      return;
    }
    assert.equal(r.message, 'Thanks for the ping.');
    const rows = await findPingsByUrl(t.app.db, f.expect.url!);
    assert.equal(rows.length, 1, `one row for ${f.expect.url}`);
    const row = rows[0];
    assert.equal(row.name, f.expect.name);
    assert.equal(row.changes_url, f.expect.changesUrl ?? null);
    assert.equal(row.rss_url, f.expect.rssUrl ?? null);
    assert.deepEqual(row.tags ?? [], f.expect.tags ?? []);
  });
}

test('the fixture corpus covers the clients the intake issue names', () => {
  const clients = index.map((f) => f.client).join(' | ');
  for (const c of ['WordPress', 'Ghost', 'Movable Type', 'Serendipity', 'Perl', 'Ruby', 'PEAR', 'Drupal', 'Python'])
    assert.match(clients, new RegExp(c));
});
