// Serving published documents, header by header (RFC 9110/9111, RFC 3229 + feed): validators, caching,
// lengths, HEAD, 304 for every form of If-None-Match and If-Modified-Since, codings by q-value, 226 IM Used
// deltas and every case where a delta must NOT be sent, and the cacheable `?since=` cursor.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { startApp, type TestApp } from '../../helpers/app.js';
import { decodeBody, insertPings, strictParse } from '../helpers.js';
import { HOUR_MS, archivePath, hourStart } from '../../../src/publishing/documents/archive.js';

const T = hourStart(Date.now()) - 3 * HOUR_MS + 10 * 60_000;
const ETAG = /^"([0-9a-z]+\.[0-9a-z]+)(-gz|-br)?"$/;

interface Res {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  raw: Buffer;
}

describe('serving changes.xml', () => {
  let t: TestApp;
  const tags: Record<string, string> = {}; // rendering name → token
  const full: Record<string, Buffer> = {}; // rendering name → identity bytes

  async function req(url: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET'): Promise<Res> {
    const res = await t.app.inject({ method, url, headers });
    return { status: res.statusCode, headers: res.headers, raw: res.rawPayload };
  }
  const tokenOf = (r: Res) => (ETAG.exec(String(r.headers.etag)) ?? [])[1];
  async function snapshot(name: string, path = '/changes.xml') {
    const r = await req(path);
    assert.equal(r.status, 200);
    tags[name] = tokenOf(r);
    full[name] = r.raw;
  }
  /** The document's head, its first `k` entries and its foot: what a delta must be, byte for byte. */
  function prefixOf(doc: Buffer, k: number): Buffer {
    const lines = doc.toString('utf8').split('\n');
    return Buffer.from([...lines.slice(0, 2 + k), '</weblogUpdates>', ''].join('\n'));
  }

  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0, PUBLISH_DELTA_WINDOW: 600 });
    await insertPings(t.app.db, [
      { name: 'A1', url: 'http://a1.example.com/', at: T - 30_000 },
      { name: 'A2', url: 'http://a2.example.com/', at: T - 20_000 },
    ]);
    await t.app.renderer.tick({ now: new Date(T) });
    await snapshot('R1');
    await snapshot('S1', '/shortChanges.xml');
    await insertPings(t.app.db, [{ name: 'B1', url: 'http://b1.example.com/', at: T + 5_000 }]);
    await t.app.renderer.tick({ now: new Date(T + 10_000) });
    await snapshot('R2');
    await insertPings(t.app.db, [
      { name: 'C1', url: 'http://c1.example.com/', rssUrl: 'http://c1.example.com/rss', at: T + 15_000 },
      { name: 'C2 & <co>', url: 'http://c2.example.com/', at: T + 16_000 },
    ]);
    await t.app.renderer.tick({ now: new Date(T + 20_000) });
    await snapshot('R3');
    await snapshot('S3', '/shortChanges.xml');
  });
  after(() => t.close());

  test('200: one token per rendering, one strong ETag per coding, caching and length headers', async () => {
    assert.notEqual(tags.R1, tags.R2);
    assert.notEqual(tags.R2, tags.R3);
    for (const [ae, suffix, ce] of [
      ['identity', '', undefined],
      ['gzip', '-gz', 'gzip'],
      ['gzip;q=0.5, br', '-br', 'br'],
    ] as const) {
      const r = await req('/changes.xml', { 'accept-encoding': ae });
      assert.equal(r.status, 200);
      assert.equal(r.headers.etag, `"${tags.R3}${suffix}"`);
      assert.equal(r.headers['last-modified'], new Date(T + 20_000).toUTCString());
      assert.equal(r.headers['cache-control'], 'public, max-age=10');
      assert.equal(r.headers.vary, 'Accept-Encoding, A-IM');
      assert.equal(r.headers['content-type'], 'text/xml; charset=utf-8');
      assert.equal(r.headers['content-encoding'], ce);
      assert.equal(r.headers['content-length'], String(r.raw.length));
      assert.equal(r.headers.im, undefined);
      assert.deepEqual(decodeBody(r.raw, ce), full.R3);
    }
    assert.deepEqual(
      strictParse(full.R3).children.map((c) => c.attrs.name),
      ['C2 & <co>', 'C1', 'B1', 'A2', 'A1'],
    );
  });

  test('HEAD: the headers of the GET, no body', async () => {
    for (const ae of ['identity', 'gzip', 'br']) {
      const g = await req('/changes.xml', { 'accept-encoding': ae });
      const h = await req('/changes.xml', { 'accept-encoding': ae }, 'HEAD');
      assert.equal(h.status, 200);
      assert.equal(h.raw.length, 0);
      for (const k of ['etag', 'last-modified', 'cache-control', 'vary', 'content-type', 'content-length', 'content-encoding'])
        assert.equal(h.headers[k], g.headers[k], `${ae} ${k}`);
    }
  });

  test("If-None-Match → 304 carrying the 200's validators and caching headers: exact, weak, lists, *, other coding, proxy suffixes", async () => {
    const forms = [
      `"${tags.R3}"`,
      `W/"${tags.R3}"`,
      `"${tags.R3}-gz"`,
      `W/"${tags.R3}-br"`,
      `"${tags.R3}-gzip"`, // Apache mod_deflate
      `"${tags.R3};gzip"`,
      `"nope", "${tags.R1}", W/"${tags.R3}-gz"`,
      '*',
    ];
    for (const inm of forms) {
      for (const [ae, suffix] of [
        ['identity', ''],
        ['gzip', '-gz'],
        ['br', '-br'],
      ] as const) {
        const r = await req('/changes.xml', { 'if-none-match': inm, 'accept-encoding': ae });
        assert.equal(r.status, 304, `${inm} (${ae})`);
        assert.equal(r.raw.length, 0);
        assert.equal(r.headers.etag, `"${tags.R3}${suffix}"`);
        assert.equal(r.headers['last-modified'], new Date(T + 20_000).toUTCString());
        assert.equal(r.headers['cache-control'], 'public, max-age=10');
        assert.equal(r.headers.vary, 'Accept-Encoding, A-IM');
        assert.equal(r.headers['content-encoding'], undefined);
        assert.equal(r.headers['content-length'], undefined);
      }
    }
    // Any other tag, or a tag with our rendering id and a forged cursor: the document.
    for (const inm of [`"${tags.R2}"`, '"abc"', `"${tags.R3.split('.')[0]}.1"`, `"${tags.R3}" junk`]) {
      assert.equal((await req('/changes.xml', { 'if-none-match': inm })).status, 200, inm);
    }
  });

  test('If-Modified-Since → 304 unless modified after it; ignored when If-None-Match is present', async () => {
    const lm = T + 20_000;
    const at = (ms: number) => new Date(ms).toUTCString();
    assert.equal((await req('/changes.xml', { 'if-modified-since': at(lm) })).status, 304);
    assert.equal((await req('/changes.xml', { 'if-modified-since': at(lm + 3600_000) })).status, 304);
    assert.equal((await req('/changes.xml', { 'if-modified-since': at(lm - 1000) })).status, 200);
    assert.equal((await req('/changes.xml', { 'if-modified-since': 'yesterday' })).status, 200);
    assert.equal((await req('/changes.xml', { 'if-modified-since': at(lm), 'if-none-match': `"${tags.R2}"` })).status, 200);
    const r = await req('/changes.xml', { 'if-modified-since': at(lm), 'accept-encoding': 'br' });
    assert.equal(r.headers.etag, `"${tags.R3}-br"`);
    assert.equal(r.headers['cache-control'], 'public, max-age=10');
  });

  test('226 IM Used: only the weblogs pinged after the named rendering, a complete document, in every coding', async () => {
    const expected = prefixOf(full.R3, 3);
    for (const [ae, suffix, ce] of [
      ['identity', '', undefined],
      ['gzip', '-gz', 'gzip'],
      ['br', '-br', 'br'],
    ] as const) {
      for (const stored of ['', '-gz', '-br']) {
        const r = await req('/changes.xml', { 'a-im': 'feed', 'if-none-match': `"${tags.R1}${stored}"`, 'accept-encoding': ae });
        assert.equal(r.status, 226, `${ae} from ${stored}`);
        assert.equal(r.headers.im, 'feed');
        assert.equal(r.headers['cache-control'], 'no-store, im');
        assert.equal(r.headers.etag, `"${tags.R3}${suffix}"`, 'the ETag of the current document');
        assert.equal(r.headers['last-modified'], new Date(T + 20_000).toUTCString());
        assert.equal(r.headers.vary, 'Accept-Encoding, A-IM');
        assert.equal(r.headers['content-type'], 'text/xml; charset=utf-8');
        assert.equal(r.headers['content-encoding'], ce);
        assert.equal(r.headers['content-length'], String(r.raw.length));
        assert.deepEqual(decodeBody(r.raw, ce), expected);
      }
    }
    // What every one of them decoded to: a complete document of the three new weblogs.
    const doc = strictParse(expected);
    assert.deepEqual(
      doc.children.map((c) => c.attrs.name),
      ['C2 & <co>', 'C1', 'B1'],
    );
    assert.deepEqual(doc.root.attrs, strictParse(full.R3).root.attrs);
    // From R2: C1 and C2 only. HEAD gives the same headers.
    const g = await req('/changes.xml', { 'a-im': 'feed', 'if-none-match': `"${tags.R2}"`, 'accept-encoding': 'gzip' });
    assert.equal(g.status, 226);
    assert.deepEqual(decodeBody(g.raw, 'gzip'), prefixOf(full.R3, 2));
    const h = await req('/changes.xml', { 'a-im': 'feed', 'if-none-match': `"${tags.R2}"`, 'accept-encoding': 'gzip' }, 'HEAD');
    assert.equal(h.status, 226);
    assert.equal(h.raw.length, 0);
    for (const k of ['etag', 'im', 'cache-control', 'content-length', 'content-encoding', 'vary'])
      assert.equal(h.headers[k], g.headers[k], k);
    // Several tags: the newest rendering we know gives the smallest delta.
    const both = await req('/changes.xml', { 'a-im': 'feed, gzip', 'if-none-match': `"${tags.R1}", W/"${tags.R2}-br", "foreign"` });
    assert.equal(both.status, 226);
    assert.deepEqual(both.raw, prefixOf(full.R3, 2));
  });

  test('no delta may be sent: no validator, unknown or forged validators, A-IM without feed → the full 200; the current one → 304', async () => {
    const cases: [string, Record<string, string>][] = [
      ['A-IM without a validator', { 'a-im': 'feed' }],
      ['A-IM without a validator, If-Modified-Since earlier', { 'a-im': 'feed', 'if-modified-since': new Date(T).toUTCString() }],
      ['A-IM: diffe', { 'a-im': 'diffe', 'if-none-match': `"${tags.R1}"` }],
      ['A-IM: feed;q=0', { 'a-im': 'feed;q=0', 'if-none-match': `"${tags.R1}"` }],
      ['no A-IM', { 'if-none-match': `"${tags.R1}"` }],
      ['unknown rendering', { 'a-im': 'feed', 'if-none-match': '"zzzz.1"' }],
      ['known rendering, forged cursor', { 'a-im': 'feed', 'if-none-match': `"${tags.R1.split('.')[0]}.2"` }],
      ['a tag that is not ours', { 'a-im': 'feed', 'if-none-match': '"33a64df551425fcc55e4d42a148795d9f25f89d4"' }],
      ['a rendering of another document', { 'a-im': 'feed', 'if-none-match': `"${tags.S1}"` }],
    ];
    for (const [what, headers] of cases) {
      const r = await req('/changes.xml', headers);
      assert.equal(r.status, 200, what);
      assert.equal(r.headers.im, undefined, what);
      assert.equal(r.headers['cache-control'], 'public, max-age=10', what);
      assert.equal(r.headers.etag, `"${tags.R3}"`, what);
      assert.deepEqual(r.raw, full.R3, what);
    }
    const cur = await req('/changes.xml', { 'a-im': 'feed', 'if-none-match': `"${tags.R1}", "${tags.R3}"` });
    assert.equal(cur.status, 304);
  });

  test('?since=<cursor from the ETag>: the same delta as a cacheable 200', async () => {
    for (const [ae, ce] of [
      ['identity', undefined],
      ['gzip', 'gzip'],
      ['br', 'br'],
    ] as const) {
      const r = await req(`/changes.xml?since=${tags.R1}`, { 'accept-encoding': ae });
      assert.equal(r.status, 200);
      assert.equal(r.headers['cache-control'], 'public, max-age=10');
      assert.equal(r.headers.vary, 'Accept-Encoding');
      assert.equal(r.headers.im, undefined);
      assert.match(String(r.headers.etag), new RegExp(`^"${tags.R3.replace('.', '\\.')}(-gz|-br)?"$`));
      assert.equal(r.headers['content-length'], String(r.raw.length));
      assert.deepEqual(decodeBody(r.raw, ce), prefixOf(full.R3, 3));
    }
    // The current cursor: nothing new yet, a complete empty document.
    const none = await req(`/changes.xml?since=${tags.R3}`);
    assert.equal(none.status, 200);
    assert.deepEqual(none.raw, prefixOf(full.R3, 0));
    assert.equal(strictParse(none.raw).children.length, 0);
    // Revalidation of a cached delta.
    assert.equal((await req(`/changes.xml?since=${tags.R1}`, { 'if-none-match': `"${tags.R3}-gz"` })).status, 304);
    // A cursor we do not know (or no longer know): the whole document, whose ETag is the next cursor.
    const unknown = await req('/changes.xml?since=zz.zz');
    assert.equal(unknown.status, 200);
    assert.deepEqual(unknown.raw, full.R3);
    // Not a cursor at all.
    for (const bad of ['', 'yesterday', '1', '"abc"', `${tags.R1}-gz`]) {
      const r = await req(`/changes.xml?since=${encodeURIComponent(bad)}`);
      assert.equal(r.status, 400, bad);
      assert.equal(r.headers['cache-control'], 'no-store');
      assert.equal(
        r.raw.toString(),
        'since must be a cursor taken from this document\'s ETag (the text between the quotes, without any "-gz"/"-br" suffix).\n',
      );
    }
  });

  test('a delta with nothing new: entries only left the window → 226 with an empty document', async () => {
    // At T+271 s, A1 (pinged at T-30 s) leaves shortChanges.xml; nobody pinged since S3.
    const r = await t.app.renderer.tick({ now: new Date(T + 271_000) });
    assert.deepEqual(
      r?.rendered.map((x) => x.path).filter((p) => p !== '/updates.xml'),
      ['/shortChanges.xml'],
    );
    const d = await req('/shortChanges.xml', { 'a-im': 'feed', 'if-none-match': `"${tags.S3}"` });
    assert.equal(d.status, 226);
    const doc = strictParse(d.raw);
    assert.equal(doc.children.length, 0);
    assert.equal(doc.root.attrs.updated, new Date(T + 271_000).toUTCString());
  });

  test('a validator older than PUBLISH_DELTA_WINDOW is too old: the full document', async () => {
    await insertPings(t.app.db, [{ name: 'D1', url: 'http://d1.example.com/', at: T + 690_000 }]);
    await t.app.renderer.tick({ now: new Date(T + 700_000) }); // R1..R3 are more than 600 s older
    await snapshot('R4');
    for (const base of ['R1', 'R2', 'R3']) {
      const r = await req('/changes.xml', { 'a-im': 'feed', 'if-none-match': `"${tags[base]}"` });
      assert.equal(r.status, 200, base);
      assert.deepEqual(r.raw, full.R4);
      const s = await req(`/changes.xml?since=${tags[base]}`);
      assert.deepEqual(s.raw, full.R4);
    }
  });

  test('responses are counted by status with the bytes sent', async () => {
    // Only our lines, so a failure prints something readable.
    const text = (await t.app.metrics.metrics())
      .split('\n')
      .filter((l) => l.startsWith('pingd_publish_'))
      .join('\n');
    for (const status of ['200', '226', '304', '400'])
      assert.match(text, new RegExp(`pingd_publish_responses_total\\{document="changes.xml",status="${status}"\\} [1-9]`));
    assert.match(text, /pingd_publish_response_bytes_total\{document="changes.xml",status="226"\} [1-9]/);
    assert.match(text, /pingd_publish_render_duration_seconds_count\{document="changes.xml"\} [1-9]/);
    assert.match(text, /pingd_publish_document_bytes\{document="changes.xml",encoding="br"\} [1-9]/);
    assert.match(text, /pingd_publish_renders_total\{document="changes.xml",outcome="unchanged"\} [1-9]/);
  });
});

describe('serving archives and documents not rendered yet', () => {
  let t: TestApp;
  const H = hourStart(Date.now()) - 5 * HOUR_MS;
  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 });
  });
  after(() => t.close());

  test('before the first render: 503 with Retry-After for the live documents', async () => {
    for (const path of ['/changes.xml', '/shortChanges.xml']) {
      const r = await t.app.inject({ url: path });
      assert.equal(r.statusCode, 503);
      assert.equal(r.headers['retry-after'], '10');
      assert.equal(r.headers['cache-control'], 'no-store');
      assert.equal(r.body, `${path} has not been rendered yet; try again in 10 seconds.\n`);
    }
  });

  test('closed archives: immutable, no deltas, conditional GET, HEAD', async () => {
    await insertPings(t.app.db, [
      { name: 'X', url: 'http://x.example.com/', at: H + 1000 },
      { name: 'Y', url: 'http://y.example.com/', at: H + 2000 },
    ]);
    await t.app.renderer.tick({ now: new Date(H + HOUR_MS + 1000) });
    const path = archivePath(H);
    const r = await t.app.inject({ url: path, headers: { 'accept-encoding': 'gzip' } });
    assert.equal(r.statusCode, 200);
    assert.equal(r.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.equal(r.headers.vary, 'Accept-Encoding');
    assert.equal(r.headers['last-modified'], new Date(H + HOUR_MS).toUTCString());
    assert.match(String(r.headers.etag), /^"[0-9a-z]+\.[0-9a-z]+-gz"$/);
    const etag = String(r.headers.etag);
    const n = await t.app.inject({ url: path, headers: { 'if-none-match': etag } });
    assert.equal(n.statusCode, 304);
    assert.equal(n.headers['cache-control'], 'public, max-age=31536000, immutable');
    // A-IM: feed on an archive: no deltas, whatever the validator.
    const d = await t.app.inject({ url: path, headers: { 'a-im': 'feed', 'if-none-match': '"1.1"' } });
    assert.equal(d.statusCode, 200);
    assert.equal(d.headers.im, undefined);
    const h = await t.app.inject({ method: 'HEAD', url: path });
    assert.equal(h.statusCode, 200);
    assert.equal(h.body, '');
    assert.equal(h.headers['content-length'], String(Buffer.byteLength((await t.app.inject({ url: path })).body)));
  });
});

describe('real HTTP clients', () => {
  let t: TestApp;
  const T2 = hourStart(Date.now()) - 2 * HOUR_MS + 60_000;
  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 });
    await t.listen();
  });
  after(() => t.close());

  /** Runs curl (asynchronously: the server answering it lives in this process). */
  async function curl(args: string[]): Promise<{ status: number; headers: Record<string, string>; body: Buffer }> {
    const out = await new Promise<Buffer>((resolve, reject) =>
      execFile(
        'curl',
        ['-s', '-S', '--max-time', '10', '-D', '-', ...args],
        { encoding: 'buffer', maxBuffer: 64 << 20 },
        (err, stdout, stderr) => (err ? reject(new Error(`curl failed: ${err.message} ${stderr.toString()}`)) : resolve(stdout)),
      ),
    );
    const sep = out.indexOf('\r\n\r\n');
    const head = out.subarray(0, sep).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of head.slice(1)) {
      const i = line.indexOf(':');
      headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
    }
    return { status: Number(head[0].split(' ')[1]), headers, body: out.subarray(sep + 4) };
  }

  test('curl decodes full documents and 226 deltas in gzip and brotli (libz, libbrotli)', async () => {
    await insertPings(t.app.db, [{ name: 'Old', url: 'http://old.example.com/', at: T2 - 1000 }]);
    await t.app.renderer.tick({ now: new Date(T2) });
    const first = await curl(['--compressed', `${t.url}/changes.xml`]);
    assert.equal(first.status, 200);
    assert.equal(first.headers['content-encoding'], 'br'); // curl offers deflate, gzip, br, zstd
    const base = first.headers.etag;
    await insertPings(t.app.db, [
      { name: 'New 1', url: 'http://new1.example.com/', at: T2 + 1000 },
      { name: 'New 2', url: 'http://new2.example.com/', at: T2 + 2000 },
    ]);
    await t.app.renderer.tick({ now: new Date(T2 + 5000) });
    const identity = (await curl([`${t.url}/changes.xml`])).body;
    for (const ae of ['gzip', 'br']) {
      const d = await curl([
        '--compressed',
        '-H',
        `Accept-Encoding: ${ae}`,
        '-H',
        'A-IM: feed',
        '-H',
        `If-None-Match: ${base}`,
        `${t.url}/changes.xml`,
      ]);
      assert.equal(d.status, 226, ae);
      assert.equal(d.headers['content-encoding'], ae);
      assert.equal(d.headers.im, 'feed');
      const doc = strictParse(d.body);
      assert.deepEqual(
        doc.children.map((c) => c.attrs.name),
        ['New 2', 'New 1'],
      );
      assert.ok(identity.toString().startsWith(d.body.subarray(0, d.body.length - '</weblogUpdates>\n'.length).toString()));
      const c = await curl(['-H', 'A-IM: feed', '-H', `If-None-Match: ${d.headers.etag}`, `${t.url}/changes.xml`]);
      assert.equal(c.status, 304);
      assert.equal(c.body.length, 0);
    }
  });
});
