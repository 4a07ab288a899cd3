// The delta trick at byte level: a gzip/brotli stream flushed at a cut point, plus our tail, is a valid
// compressed stream of (prefix + footer) for decoders other than the one that wrote it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import zlib from 'node:zlib';
import {
  brotliOptions,
  brotliTail,
  crc32Combine,
  createCompressor,
  flushKind,
  gzipStoredHead,
  gzipTail,
  gzipTrailer,
  tailLength,
} from '../../src/publishing/codec.js';

async function cutStream(
  enc: 'gzip' | 'br',
  head: string,
  entries: string[],
  cuts: number[],
  sized = { expectedBytes: 0, distinct: false },
): Promise<{ bytes: Buffer; at: Map<number, number> }> {
  const z = createCompressor(enc, sized.expectedBytes, sized.distinct);
  const out: Buffer[] = [];
  let n = 0;
  z.on('data', (d: Buffer) => {
    out.push(d);
    n += d.length;
  });
  const at = new Map<number, number>();
  const write = (s: string) => new Promise<void>((res) => z.write(Buffer.from(s), () => res()));
  const flush = () => new Promise<void>((res) => z.flush(flushKind(enc), () => res()));
  await write(head);
  for (let i = 0; i <= entries.length; i++) {
    if (cuts.includes(i)) {
      await flush();
      await new Promise((r) => setImmediate(r));
      at.set(i, n);
    }
    if (i < entries.length) await write(entries[i]);
  }
  z.destroy();
  return { bytes: Buffer.concat(out), at };
}

const head = '<?xml version="1.0" encoding="utf-8"?>\n<weblogUpdates version="2" updated="Sun, 22 Nov 2026 08:00:00 GMT" count="9">\n';
const foot = Buffer.from('</weblogUpdates>\n');
const entries = Array.from({ length: 400 }, (_, i) => ` <weblog name="Blog ${i} ünï" url="http://b${i}.example.com/" when="${i}"/>\n`);
const cuts = [0, 1, 17, 200, 400];

test('gzip: every cut + tail is a complete gzip stream, for zlib and for the gzip program', async () => {
  const { bytes, at } = await cutStream('gzip', head, entries, cuts);
  for (const k of cuts) {
    const prefix = Buffer.from(head + entries.slice(0, k).join(''));
    const body = Buffer.concat([bytes.subarray(0, at.get(k)), gzipTail(foot, zlib.crc32(prefix), prefix.length)]);
    assert.equal(body.length, (at.get(k) as number) + tailLength('gzip', foot.length));
    const want = Buffer.concat([prefix, foot]);
    assert.deepEqual(zlib.gunzipSync(body), want, `zlib, cut ${k}`);
    const ext = spawnSync('gzip', ['-dc'], { input: body });
    assert.equal(ext.status, 0, `gzip -dc, cut ${k}: ${ext.stderr}`);
    assert.deepEqual(ext.stdout, want, `gzip -dc, cut ${k}`);
  }
});

test('gzip: a wrong CRC is caught by the decoder (the trailer is really checked)', async () => {
  const { bytes, at } = await cutStream('gzip', head, entries, [17]);
  const prefix = Buffer.from(head + entries.slice(0, 17).join(''));
  const body = Buffer.concat([bytes.subarray(0, at.get(17)), gzipTail(foot, (zlib.crc32(prefix) ^ 1) >>> 0, prefix.length)]);
  assert.throws(() => zlib.gunzipSync(body), /incorrect data check|unexpected end/i);
});

test('brotli: every cut + tail is a complete brotli stream', async () => {
  const { bytes, at } = await cutStream('br', head, entries, cuts);
  for (const k of cuts) {
    const prefix = Buffer.from(head + entries.slice(0, k).join(''));
    const body = Buffer.concat([bytes.subarray(0, at.get(k)), brotliTail(foot)]);
    assert.equal(body.length, (at.get(k) as number) + tailLength('br', foot.length));
    assert.deepEqual(zlib.brotliDecompressSync(body), Buffer.concat([prefix, foot]), `cut ${k}`);
  }
  // An empty footer ends the stream with the empty last meta-block alone.
  const body = Buffer.concat([bytes.subarray(0, at.get(1)), brotliTail(Buffer.alloc(0))]);
  assert.deepEqual(zlib.brotliDecompressSync(body), Buffer.from(head + entries[0]));
});

test('brotli window: a live document over 1 MiB gets 1 MiB (LGWIN 20); an archive keeps the default up to 16 MiB', () => {
  const lgwin = (bytes: number, distinct: boolean) =>
    (brotliOptions(bytes, distinct).params as Record<number, number>)[zlib.constants.BROTLI_PARAM_LGWIN];
  assert.equal(lgwin(8 << 20, true), 20);
  assert.equal(lgwin(1 << 20, true), undefined); // quality 4, but small enough for the default window
  assert.equal(lgwin(8 << 20, false), undefined);
  assert.equal(lgwin(17 << 20, false), 20);
  assert.equal(lgwin(200 << 10, true), undefined); // quality 11: small documents keep their best settings
});

test("brotli with the live documents' 1 MiB window: cuts + tail still decode, across more than a window", async () => {
  const many = Array.from({ length: 30_000 }, (_, i) => ` <weblog name="Blog ${i} ünï" url="http://b${i}.example.com/" when="${i}"/>\n`);
  const at = [0, 9_000, 30_000];
  const { bytes, at: cut } = await cutStream('br', head, many, at, { expectedBytes: 8 << 20, distinct: true });
  for (const k of at) {
    const body = Buffer.concat([bytes.subarray(0, cut.get(k)), brotliTail(foot)]);
    assert.deepEqual(zlib.brotliDecompressSync(body), Buffer.concat([Buffer.from(head + many.slice(0, k).join('')), foot]), `cut ${k}`);
  }
});

test('tails refuse footers they cannot encode in one block', () => {
  assert.throws(() => gzipTail(Buffer.alloc(70_000), 0, 0), /64 KiB/);
  assert.throws(() => brotliTail(Buffer.alloc(70_000)), /64 KiB/);
});

test('crc32Combine gives the CRC-32 of A then B from theirs, for any lengths', () => {
  let seed = 7;
  const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(rand() * 256)));
  for (const [a, b] of [
    [0, 0],
    [0, 5],
    [5, 0],
    [1, 1],
    [3, 70_000],
    [100_000, 1],
    [4096, 4097],
  ] as const) {
    const A = bytes(a);
    const B = bytes(b);
    assert.equal(crc32Combine(zlib.crc32(A), zlib.crc32(B), b), zlib.crc32(Buffer.concat([A, B])), `${a} + ${b} bytes`);
  }
  for (let i = 0; i < 50; i++) {
    const A = bytes(Math.floor(rand() * 3000));
    const B = bytes(Math.floor(rand() * 3000));
    assert.equal(crc32Combine(zlib.crc32(A), zlib.crc32(B), B.length), zlib.crc32(Buffer.concat([A, B])));
  }
});

test('a head in stored blocks, deflate blocks compressed apart, and a trailer make one gzip member (gzip(1) reads it)', async () => {
  // The open hour's layout: a head over 64 KiB (two stored blocks), a raw deflate stream flushed to a byte
  // boundary, then another raw deflate stream that ends the member.
  const head = Buffer.from(`<head>${'h'.repeat(70_000)}</head>\n`);
  const body = Buffer.from(Array.from({ length: 3000 }, (_, i) => ` <weblog name="n${i}" when="${i}"/>\n`).join(''));
  const rest = Buffer.from(' <weblog name="last"/>\n</weblogUpdates>\n');
  const d = zlib.createDeflateRaw({ level: 4 });
  const out: Buffer[] = [];
  d.on('data', (c: Buffer) => out.push(c));
  await new Promise<void>((res, rej) => d.write(body, (err) => (err ? rej(err) : res())));
  await new Promise<void>((res) => d.flush(zlib.constants.Z_SYNC_FLUSH, () => res()));
  await new Promise((res) => setImmediate(res));
  const crc = zlib.crc32(rest, crc32Combine(zlib.crc32(head), zlib.crc32(body), body.length));
  const member = Buffer.concat([
    gzipStoredHead(head),
    ...out,
    zlib.deflateRawSync(rest),
    gzipTrailer(crc, head.length + body.length + rest.length),
  ]);
  const want = Buffer.concat([head, body, rest]);
  assert.deepEqual(zlib.gunzipSync(member), want);
  const ext = spawnSync('gzip', ['-dc'], { input: member, maxBuffer: 16 << 20 });
  assert.equal(ext.status, 0, ext.stderr.toString());
  assert.deepEqual(ext.stdout, want);
  // A wrong CRC is caught by both decoders (the trailer is checked, so the test above can fail).
  const bad = Buffer.from(member);
  bad[bad.length - 8] ^= 1;
  assert.throws(() => zlib.gunzipSync(bad));
  assert.notEqual(spawnSync('gzip', ['-dc'], { input: bad }).status, 0);
  d.destroy();
});
