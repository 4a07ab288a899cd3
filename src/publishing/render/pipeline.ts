// Owns turning a rendered document (a head, pages of entries, a foot) into stored bytes, as a stream: the
// identity bytes feed a gzip and a brotli compressor and, for documents with feed deltas, a second pair
// that is flushed at every delta cut point (see codec.ts). Every output is written to the database in
// fixed-size chunks as it is produced (and to files under PUBLISH_DIR), so memory does not grow with the
// document: a 1M-ping hour goes through in a few MB.
import { createHash } from 'node:crypto';
import { createWriteStream, mkdirSync, renameSync, rmSync, type WriteStream } from 'node:fs';
import { dirname, join } from 'node:path';
import zlib from 'node:zlib';
import type { Queryable } from '../../platform/db/database.js';
import { createCompressor, flushKind } from '../codec.js';
import { CHUNK_BYTES, insertChunk, type BaseRow, type DeltaCut, type StreamRef, type Variant } from '../rendering-repository.js';
import type { RenderSource } from '../documents/document.js';
import { PingdError } from '../../platform/errors.js';

/** Bytes per entry assumed when sizing the compressors from an entry count (a <weblog/> is ~100-130). */
const BYTES_PER_ENTRY_ESTIMATE = 128;

/** Identity bytes above this are not stored: clients that refuse gzip get the stored gzip decompressed. */
export const IDENTITY_STORE_MAX = 4 << 20;

// Entries are written in batches of about this many characters (fewer, larger zlib calls).
const BATCH_CHARS = 64 << 10;

/** Writes one variant as numbered chunks of exactly CHUNK_BYTES (the last one shorter), with back-pressure. */
class ChunkWriter {
  private parts: Buffer[] = [];
  private buffered = 0;
  private seq = 0;
  private writing: Promise<void> = Promise.resolve();
  private inFlight = 0;
  private failed: Error | null = null;
  /** A write error of the PUBLISH_DIR file (ENOSPC, EIO): fails the rendering instead of crashing the process. */
  private fileError: Error | null = null;
  total = 0;
  dropped = false;

  constructor(
    private readonly q: Queryable,
    private readonly renderingId: number,
    readonly variant: Variant,
    private readonly file: WriteStream | null,
    private readonly storeMax = Infinity,
  ) {
    // Without a listener a full disk under PUBLISH_DIR was an uncaught exception: the process died.
    file?.on('error', (err) => (this.fileError ??= err));
  }

  push(buf: Buffer): void {
    if (buf.length === 0) return;
    this.total += buf.length;
    if (this.file) this.file.write(buf);
    if (this.dropped) return;
    if (this.total > this.storeMax) {
      // Too big to keep in this coding: stop storing; the caller deletes what was written.
      this.dropped = true;
      this.parts = [];
      this.buffered = 0;
      return;
    }
    this.parts.push(buf);
    this.buffered += buf.length;
    // A bounded variant is held until its end (at most storeMax bytes): whether it is kept is known only
    // then, and a 5 MB shortChanges.xml wrote four identity chunks to delete them at once (a 1 MiB bytea
    // insert is the dearest statement of a render on the embedded database).
    if (this.storeMax !== Infinity) return;
    while (this.buffered >= CHUNK_BYTES) this.emit(this.take(CHUNK_BYTES));
  }

  private take(n: number): Buffer {
    const all = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts, this.buffered);
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    this.parts = rest.length ? [rest] : [];
    this.buffered = rest.length;
    return Buffer.from(out); // detach from the larger buffer so it can be freed
  }

  private emit(chunk: Buffer): void {
    const seq = this.seq++;
    this.inFlight++;
    this.writing = this.writing.then(async () => {
      if (this.failed) return;
      try {
        await insertChunk(this.q, this.renderingId, this.variant, seq, chunk);
      } catch (err) {
        this.failed = err as Error;
      } finally {
        this.inFlight--;
      }
    });
  }

  /** Resolves once at most one chunk is waiting for the database (back-pressure for the producer). */
  async settle(): Promise<void> {
    if (this.inFlight > 1) await this.writing;
    if (this.file?.writableNeedDrain && !this.fileError) {
      // A stream that fails never drains: wait for whichever comes first, or the render hangs for good.
      const file = this.file;
      await new Promise<void>((res) => {
        const done = () => {
          file.off('drain', done).off('error', done).off('close', done);
          res();
        };
        file.on('drain', done).on('error', done).on('close', done);
      });
    }
    if (this.failed) throw this.failed;
    if (this.fileError) throw this.fileError;
  }

  destroy(): void {
    this.file?.destroy();
  }

  async end(): Promise<void> {
    if (!this.dropped) while (this.buffered > 0) this.emit(this.take(Math.min(CHUNK_BYTES, this.buffered)));
    await this.writing;
    if (this.failed) throw this.failed;
    if (this.fileError) throw this.fileError;
    if (this.file) await new Promise<void>((res, rej) => this.file!.end((err?: Error | null) => (err ? rej(err) : res())));
    if (this.fileError) throw this.fileError;
  }
}

/** A zlib compressor whose output goes to a ChunkWriter; counts compressed bytes for cut points. */
class CompressedSink {
  private readonly z: zlib.Gzip | zlib.BrotliCompress;
  private error: Error | null = null;

  constructor(
    readonly enc: 'gzip' | 'br',
    readonly out: ChunkWriter,
    expectedBytes: number,
    distinct = false,
  ) {
    this.z = createCompressor(enc, expectedBytes, distinct);
    this.z.on('data', (d: Buffer) => out.push(d));
    this.z.on('error', (err) => (this.error = err));
  }

  async write(buf: Buffer): Promise<void> {
    await new Promise<void>((res, rej) => this.z.write(buf, (err) => (err ? rej(err) : res())));
    if (this.error) throw this.error;
    await this.out.settle();
  }

  /** Flushes to a byte boundary; returns the number of compressed bytes produced so far. */
  async cut(): Promise<number> {
    await new Promise<void>((res) => this.z.flush(flushKind(this.enc), () => res()));
    // Output pushed by the flush is delivered by now; a turn of the event loop makes sure of it.
    await new Promise((res) => setImmediate(res));
    if (this.error) throw this.error;
    return this.out.total;
  }

  async end(): Promise<void> {
    await new Promise<void>((res, rej) => {
      this.z.once('end', res);
      this.z.once('error', rej);
      this.z.end();
      this.z.resume();
    });
    await this.out.end();
  }

  /** Stops without finishing the stream (delta streams are only used up to their last cut). */
  async abandon(): Promise<void> {
    this.z.destroy();
    await this.out.end();
  }

  destroy(): void {
    this.z.destroy();
    this.out.destroy();
  }
}

export interface PipelineOptions {
  /** Where chunks are written (autocommit statements; the rendering is published later in one transaction). */
  q: Queryable;
  renderingId: number;
  /** Size hint for the compressors when the source gives no entry count (the previous rendering's size). */
  expectedBytes?: number;
  /** Delta bases, newest cursor first; empty for documents without deltas. */
  bases: BaseRow[];
  /** Also write identity/.gz/.br files under this directory at `relPath` (atomically, on commit). */
  publishDir?: string;
  relPath?: string;
}

export interface PipelineResult {
  entries: number;
  identityLength: number;
  identityStored: boolean;
  gzipLength: number;
  brLength: number;
  sha256: string;
  footer: Buffer;
  deltas: DeltaCut[];
  /** Made from the open hour's appended stream (open-hour-stream.ts) instead of by this pipeline. */
  stream?: StreamRef;
  /** Moves the files written under PUBLISH_DIR into place (call after the database commit). */
  commitFiles(): void;
  discardFiles(): void;
}

/** Renders `source` into storage; see the module comment. */
export async function runPipeline(source: RenderSource, opts: PipelineOptions): Promise<PipelineResult> {
  const { q, renderingId } = opts;
  const tmpSuffix = `.tmp-${process.pid}-${renderingId}`;
  const files: { tmp: string; final: string }[] = [];
  const fileFor = (ext: string): WriteStream | null => {
    if (!opts.publishDir || !opts.relPath) return null;
    const final = join(opts.publishDir, opts.relPath + ext);
    mkdirSync(dirname(final), { recursive: true });
    const tmp = final + tmpSuffix;
    files.push({ tmp, final });
    return createWriteStream(tmp);
  };
  const discardFiles = () => {
    for (const f of files) rmSync(f.tmp, { force: true });
  };

  // Unknown size: assume big (fast settings) rather than small (brotli 11 on 100 MB takes minutes).
  const expected =
    source.entries !== undefined
      ? source.head.length + source.foot.length + source.entries * BYTES_PER_ENTRY_ESTIMATE
      : opts.expectedBytes || Infinity;
  // Identity that will clearly be too big is not written at all (estimate at twice the limit, to be safe).
  const identity = new ChunkWriter(q, renderingId, 'identity', fileFor(''), IDENTITY_STORE_MAX);
  if (Number.isFinite(expected) && expected > 2 * IDENTITY_STORE_MAX) identity.dropped = true;
  const distinct = source.distinct ?? false;
  const gzip = new CompressedSink('gzip', new ChunkWriter(q, renderingId, 'gzip', fileFor('.gz')), expected);
  const br = new CompressedSink('br', new ChunkWriter(q, renderingId, 'br', fileFor('.br')), expected, distinct);
  const withDeltas = opts.bases.length > 0;
  let dgzip: CompressedSink | null = withDeltas
    ? new CompressedSink('gzip', new ChunkWriter(q, renderingId, 'dgzip', null), expected)
    : null;
  let dbr: CompressedSink | null = withDeltas
    ? new CompressedSink('br', new ChunkWriter(q, renderingId, 'dbr', null), expected, distinct)
    : null;

  const sha = createHash('sha256');
  let crc = 0;
  let entries = 0;
  const deltas: DeltaCut[] = [];
  let baseIndex = 0;
  let pending = '';

  const write = async (text: string) => {
    if (!text) return;
    const buf = Buffer.from(text, 'utf8');
    sha.update(buf);
    crc = zlib.crc32(buf, crc);
    identity.push(buf);
    const sinks: Promise<void>[] = [gzip.write(buf), br.write(buf)];
    if (dgzip && dbr) sinks.push(dgzip.write(buf), dbr.write(buf));
    await Promise.all(sinks);
    await identity.settle();
  };

  // Records the cut point for every base whose cursor is at or after `nextAtUs` (the next entry is not
  // newer than them), i.e. the delta from those bases ends here.
  const cutBefore = async (nextAtUs: number) => {
    if (!dgzip || !dbr || baseIndex >= opts.bases.length || opts.bases[baseIndex].cursorUs < nextAtUs) return;
    await write(pending);
    pending = '';
    const [gzipEnd, brEnd] = await Promise.all([dgzip.cut(), dbr.cut()]);
    while (baseIndex < opts.bases.length && opts.bases[baseIndex].cursorUs >= nextAtUs) {
      const b = opts.bases[baseIndex++];
      deltas.push({ baseId: b.id, baseCursorUs: b.cursorUs, entries, identityEnd: identity.total, gzipEnd, gzipCrc: crc, brEnd });
    }
    if (baseIndex >= opts.bases.length) {
      // Past the oldest base: the delta streams have served their purpose.
      await Promise.all([dgzip.abandon(), dbr.abandon()]);
      dgzip = dbr = null;
    }
  };

  try {
    pending = source.head;
    let lastAt = Infinity;
    for await (const page of source.pages) {
      for (const e of page) {
        if (withDeltas) {
          if (e.atUs > lastAt) throw new PingdError('PUBLISH_RENDER_FAILED', 'entries of a document with deltas must come newest first');
          if ((e.count ?? 1) !== 1)
            throw new PingdError(
              'PUBLISH_RENDER_FAILED',
              'entries of a document with deltas must come one by one (cut points fall between them)',
            );
          lastAt = e.atUs;
          await cutBefore(e.atUs);
        }
        pending += e.xml;
        entries += e.count ?? 1;
        if (pending.length >= BATCH_CHARS) {
          await write(pending);
          pending = '';
        }
      }
    }
    await cutBefore(-Infinity);
    await write(pending + source.foot);
    pending = '';
    await Promise.all([gzip.end(), br.end(), identity.end()]);
    return {
      entries,
      identityLength: identity.total,
      identityStored: !identity.dropped,
      gzipLength: gzip.out.total,
      brLength: br.out.total,
      sha256: sha.digest('hex'),
      footer: Buffer.from(source.foot, 'utf8'),
      deltas,
      commitFiles() {
        for (const f of files) renameSync(f.tmp, f.final);
      },
      discardFiles,
    };
  } catch (err) {
    // The caller discards the rendering row (its chunks go with it); here, stop the streams and files.
    for (const s of [gzip, br, dgzip, dbr]) s?.destroy();
    identity.destroy();
    discardFiles();
    throw err;
  }
}
