// The open hour's archive appended render by render (open-hour-stream.ts): every rendering serves exactly
// what a full read of the hour renders, in gzip (curl's and zlib's) and decompressed for identity; pings come
// in order without starting the stream again, one older than pings already compressed starts it again; an
// instance goes on with its stream when another rendered in between; past 1 MiB of compressed bytes the
// renderings share the stream's chunks; the closed hour lists the same bytes as the last open rendering; and
// a stream no rendering names any more is deleted.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { BACKEND, startApp, type TestApp } from '../../helpers/app.js';
import { insertPings, sourceText, strictParse } from '../helpers.js';
import { HOUR_MS, archivePath, hourStart, readArchive } from '../../../src/publishing/documents/archive.js';
import { listingReads } from '../../../src/publishing/documents/listing.js';
import { CHUNK_BYTES, pruneRenderings } from '../../../src/publishing/rendering-repository.js';
import pg from 'pg';
import { waitFor } from '../../helpers/wait.js';

const run = promisify(execFile);
// An hour that ended for the database's clock too: renders inject times inside it.
const H = hourStart(Date.now()) - 3 * HOUR_MS;
const PATH = archivePath(H);

async function get(t: TestApp, headers: Record<string, string> = {}) {
  const res = await t.app.inject({ method: 'GET', url: PATH, headers });
  return { status: res.statusCode, headers: res.headers, raw: res.rawPayload };
}

/** What a full read of the hour renders for pings received before `toUs`. */
async function fullRead(t: TestApp, toUs: number): Promise<string> {
  const r = await readArchive(t.app.db, H, toUs, { reads: listingReads('all'), pageRows: 1000, cache: null });
  return sourceText(r.source(H + HOUR_MS));
}

async function streams(t: TestApp, path = PATH): Promise<{ id: number; chunks: number }[]> {
  const rows = await t.app.db.query<{ id: number; chunks: number }>(
    `select s.id, (select count(*) from archive_stream_chunks c where c.stream_id = s.id)::int as chunks
       from archive_streams s where s.path = $1 order by s.id`,
    [path],
  );
  return rows.map((r) => ({ id: Number(r.id), chunks: Number(r.chunks) }));
}

async function current(t: TestApp, path = PATH): Promise<{ id: number; streamId: number | null; streamChunks: number; ownBytes: number }> {
  const [r] = await t.app.db.query<{ id: number; stream_id: number | null; stream_chunks: number; own: number }>(
    `select r.id, r.stream_id, r.stream_chunks,
            (select coalesce(sum(octet_length(c.data)), 0) from rendering_chunks c where c.rendering_id = r.id and c.variant = 'gzip')::int as own
       from published_documents p join renderings r on r.id = p.rendering_id where p.path = $1`,
    [path],
  );
  return {
    id: Number(r.id),
    streamId: r.stream_id === null ? null : Number(r.stream_id),
    streamChunks: Number(r.stream_chunks),
    ownBytes: Number(r.own),
  };
}

describe('the open hour appended render by render', () => {
  let t: TestApp;
  let nowMs = H + 60_000;
  let seq = 0;
  const url = (i: number) => `http://stream${i % 37}.example.com/`;
  before(async () => {
    t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 });
    await t.listen();
  });
  after(() => t.close());

  /** `n` pings just before the next render time (in order), then a render at that time. */
  async function step(n: number, at: (i: number) => number = (i) => nowMs - 1500 + i): Promise<number> {
    await insertPings(
      t.app.db,
      Array.from({ length: n }, (_, i) => ({
        name: `Ping ${seq++} <&> "é𝄞"`,
        url: url(seq),
        rssUrl: seq % 3 ? null : `${url(seq)}feed`,
        at: at(i),
      })),
    );
    const r = await t.app.renderer.tick({ now: new Date(nowMs) });
    assert.deepEqual(r?.failed, []);
    const toUs = nowMs * 1000 + 1;
    nowMs += 20_000;
    return toUs;
  }

  test('every rendering serves what a full read renders; pings in order never start the stream again', async () => {
    for (let i = 0; i < 8; i++) {
      const toUs = await step(5 + i);
      const want = await fullRead(t, toUs);
      const plain = await get(t);
      assert.equal(plain.headers['content-encoding'], undefined);
      assert.equal(plain.raw.toString('utf8'), want, `identity at step ${i}`);
      // br is not stored while the hour grows: a client that prefers it gets gzip, one that takes only br identity.
      const gz = await get(t, { 'accept-encoding': 'br, gzip' });
      assert.equal(gz.headers['content-encoding'], 'gzip');
      assert.equal(zlib.gunzipSync(gz.raw).toString('utf8'), want, `gzip at step ${i}`);
      assert.equal((await get(t, { 'accept-encoding': 'br' })).headers['content-encoding'], undefined);
    }
    strictParse(Buffer.from(await fullRead(t, nowMs * 1000)));
    const s = await streams(t);
    assert.equal(s.length, 1, 'one stream for eight renders');
    const c = await current(t);
    assert.equal(c.streamId, s[0].id);
    // Dated by the end of its hour; Last-Modified is the render time.
    const res = await get(t);
    const doc = strictParse(res.raw);
    assert.equal(doc.root.attrs.updated, new Date(H + HOUR_MS).toUTCString());
    assert.equal(res.headers['last-modified'], new Date(nowMs - 20_000).toUTCString());
    assert.equal(res.headers['cache-control'], 'public, max-age=10');
  });

  test('curl decodes the growing hour', async () => {
    const { stdout } = await run('curl', ['-sS', '--compressed', `${t.url}${PATH}`], { encoding: 'buffer', maxBuffer: 64 << 20 });
    const { stdout: head } = await run('curl', ['-sS', '--compressed', '-o', '/dev/null', '-D', '-', `${t.url}${PATH}`]);
    assert.match(head.toString(), /content-encoding: gzip/i);
    assert.equal(stdout.toString('utf8'), await fullRead(t, (nowMs - 20_000) * 1000 + 1));
  });

  test('a ping older than pings already compressed starts the stream again, and the bytes stay right', async () => {
    const before = await streams(t);
    const toUs = await step(1, () => H + 5_000);
    assert.equal((await streams(t)).length, before.length + 1);
    assert.equal((await get(t)).raw.toString('utf8'), await fullRead(t, toUs));
    // And in order again: no other start.
    const toUs2 = await step(3);
    assert.equal((await streams(t)).length, before.length + 1);
    assert.equal((await get(t)).raw.toString('utf8'), await fullRead(t, toUs2));
  });

  test(
    'another instance rendering in between: each goes on with its own stream, and the bytes stay right',
    { skip: BACKEND !== 'postgres' && 'two instances on one database need PostgreSQL (PGlite is one process)' },
    async () => {
      const other = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 }, t.db);
      try {
        await step(2);
        const ours = await current(t);
        await insertPings(t.app.db, [{ name: 'Other instance', url: url(seq++), at: nowMs - 1000 }]);
        const r = await other.app.renderer.tick({ now: new Date(nowMs) });
        assert.deepEqual(r?.failed, []);
        const toUs = nowMs * 1000 + 1;
        nowMs += 20_000;
        const theirs = await current(t);
        assert.notEqual(theirs.streamId, ours.streamId, 'the other instance renders from a stream of its own');
        assert.equal((await get(t)).raw.toString('utf8'), await fullRead(t, toUs));
        const count = (await streams(t)).length;
        const toUs2 = await step(3);
        assert.equal((await current(t)).streamId, ours.streamId, 'this instance goes on with its stream');
        assert.equal((await streams(t)).length, count, 'no stream started again');
        assert.equal((await get(t)).raw.toString('utf8'), await fullRead(t, toUs2));
      } finally {
        await other.app.close();
      }
    },
  );

  test('past 1 MiB compressed, renderings share the stream chunks and store only their head and tail', async () => {
    // Names that do not compress: ~200 bytes of hex each, 12,000 pings, > 1 MiB of gzip.
    await t.app.db.query(
      `with s as (select i, timestamptz 'epoch' + ($1::bigint + i * 10) * interval '1 millisecond' as at
                    from generate_series(1, 12000) i),
            w as (insert into weblogs (url, name, first_ping_at, last_ping_at)
                  select 'http://bulk' || i || '.example.com/', md5(i::text) || md5((i * 7)::text) || md5((i * 13)::text) || md5((i * 17)::text)
                         || md5((i * 19)::text) || md5((i * 23)::text), at, at from s
                  returning id, url, name, last_ping_at)
       insert into pings (weblog_id, received_at, method, name, url) select id, last_ping_at, 'ping', name, url from w`,
      [nowMs - 10_000 - 120_000],
    );
    const toUs = await step(2);
    const first = await current(t);
    assert.ok(first.streamChunks >= 1, `the stream has full chunks: ${first.streamChunks}`);
    const toUs2 = await step(4);
    const second = await current(t);
    assert.equal(second.streamId, first.streamId, 'the same stream');
    assert.ok(second.streamChunks >= first.streamChunks);
    assert.ok(second.ownBytes < CHUNK_BYTES + 64 * 1024, `a rendering stores its head and tail only: ${second.ownBytes}`);
    const gz = await get(t, { 'accept-encoding': 'gzip' });
    assert.ok(gz.raw.length > CHUNK_BYTES);
    assert.equal(zlib.gunzipSync(gz.raw).toString('utf8'), await fullRead(t, toUs2));
    assert.ok(toUs < toUs2);
  });

  test('the closed hour lists what the last open rendering lists; then the streams go', async () => {
    const open = (await get(t)).raw;
    const r = await t.app.renderer.tick({ now: new Date(H + HOUR_MS + 5_000) });
    assert.ok((r?.closedHours ?? 0) >= 1);
    const closed = await get(t, { 'accept-encoding': 'br' });
    assert.equal(closed.headers['content-encoding'], 'br', 'br once closed');
    assert.equal(closed.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.deepEqual(zlib.brotliDecompressSync(closed.raw), open);
    assert.ok((await streams(t)).length >= 1);
    await pruneRenderings(t.app.db, 0, 0);
    assert.deepEqual(await streams(t), []);
    assert.deepEqual((await get(t)).raw, open);
  });
});

describe('a pingd transaction left open holds the cursor back', () => {
  test(
    'past 20,000 pings held uncompressed, the stream compresses them anyway, and the bytes stay right',
    { skip: BACKEND !== 'postgres' && 'concurrent transactions need PostgreSQL (PGlite has one session)' },
    async () => {
      const t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 });
      // As one of pingd's own sessions (the cursor counts only those) in a transaction that stays open.
      const holder = new pg.Client({ connectionString: t.config.DATABASE_URL, application_name: 'pingd' });
      try {
        // The pings and the render in one real hour (the cursor is the real clock's): not in its last minute.
        await waitFor(() => Date.now() % HOUR_MS < HOUR_MS - 60_000, { what: 'an hour with a minute left', timeoutMs: 70_000 });
        const path = archivePath(hourStart(Date.now()));
        await holder.connect();
        await holder.query('begin');
        await holder.query('select txid_current()');
        // 25,000 pings stamped after the open transaction began, with names that do not compress (> 1 MiB of gzip).
        await t.app.db.query(
          `with s as (select i, clock_timestamp() as at from generate_series(1, 25000) i),
                w as (insert into weblogs (url, name, first_ping_at, last_ping_at)
                      select 'http://held' || i || '.example.com/', md5(i::text) || md5((i * 7)::text) || md5((i * 13)::text), at, at from s
                      returning id, url, name, last_ping_at)
           insert into pings (weblog_id, received_at, method, name, url) select id, last_ping_at, 'ping', name, url from w`,
        );
        const r = await t.app.renderer.tick();
        assert.deepEqual(r?.failed, []);
        const c = await current(t, path);
        assert.ok(
          c.streamId !== null && c.streamChunks >= 1,
          `compressed onto the stream although the cursor is behind: ${JSON.stringify(c)}`,
        );
        const res = await t.app.inject({ method: 'GET', url: path, headers: { 'accept-encoding': 'gzip' } });
        const doc = strictParse(zlib.gunzipSync(res.rawPayload));
        assert.equal(doc.children.filter((e) => e.attrs.url.startsWith('http://held')).length, 25_000);
        assert.equal(Number(doc.root.attrs.count), doc.children.length);
      } finally {
        await holder.query('rollback').catch(() => undefined);
        await holder.end();
        await t.close();
      }
    },
  );
});
