// Owns the open hour's archive as one gzip stream appended render by render (issue 42: a render that costs
// what changed). Each ping of the hour is compressed once: the pings whose place in the archive can no
// longer change (stamped before the render's cursor, after every ping already compressed) are fed to one
// raw deflate stream kept in this process, flushed to a byte boundary at each render, and its output is
// stored once, in full 1 MiB chunks shared by every rendering made from it (stream-repository.ts). A
// rendering stores only what is its own: the gzip header with the root element in stored blocks (its count
// changes), and the tail (the stream's bytes past its last full chunk, the newest pings and the foot
// compressed on their own, the gzip trailer with the CRC-32 combined from the parts). A render therefore
// compresses and stores the pings since the last one, whatever the size of the hour.
//
// Why the archive can be appended and changes.xml cannot: an archive lists pings oldest first and, dated by
// the end of its hour (`updated`; `when` counts back from it), an entry's bytes never change once written.
// changes.xml's `when` counts back from the render time, so every entry changes at every render.
//
// Gzip only: a brotli stream's first bytes and its context modelling depend on what came before, so the root
// element with its changing count cannot be put in front of brotli meta-blocks compressed once. The growing
// hour is served in gzip (and decompressed for clients that refuse it); br once it is closed (hours.ts
// renders the closed hour in full, from the database).
//
// The stream starts again from a full read of the hour (one render as dear as before) when a ping comes in
// that belongs before pings already compressed (stamped before the render's cursor: not expected, see
// render-time.ts's cursorFor), when the listing changed without a ping (forget: a weblog removed, held or
// released), after a failure, or in a new hour. Another instance rendering in between does not: each goes on
// with its own stream (the pings are the same).
import { createHash, type Hash } from 'node:crypto';
import zlib from 'node:zlib';
import type { Queryable } from '../../platform/db/database.js';
import type { HourStats, PingPageRow } from '../../intake/ping/window-repository.js';
import { HOUR_MS } from '../documents/archive.js';
import type { HourFollow, KeptPing } from '../documents/hour-cache.js';
import { keptWeblog } from '../documents/window-cache.js';
import { WEBLOG_UPDATES_FOOT, weblogElementFrom, weblogUpdatesHead } from '../documents/weblog-updates.js';
import { crc32Combine, gzipOptions, gzipStoredHead, gzipTrailer } from '../codec.js';
import { CHUNK_BYTES, insertChunk, type RenderingMeta, type StreamRef } from '../rendering-repository.js';
import { createStream, insertStreamChunk, streamExists } from '../stream-repository.js';
import type { PipelineResult } from './pipeline.js';

/** Rows per statement while catching up on pings (the full read takes the archive's page size). */
const READ_ROWS = 5000;
/**
 * Pings held uncompressed at most. The cursor stays behind while one of pingd's transactions is open, up to
 * 60 s (clock.ts's HORIZON_MAX_LAG_US: at a high rate, a great many pings): past this many, the pings up to
 * the render time are compressed anyway, and a ping that then comes in older than them starts the stream
 * again (a full read), as any such ping does. Memory stays bounded (~200 bytes a ping held).
 */
const PENDING_MAX = 20_000;
/** Entries are compressed in batches of about this many characters (fewer, larger zlib calls). */
const BATCH_CHARS = 64 << 10;
/**
 * The stream's deflate settings: gzip level 4 whatever the hour's size (it is not known when the stream
 * starts; codec.ts measured level 4 against 6 on these documents). The closing render compresses by size.
 */
const STREAM_GZIP = gzipOptions(Infinity);

/** A ping read but not compressed yet: its element's escaped start and its place in the archive. */
type Pending = KeptPing;

const before = (a: Pending, b: { atUs: number; id: number }): boolean => a.atUs < b.atUs || (a.atUs === b.atUs && a.id < b.id);

interface State {
  hourMs: number;
  streamId: number;
  deflate: zlib.DeflateRaw;
  out: Buffer[];
  /** Compressed bytes not yet in a full chunk. */
  partial: Buffer;
  chunks: number;
  /** Pings compressed, their identity bytes, its CRC-32 and SHA-256, and the last of them in archive order. */
  sealed: number;
  sealedBytes: number;
  crc: number;
  sha: Hash;
  last: { atUs: number; id: number } | null;
  maxSealedId: number;
  /** Pings read but not compressed yet, oldest first. */
  pending: Pending[];
  /** The last ping id read. */
  lastId: number;
}

/** What a render of the open hour is made from: its stats (the fingerprint) and how to store it. */
export interface StreamedHour {
  stats: HourStats;
  /** Writes the rendering's own bytes (its head and tail) as rendering `renderingId`'s gzip chunks. */
  store(w: Queryable, renderingId: number): Promise<PipelineResult>;
}

/** A render of the open hour: up to when, compressing up to when, what is published now, page size of a full read. */
interface HourOptions {
  toUs: number;
  sealUs: number;
  current: RenderingMeta | undefined;
  pageRows: number;
}

export class OpenHourStream {
  private state: State | null = null;
  constructor(private readonly reads: HourFollow) {}

  /** Drops the stream: the next render starts another from a full read (see WindowCache.forget). */
  forget(): void {
    this.state?.deflate.destroy();
    this.state = null;
  }

  /**
   * Brings the stream of the hour at `startMs` up to date with every ping committed before this call (read
   * with `q`, the render's snapshot) and compresses those stamped before `sealUs` (stored with `w`); returns
   * the hour's pings received before `toUs`. `current`: the path's published rendering. A failure drops the
   * stream (the next render starts another).
   */
  async hour(q: Queryable, w: Queryable, startMs: number, path: string, o: HourOptions): Promise<StreamedHour> {
    try {
      return await this.update(q, w, startMs, path, o);
    } catch (err) {
      this.forget();
      throw err;
    }
  }

  private async update(q: Queryable, w: Queryable, startMs: number, path: string, o: HourOptions): Promise<StreamedHour> {
    let s = this.state;
    if (s && s.hourMs !== startMs) s = null;
    if (s?.last && o.toUs <= s.last.atUs) s = null; // a render as of an earlier time (tests inject times)
    // Another instance may have rendered the hour meanwhile, from a stream of its own: ours is still right
    // (the pings are the same), as long as its chunks are still stored (a stream no rendering names goes).
    if (s && o.current?.stream?.id !== s.streamId && !(await streamExists(q, s.streamId))) s = null;
    if (s && !(await this.catchUp(q, s))) s = null;
    const sealUs = Math.min(o.sealUs, o.toUs);
    if (!s) {
      this.forget();
      s = await this.start(q, w, startMs, path, { sealUs, pageRows: o.pageRows });
    }
    this.state = s;
    await this.seal(w, s, s.pending.length > PENDING_MAX ? o.toUs : sealUs);
    let n = s.sealed;
    let maxId = s.maxSealedId;
    const tail: Pending[] = [];
    for (const p of s.pending) {
      if (p.atUs >= o.toUs) break;
      tail.push(p);
      n++;
      maxId = Math.max(maxId, p.id);
    }
    const state = s;
    return { stats: { n, maxId }, store: (w2, id) => this.store(w2, id, state, tail, n) };
  }

  private async start(q: Queryable, w: Queryable, startMs: number, path: string, o: { sealUs: number; pageRows: number }): Promise<State> {
    const lastId = await this.reads.follow.lastId(q);
    const streamId = await createStream(w, path);
    const deflate = zlib.createDeflateRaw(STREAM_GZIP);
    const out: Buffer[] = [];
    deflate.on('data', (d: Buffer) => out.push(d));
    const s: State = {
      hourMs: startMs,
      streamId,
      deflate,
      out,
      partial: Buffer.alloc(0),
      chunks: 0,
      sealed: 0,
      sealedBytes: 0,
      crc: 0,
      sha: createHash('sha256'),
      last: null,
      maxSealedId: 0,
      pending: [],
      lastId,
    };
    const startUs = startMs * 1000;
    let rows: PingPageRow[] = [];
    do {
      const last = rows[rows.length - 1];
      const after = last ? { atUs: last.at_us, id: last.id } : null;
      rows = await this.reads.hourPage(q, startUs, startUs + HOUR_MS * 1000, lastId, after, o.pageRows);
      for (const r of rows) s.pending.push(keptWeblog(r));
      // Compressed page by page as far as the pings are certainly in their place: the read holds one page.
      const lastRow = rows[rows.length - 1];
      if (rows.length === o.pageRows && lastRow)
        await this.seal(w, s, s.pending.length > PENDING_MAX ? lastRow.at_us : Math.min(lastRow.at_us, o.sealUs));
    } while (rows.length === o.pageRows);
    return s;
  }

  /** Reads the pings committed since the last read; false when one belongs before pings already compressed. */
  private async catchUp(q: Queryable, s: State): Promise<boolean> {
    const startUs = s.hourMs * 1000;
    const fresh: Pending[] = [];
    for (;;) {
      const rows = await this.reads.follow.hourPingsAfter(q, startUs, startUs + HOUR_MS * 1000, s.lastId, READ_ROWS);
      for (const r of rows) fresh.push(keptWeblog(r));
      if (rows.length > 0) s.lastId = rows[rows.length - 1].id;
      if (rows.length < READ_ROWS) break;
    }
    if (s.last && fresh.some((p) => before(p, s.last!))) return false;
    if (fresh.length > 0) {
      s.pending.push(...fresh);
      s.pending.sort((a, b) => a.atUs - b.atUs || a.id - b.id);
    }
    return true;
  }

  /** Compresses the pending pings stamped before `untilUs` into the stream and stores its full chunks with `w`. */
  private async seal(w: Queryable, s: State, untilUs: number): Promise<void> {
    let i = 0;
    while (i < s.pending.length && s.pending[i].atUs < untilUs) i++;
    if (i === 0) return;
    const endMs = s.hourMs + HOUR_MS;
    let text = '';
    for (let j = 0; j < i; j++) {
      const p = s.pending[j];
      text += weblogElementFrom(p.start, p.atUs / 1000, endMs);
      s.maxSealedId = Math.max(s.maxSealedId, p.id);
      if (text.length >= BATCH_CHARS || j === i - 1) {
        const buf = Buffer.from(text, 'utf8');
        text = '';
        s.crc = zlib.crc32(buf, s.crc);
        s.sha.update(buf);
        s.sealedBytes += buf.length;
        await new Promise<void>((res, rej) => s.deflate.write(buf, (err) => (err ? rej(err) : res())));
      }
    }
    s.last = { atUs: s.pending[i - 1].atUs, id: s.pending[i - 1].id };
    s.sealed += i;
    s.pending = s.pending.slice(i);
    // To a byte boundary: what is stored so far ends where a rendering's own tail can begin.
    await new Promise<void>((res) => s.deflate.flush(zlib.constants.Z_SYNC_FLUSH, () => res()));
    await new Promise((res) => setImmediate(res));
    s.partial = Buffer.concat([s.partial, ...s.out.splice(0)]);
    while (s.partial.length >= CHUNK_BYTES) {
      await insertStreamChunk(w, s.streamId, s.chunks, Buffer.from(s.partial.subarray(0, CHUNK_BYTES)));
      s.chunks++;
      s.partial = Buffer.from(s.partial.subarray(CHUNK_BYTES));
    }
  }

  /** Stores a rendering's own gzip bytes: the head in stored blocks, then the stream's partial chunk and the tail. */
  private async store(w: Queryable, renderingId: number, s: State, tail: Pending[], n: number): Promise<PipelineResult> {
    try {
      return await this.ownBytes(w, renderingId, s, tail, n);
    } catch (err) {
      this.forget();
      throw err;
    }
  }

  private async ownBytes(w: Queryable, renderingId: number, s: State, tail: Pending[], n: number): Promise<PipelineResult> {
    const endMs = s.hourMs + HOUR_MS;
    const head = Buffer.from(weblogUpdatesHead(new Date(endMs), n), 'utf8');
    let text = '';
    for (const p of tail) text += weblogElementFrom(p.start, p.atUs / 1000, endMs);
    const rest = Buffer.from(text + WEBLOG_UPDATES_FOOT, 'utf8');
    const crc = zlib.crc32(rest, crc32Combine(zlib.crc32(head), s.crc, s.sealedBytes));
    const length = head.length + s.sealedBytes + rest.length;
    const gzHead = gzipStoredHead(head);
    const own = Buffer.concat([gzHead, s.partial, zlib.deflateRawSync(rest, STREAM_GZIP), gzipTrailer(crc, length)]);
    for (let seq = 0; seq * CHUNK_BYTES < own.length; seq++)
      await insertChunk(w, renderingId, 'gzip', seq, own.subarray(seq * CHUNK_BYTES, (seq + 1) * CHUNK_BYTES));
    const stream: StreamRef = { id: s.streamId, chunks: s.chunks, headLength: gzHead.length };
    const sha = createHash('sha256').update(head).update(s.sha.copy().digest()).update(rest).digest('hex');
    return {
      entries: n,
      identityLength: length,
      identityStored: false,
      gzipLength: own.length + s.chunks * CHUNK_BYTES,
      brLength: 0,
      sha256: sha,
      footer: Buffer.from(WEBLOG_UPDATES_FOOT, 'utf8'),
      deltas: [],
      stream,
      commitFiles() {},
      discardFiles() {},
    };
  }
}
