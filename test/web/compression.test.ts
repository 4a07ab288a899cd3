// What the pages send over the wire, through the app (test/web/browser-audit.test.ts drives Chromium): a page,
// each hashed asset and GET /api/stats in brotli or gzip as Accept-Encoding asks, Vary: Accept-Encoding on
// every variant, the decoded bytes those of the uncompressed answer; changes.xml keeps its own precompressed
// path; every page has a <meta name="description">, and every code example is a focusable, named region.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import type { LightMyRequestResponse } from 'fastify';
import { methodCall, rpc, startApp, uniqueUrl, type TestApp } from '../helpers/app.js';
import { MIN_COMPRESS_BYTES } from '../../src/web/compression.js';
import { DESCRIPTION } from '../../src/web/pages.js';

let t: TestApp;
before(async () => {
  t = await startApp({ RENDER_SCHEDULER: false });
});
after(async () => {
  await t?.close();
});

const decode: Record<'br' | 'gzip', (b: Buffer) => Buffer> = { br: (b) => zlib.brotliDecompressSync(b), gzip: (b) => zlib.gunzipSync(b) };

function get(url: string, acceptEncoding?: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return t.app.inject({
    method: 'GET',
    url,
    headers: { ...(acceptEncoding === undefined ? {} : { 'accept-encoding': acceptEncoding }), ...headers },
  });
}

/**
 * The uncompressed answer and the one in `coding`, taken so that both are of the same content (`same`
 * says so: a page names the last full hour, /api/stats is remade every 2 s); a few tries, then fail.
 */
async function pair(url: string, coding: 'br' | 'gzip', same: (plain: LightMyRequestResponse, coded: LightMyRequestResponse) => boolean) {
  for (let i = 0; i < 5; i++) {
    const plain = await get(url);
    const coded = await get(url, coding);
    if (same(plain, coded)) return { plain, coded };
  }
  throw new Error(`${url}: no two answers of the same content in five tries`);
}

function assertCoded(url: string, plain: LightMyRequestResponse, coded: LightMyRequestResponse, coding: 'br' | 'gzip'): void {
  assert.equal(plain.statusCode, 200, url);
  assert.equal(coded.statusCode, 200, url);
  assert.equal(plain.headers['content-encoding'], undefined, `${url}: asked for nothing`);
  assert.equal(plain.headers.vary, 'Accept-Encoding', `${url}: the uncompressed variant says it varies too`);
  assert.equal(coded.headers['content-encoding'], coding, url);
  assert.equal(coded.headers.vary, 'Accept-Encoding', url);
  assert.equal(coded.headers['content-type'], plain.headers['content-type'], url);
  assert.equal(Number(coded.headers['content-length']), coded.rawPayload.length, `${url}: the length of the bytes sent`);
  assert.ok(
    coded.rawPayload.length < plain.rawPayload.length * 0.75,
    `${url}: ${coded.rawPayload.length} of ${plain.rawPayload.length} bytes`,
  );
  assert.ok(decode[coding](coded.rawPayload).equals(plain.rawPayload), `${url}: decoded ${coding} is the uncompressed answer`);
}

/** For pages: the answers agree on the part that changes by itself (the rest must then be equal too). */
const samePart = (re: RegExp, coding: 'br' | 'gzip') => (plain: LightMyRequestResponse, coded: LightMyRequestResponse) =>
  re.exec(plain.body)?.[0] === re.exec(decode[coding](coded.rawPayload).toString())?.[0];

test('pages were sent uncompressed (Lighthouse: "enable text compression"): /, /weblog and /status in br and gzip as Accept-Encoding asks, Vary: Accept-Encoding, decoded to the same page', async () => {
  // The home page names the last full hour's archive, /status its statistics' time (remade every 2 s).
  const changing: Record<string, RegExp> = { '/': /\/\d{4}\/\d\d\/\d\d\/\d\d\.xml/, '/weblog': /^/, '/status': /id="generated-at">[^<]*/ };
  for (const [url, re] of Object.entries(changing)) {
    for (const coding of ['br', 'gzip'] as const) {
      const { plain, coded } = await pair(url, coding, samePart(re, coding));
      assertCoded(url, plain, coded, coding);
      assert.equal(coded.headers['content-type'], 'text/html; charset=utf-8', url);
      assert.equal(
        coded.headers['content-security-policy'],
        plain.headers['content-security-policy'],
        "the pages' headers, compressed or not",
      );
    }
  }
  // What Chromium sends: zstd is not made (Node 20's zlib has none), br is the best of the rest.
  assert.equal((await get('/', 'gzip, deflate, br, zstd')).headers['content-encoding'], 'br');
});

test("a GET ping's answer leaves uncompressed (the intake path: brotli added ~20% to a ping's CPU to save ~1 kB)", async () => {
  for (const url of [
    '/pingSiteForm',
    `/pingSiteForm?name=Form&url=${encodeURIComponent(uniqueUrl('form'))}`,
    `/ping?name=Form&url=${encodeURIComponent(uniqueUrl('form'))}`,
  ]) {
    const res = await get(url, 'gzip, deflate, br, zstd');
    assert.equal(res.statusCode, 200, url);
    assert.ok(res.rawPayload.length > MIN_COMPRESS_BYTES, `${url}: big enough to be compressed otherwise`);
    assert.equal(res.headers['content-encoding'], undefined, url);
    assert.equal(res.headers.vary, undefined, url);
    assert.match(res.body, /^<!DOCTYPE html>/, url);
  }
});

test('Accept-Encoding q-values choose the coding; none, identity or q=0 for both get the page as it is', async () => {
  const cases: [string | undefined, string | undefined][] = [
    [undefined, undefined],
    ['identity', undefined],
    ['gzip;q=1, br;q=0.5', 'gzip'],
    ['br;q=0, gzip', 'gzip'],
    ['GZIP', 'gzip'],
    ['x-gzip', 'gzip'],
    ['*', 'br'],
    ['br;q=0, gzip;q=0', undefined],
    ['deflate, zstd', undefined],
  ];
  for (const [ae, want] of cases) {
    const res = await get('/', ae);
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-encoding'], want, String(ae));
    assert.equal(res.headers.vary, 'Accept-Encoding', String(ae));
  }
});

test('the hashed assets were sent uncompressed (uPlot: 51 kB where 20 kB do): each in br and gzip, made once, with its own ETag, a 304 for it', async () => {
  const html = (await get('/status')).body;
  const urls = [...html.matchAll(/(?:href|src)="(\/assets\/[^"]+)"/g)].map((m) => m[1]);
  assert.equal(urls.length, 4, urls.join(' '));
  for (const url of urls) {
    const plain = await get(url);
    for (const coding of ['br', 'gzip'] as const) {
      const coded = await get(url, coding);
      assertCoded(url, plain, coded, coding);
      assert.equal(coded.headers['cache-control'], 'public, max-age=31536000, immutable', url);
      assert.notEqual(coded.headers.etag, plain.headers.etag, `${url}: each coding is its own representation`);
      // Made once: the same bytes again, and a revalidation of that coding is answered 304.
      assert.ok((await get(url, coding)).rawPayload.equals(coded.rawPayload), url);
      const revalidated = await get(url, coding, { 'if-none-match': String(coded.headers.etag) });
      assert.equal(revalidated.statusCode, 304, url);
      assert.equal(revalidated.rawPayload.length, 0, url);
      assert.equal(revalidated.headers.etag, coded.headers.etag, url);
      // The uncompressed variant's tag does not validate a compressed one.
      assert.equal((await get(url, coding, { 'if-none-match': String(plain.headers.etag) })).statusCode, 200, url);
    }
  }
});

test('/api/stats was sent uncompressed (~50 kB of JSON re-read every 30 s by each open dashboard): the cached answer in br and gzip, decoded to the same JSON, an ETag per coding', async () => {
  for (const window of ['1h', '24h']) {
    const url = `/api/stats?window=${window}`;
    for (const coding of ['br', 'gzip'] as const) {
      const suffix = coding === 'br' ? '-br"' : '-gz"';
      // The same cached answer: its tag with the coding's suffix.
      const { plain, coded } = await pair(url, coding, (a, b) => String(b.headers.etag) === String(a.headers.etag).replace(/"$/, suffix));
      assertCoded(url, plain, coded, coding);
      assert.equal(coded.headers['content-type'], 'application/json; charset=utf-8');
      const revalidated = await get(url, coding, { 'if-none-match': String(coded.headers.etag) });
      if (revalidated.headers.etag === coded.headers.etag) {
        assert.equal(revalidated.statusCode, 304);
        assert.equal(revalidated.headers.vary, 'Accept-Encoding');
      }
    }
  }
});

test(`a body under ${MIN_COMPRESS_BYTES} bytes (the asset 404) is sent as it is`, async () => {
  const res = await get('/assets/site.000000000000.css', 'br');
  assert.equal(res.statusCode, 404);
  assert.ok(res.rawPayload.length < MIN_COMPRESS_BYTES);
  assert.equal(res.headers['content-encoding'], undefined);
  assert.match(res.body, /^No asset site\.000000000000\.css/);
});

test("changes.xml keeps its own precompressed path: compressed once, not twice, and none of the pages' headers", async () => {
  assert.equal((await rpc(t.app, methodCall('weblogUpdates.ping', ['Listed', uniqueUrl('listed')]))).flerror, false);
  await t.app.renderer.tick();
  for (const coding of ['br', 'gzip'] as const) {
    const res = await get('/changes.xml', coding);
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-encoding'], coding);
    assert.equal(String(res.headers.vary).match(/accept-encoding/gi)?.length, 1, `named once: ${res.headers.vary}`);
    assert.match(decode[coding](res.rawPayload).toString(), /^<\?xml /, 'one decoding gives the XML');
    assert.equal(res.headers['content-security-policy'], undefined, "the pages' hooks never run on it");
  }
});

test('pages had no <meta name="description"> (Lighthouse SEO 90): every page has its own', async () => {
  const want: [string, number, string][] = [
    ['/', 200, DESCRIPTION.home],
    ['/weblog', 200, DESCRIPTION.weblog],
    [`/weblog?url=${encodeURIComponent(uniqueUrl('unknown'))}`, 404, DESCRIPTION.weblog],
    ['/status', 200, DESCRIPTION.status],
    ['/pingSiteForm', 200, DESCRIPTION.ping],
    [`/pingSiteForm?name=Described&url=${encodeURIComponent(uniqueUrl('described'))}`, 200, DESCRIPTION.ping],
    ['/pingSiteForm?name=Described&url=javascript%3Aalert(1)', 400, DESCRIPTION.ping],
  ];
  for (const [url, status, description] of want) {
    const res = await get(url);
    assert.equal(res.statusCode, status, url);
    const metas = [...res.body.matchAll(/<meta name="description" content="([^"]*)">/g)].map((m) => m[1]);
    assert.deepEqual(metas, [description], url);
  }
  for (const d of Object.values(DESCRIPTION))
    assert.ok(d.length >= 50 && d.length <= 160 && !/[<>"'&]/.test(d), `${d.length} characters, nothing to escape: ${d}`);
  assert.equal(new Set(Object.values(DESCRIPTION)).size, Object.values(DESCRIPTION).length, 'no two pages say the same');
});

test("the home page's code examples scrolled sideways at 375 px but could not be reached by keyboard (axe scrollable-region-focusable): each <pre>, and each table that may scroll, is a focusable region with a name", async () => {
  const known = uniqueUrl('regions');
  assert.equal((await rpc(t.app, methodCall('weblogUpdates.ping', ['Regions', known]))).flerror, false);
  const want: [string, number][] = [
    ['/', 4],
    ['/status', 2],
    [`/weblog?url=${encodeURIComponent(known)}`, 1],
  ];
  for (const [url, count] of want) {
    const html = (await get(url)).body;
    const boxes = [...html.matchAll(/<(?:pre\b|div class="table-wrap")[^>]*>/g)].map((m) => m[0]);
    assert.equal(boxes.length, count, `${url}: ${boxes.join('\n')}`);
    const labels = boxes.map((p) => {
      assert.match(p, /^<(?:pre|div class="table-wrap") tabindex="0" role="region" aria-label="[^"]+">$/, p);
      return /aria-label="([^"]+)"/.exec(p)![1];
    });
    assert.equal(new Set(labels).size, labels.length, `${url}: each region has a name of its own: ${labels.join(', ')}`);
  }
});
