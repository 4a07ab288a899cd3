// Owns reading back what was rendered, for the routes that serve it: the current rendering of a path
// (remembered briefly, and kept while the database is unavailable), delta cut points, and the bytes of a
// full document or a delta in each coding (small ones kept in memory, large ones streamed from the
// database).
import { Readable, pipeline } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import zlib from 'node:zlib';
import { promisify } from 'node:util';
import { LRUCache } from 'lru-cache';
import type { Db } from '../../platform/db/database.js';
import { brotliTail, gzipTail, tailLength, type Encoding } from '../codec.js';
import {
  CHUNK_BYTES,
  currentRendering,
  deltasOf,
  readChunks,
  type DeltaCut,
  type StreamRef,
  type RenderingMeta,
  type Variant,
} from '../rendering-repository.js';
import { readStreamChunks } from '../stream-repository.js';

const gunzip = promisify(zlib.gunzip);

/** Bodies up to this size are kept in memory; larger ones are streamed from the database. */
const CACHE_ENTRY_MAX = 4 << 20;
const CACHE_TOTAL_MAX = 64 << 20;
/** Paths whose current rendering is remembered (every archive hour asked for is one). */
const POINTERS_MAX = 10_000;
/** Paths in the reader's plain map of fresh pointers (the live documents, and archive hours being read). */
const HOT_MAX = 64;
/** Renderings whose delta cut points are remembered (the current ones of the delta documents, and a few older). */
const DELTA_SETS_MAX = 64;

export interface ReaderOptions {
  db: Db;
  /** How long the current rendering of a path is remembered before asking the database again. */
  pointerTtlMs: number;
}

export class Reader {
  /**
   * The last known current rendering per path. No TTL in the cache itself: an entry older than pointerTtlMs
   * is asked for again, but still answers while the database is unavailable (see current()).
   */
  private readonly pointers = new LRUCache<string, { meta: RenderingMeta | undefined; at: number }>({ max: POINTERS_MAX });
  private readonly pointerLoads = new Map<string, Promise<RenderingMeta | undefined>>();
  /**
   * The same entries for the paths polled right now, in a plain Map read by fresh(): an LRU get (it
   * reorders its list) was a visible share of a 304's cost in a profile. Emptied when it fills up.
   */
  private readonly hot = new Map<string, { meta: RenderingMeta | undefined; at: number }>();
  /**
   * All delta cut points of a rendering, read in one query the first time a client asks for a delta of it.
   * A client's entity tags are looked up here, never one query per tag (REGRESSION: an If-None-Match of ~900
   * invented tags with A-IM: feed cost ~900 queries, one after another, and flushed a cache of misses).
   */
  private readonly deltaSets = new LRUCache<number, Promise<Map<number, DeltaCut>>>({ max: DELTA_SETS_MAX });
  private readonly bodies = new LRUCache<string, Buffer>({
    maxSize: CACHE_TOTAL_MAX,
    maxEntrySize: CACHE_TOTAL_MAX,
    sizeCalculation: (b) => Math.max(1, b.length),
  });
  /** Per path, the rendering whose bodies `bodies` may hold (see keep()). */
  private readonly cachedRendering = new LRUCache<string, number>({ max: POINTERS_MAX });

  constructor(private readonly opts: ReaderOptions) {}

  /** Forgets the remembered current rendering of `path` (a new one was just published by this process). */
  invalidate(path: string): void {
    this.pointers.delete(path);
    this.hot.delete(path);
  }

  /** The current rendering of `path` when it is known and fresh, without waiting; undefined when current() must answer. */
  fresh(path: string): RenderingMeta | undefined {
    const hit = this.hot.get(path);
    return hit !== undefined && Date.now() - hit.at < this.opts.pointerTtlMs ? hit.meta : undefined;
  }

  /** The current rendering of `path` (remembered for pointerTtlMs; concurrent lookups share one query). */
  async current(path: string): Promise<RenderingMeta | undefined> {
    const hit = this.pointers.get(path);
    if (hit && Date.now() - hit.at < this.opts.pointerTtlMs) return hit.meta;
    let load = this.pointerLoads.get(path);
    if (!load) {
      load = currentRendering(this.opts.db, path).finally(() => this.pointerLoads.delete(path));
      this.pointerLoads.set(path, load);
    }
    let meta: RenderingMeta | undefined;
    try {
      meta = await load;
    } catch (err) {
      // The database is unavailable: keep serving the last rendering this instance knew of (its bytes are
      // in memory once served) rather than failing every crawler until the database is back.
      if (hit) return hit.meta;
      throw err;
    }
    if (this.opts.pointerTtlMs > 0) {
      const entry = { meta, at: Date.now() };
      this.pointers.set(path, entry);
      if (this.hot.size >= HOT_MAX) this.hot.clear();
      this.hot.set(path, entry);
    }
    return meta;
  }

  /** The delta cut from `baseId` recorded with rendering `meta`, if that base is known and recent. */
  async deltaCut(meta: RenderingMeta, baseId: number, baseCursorUs: number): Promise<DeltaCut | undefined> {
    let set = this.deltaSets.get(meta.id);
    if (!set) {
      set = deltasOf(this.opts.db, meta.id);
      this.deltaSets.set(meta.id, set);
      // A failed read is not remembered (the database was unavailable: the full document instead).
      set.catch(() => this.deltaSets.delete(meta.id));
    }
    let cuts: Map<number, DeltaCut>;
    try {
      cuts = await set;
    } catch {
      return undefined;
    }
    const cut = cuts.get(baseId);
    // A tag with the right id but another cursor is not ours (another database, or forged).
    return cut && cut.baseCursorUs === baseCursorUs ? cut : undefined;
  }

  /** Length of the full document in a coding. */
  fullLength(meta: RenderingMeta, enc: Encoding): number {
    return enc === 'identity' ? meta.identityLength : enc === 'gzip' ? meta.gzipLength : meta.brLength;
  }

  /** The full document in a coding: a Buffer when small enough to keep, else a stream from the database. */
  async fullBody(meta: RenderingMeta, enc: Encoding): Promise<Buffer | Readable> {
    if (enc === 'identity' && !meta.identityStored && meta.identityLength <= CACHE_ENTRY_MAX && meta.gzipLength <= CACHE_ENTRY_MAX) {
      // A small document stored without identity (the open hour's appended gzip): decompressed once and
      // kept like any small body, so it is served from memory, also while the database is unavailable.
      const key = `${meta.id}:identity`;
      let b = this.bodies.get(key);
      if (!b) {
        b = await gunzip((await this.fullBody(meta, 'gzip')) as Buffer);
        this.keep(meta, key, b);
      }
      return b;
    }
    if (enc === 'identity' && !meta.identityStored) {
      // Identity of a big document is not stored: decompress the stored gzip (never compress per request).
      const out = zlib.createGunzip();
      pipeline(await this.gzipStream(meta), out, () => undefined); // errors destroy `out`
      return out;
    }
    const variant: Variant = enc;
    const length = this.fullLength(meta, enc);
    if (length > CACHE_ENTRY_MAX) return enc === 'gzip' ? this.gzipStream(meta) : this.variantStream(meta.id, variant, length);
    const key = `${meta.id}:${variant}`;
    let b = this.bodies.get(key);
    if (!b) {
      b = enc === 'gzip' && meta.stream ? await buffer(await this.gzipStream(meta)) : await this.readRange(meta.id, variant, length);
      this.keep(meta, key, b);
    }
    return b;
  }

  /**
   * The stored gzip of a rendering. One made from the open hour's stream (open-hour-stream.ts) is its own
   * head, the stream's shared chunks, then its own tail. Its own bytes are read before the stream is handed
   * out (see variantStream).
   */
  private async gzipStream(meta: RenderingMeta): Promise<Readable> {
    if (!meta.stream) return this.variantStream(meta.id, 'gzip', meta.gzipLength);
    const db = this.opts.db;
    const s: StreamRef = meta.stream;
    const mine = await this.readRange(meta.id, 'gzip', meta.gzipLength - s.chunks * CHUNK_BYTES);
    async function* parts() {
      yield mine.subarray(0, s.headLength);
      for (let seq = 0; seq < s.chunks; seq++) yield (await readStreamChunks(db, s.id, seq, seq))[0];
      yield mine.subarray(s.headLength);
    }
    return Readable.from(parts(), { objectMode: false });
  }

  /** Length of a delta body in a coding. */
  deltaLength(meta: RenderingMeta, cut: DeltaCut, enc: Encoding): number {
    if (enc === 'identity') return cut.identityEnd + meta.footer.length;
    return (enc === 'gzip' ? cut.gzipEnd : cut.brEnd) + tailLength(enc, meta.footer.length);
  }

  /** A delta body: the stored prefix of the delta stream, plus the footer and end of stream (codec.ts). */
  async deltaBody(meta: RenderingMeta, cut: DeltaCut, enc: Encoding): Promise<Buffer> {
    const key = `${meta.id}:d${cut.baseId}:${enc}`;
    const hit = this.bodies.get(key);
    if (hit) return hit;
    let body: Buffer;
    if (enc === 'gzip') {
      body = Buffer.concat([await this.readRange(meta.id, 'dgzip', cut.gzipEnd), gzipTail(meta.footer, cut.gzipCrc, cut.identityEnd)]);
    } else if (enc === 'br') {
      body = Buffer.concat([await this.readRange(meta.id, 'dbr', cut.brEnd), brotliTail(meta.footer)]);
    } else if (meta.identityStored) {
      body = Buffer.concat([await this.readRange(meta.id, 'identity', cut.identityEnd), meta.footer]);
    } else {
      body = await gunzip(await this.deltaBody(meta, cut, 'gzip'));
    }
    this.keep(meta, key, body);
    return body;
  }

  /** Bytes of bodies held in memory. */
  get cachedBytes(): number {
    return this.bodies.calculatedSize;
  }

  /**
   * Keeps a body of rendering `meta` in memory, for the newest rendering of its path only: the routes
   * serve current renderings, so the bodies of one that was superseded are never asked for again. Left to
   * the LRU, they filled its 64 MB with dead renderings of the live documents, two more every render tick
   * (REGRESSION: the embedded process grew by ~60 MB over a 10-minute soak, half its memory bound).
   */
  private keep(meta: RenderingMeta, key: string, body: Buffer): void {
    const newest = this.cachedRendering.get(meta.path);
    if (newest !== undefined && newest > meta.id) return; // a request that began before the new rendering
    if (newest !== undefined && newest < meta.id) {
      const prefix = `${newest}:`;
      for (const k of [...this.bodies.keys()]) if (k.startsWith(prefix)) this.bodies.delete(k);
    }
    this.cachedRendering.set(meta.path, meta.id);
    this.bodies.set(key, body);
  }

  private async readRange(id: number, variant: Variant, end: number): Promise<Buffer> {
    if (end === 0) return Buffer.alloc(0);
    const chunks = await readChunks(this.opts.db, id, variant, 0, Math.floor((end - 1) / CHUNK_BYTES));
    const all = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    return all.subarray(0, end);
  }

  /**
   * A big variant as a stream of its chunks. The first is read before the stream is handed out: when the
   * database is unavailable the route can still answer 503, where a stream failing after the head was sent
   * could only be cut short (REGRESSION: Fastify's error answer then failed on the head's Content-Type and
   * the client got a 500 with Fastify's own message).
   */
  private async variantStream(id: number, variant: Variant, length: number): Promise<Readable> {
    const db = this.opts.db;
    const last = Math.max(0, Math.ceil(length / CHUNK_BYTES) - 1);
    const [first] = await readChunks(db, id, variant, 0, 0);
    async function* chunks() {
      yield first;
      for (let seq = 1; seq <= last; seq++) {
        const [c] = await readChunks(db, id, variant, seq, seq);
        yield c;
      }
    }
    return Readable.from(chunks(), { objectMode: false });
  }
}
