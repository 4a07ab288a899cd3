// Owns the content codings we publish (identity, gzip, brotli): compression settings by size, and the
// byte-level trick that lets a feed delta be served without compressing anything per request.
//
// A delta is always a PREFIX of the current rendering's entries (entries are newest first), followed by the
// document's footer. While rendering, a second gzip and brotli stream is written with a sync/flush point
// at every delta boundary; the compressed bytes up to a flush point are a valid unterminated stream for
// exactly that prefix. Serving a delta = those bytes + the footer as an uncompressed block + the stream's
// end marker (and, for gzip, the CRC-32 and length trailer, from a CRC stored at the boundary).
import zlib from 'node:zlib';

export type Encoding = 'identity' | 'gzip' | 'br';

/**
 * Smaller documents get the slower, tighter settings: they are rendered often and fetched far more. An
 * unknown size must be passed as Infinity: brotli's best quality on a 100 MB archive takes minutes.
 *
 * Above 1 MiB, gzip level 4 and brotli quality 4: on weblogUpdates documents (2.3 and 11.6 MB, measured
 * with zlib on this machine) gzip 4 wrote 1-2% FEWER bytes than level 6 in half the time or less, and
 * brotli 4 2-3% fewer than qualities 5-7 (5 onwards switches to slower match finders that find nothing
 * more in these repetitive lines) in a third to a half of quality 5's time and a fifth of quality 7's.
 * Those documents are re-rendered every RENDER_CRON: compression time is their freshness.
 */
export function gzipOptions(expectedBytes: number): zlib.ZlibOptions {
  return { level: expectedBytes <= 1 << 20 ? 9 : 4, memLevel: 9 };
}

/**
 * `distinct`: every entry names a different weblog (the live documents), so the same line does not come
 * back far apart and a 1 MiB window (LGWIN 20) finds what the default 4 MiB one does. Measured on a
 * generated 10 MB changes.xml of 120k distinct weblogs: 654 KB against 661, 73 ms against 105, and 10 MB
 * of the encoder's memory against 19 (each render of a live document runs two encoders, one for its delta stream: in the
 * embedded soak the renders' peaks were these buffers). An archive lists a weblog at each of its pings,
 * so it keeps the big window up to 16 MiB.
 */
export function brotliOptions(expectedBytes: number, distinct = false): zlib.BrotliOptions {
  const quality = expectedBytes <= 256 << 10 ? 11 : 4;
  const smallWindow = expectedBytes > 16 << 20 || (distinct && expectedBytes > 1 << 20);
  return {
    params: {
      [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
      [zlib.constants.BROTLI_PARAM_QUALITY]: quality,
      // Big archives too: ~10 MB less memory for ~8% more bytes.
      ...(smallWindow ? { [zlib.constants.BROTLI_PARAM_LGWIN]: 20 } : {}),
      ...(expectedBytes > 0 && Number.isFinite(expectedBytes)
        ? { [zlib.constants.BROTLI_PARAM_SIZE_HINT]: Math.min(expectedBytes, 1 << 30) }
        : {}),
    },
  };
}

export function createCompressor(enc: 'gzip' | 'br', expectedBytes: number, distinct = false): zlib.Gzip | zlib.BrotliCompress {
  return enc === 'gzip' ? zlib.createGzip(gzipOptions(expectedBytes)) : zlib.createBrotliCompress(brotliOptions(expectedBytes, distinct));
}

export function flushKind(enc: 'gzip' | 'br'): number {
  return enc === 'gzip' ? zlib.constants.Z_SYNC_FLUSH : zlib.constants.BROTLI_OPERATION_FLUSH;
}

/**
 * Bytes that end a gzip stream cut at a sync-flush point: the footer as a final stored deflate block
 * (RFC 1951 §3.2.4), then CRC-32 and length of everything uncompressed (RFC 1952 §2.3).
 * `prefixCrc`/`prefixLength` describe the uncompressed bytes before the cut.
 */
export function gzipTail(footer: Buffer, prefixCrc: number, prefixLength: number): Buffer {
  if (footer.length > 0xffff) throw new Error('a delta footer must be under 64 KiB');
  const out = Buffer.alloc(5 + footer.length + 8);
  out[0] = 0x01; // BFINAL=1, BTYPE=00 (stored); the flush left us byte-aligned
  out.writeUInt16LE(footer.length, 1);
  out.writeUInt16LE(~footer.length & 0xffff, 3);
  footer.copy(out, 5);
  const crc = zlib.crc32(footer, prefixCrc >>> 0);
  out.writeUInt32LE(crc >>> 0, 5 + footer.length);
  out.writeUInt32LE((prefixLength + footer.length) >>> 0, 9 + footer.length);
  return out;
}

/**
 * Bytes that end a brotli stream cut at a flush point (RFC 7932): the footer as an uncompressed meta-block
 * (ISLAST=0, MNIBBLES=4, MLEN-1, ISUNCOMPRESSED=1, padding to the byte), then an empty last meta-block.
 */
export function brotliTail(footer: Buffer): Buffer {
  if (footer.length === 0) return Buffer.from([0x03]);
  if (footer.length > 0x10000) throw new Error('a delta footer must be at most 64 KiB');
  // Bits, least significant first: ISLAST(1)=0, MNIBBLES(2)=0 (four nibbles), MLEN-1(16), ISUNCOMPRESSED(1)=1.
  const bits = ((footer.length - 1) << 3) | (1 << 19);
  const head = Buffer.from([bits & 0xff, (bits >>> 8) & 0xff, (bits >>> 16) & 0xff]);
  return Buffer.concat([head, footer, Buffer.from([0x03])]);
}

/** Length of the tail added to a delta cut of the given coding. */
export function tailLength(enc: 'gzip' | 'br', footerLength: number): number {
  return enc === 'gzip' ? 5 + footerLength + 8 : footerLength === 0 ? 1 : 3 + footerLength + 1;
}

/**
 * CRC-32 of A followed by B, from CRC-32(A), CRC-32(B) and B's length (zlib's crc32_combine, by its GF(2)
 * matrix method). Node's zlib exposes crc32 but not the combine, and no library of our stack offers it: the
 * open hour's stream (render/open-hour-stream.ts) needs the CRC of a head that changes at every render
 * followed by entries compressed once, without reading those entries again.
 */
export function crc32Combine(crcA: number, crcB: number, lengthB: number): number {
  if (lengthB <= 0) return crcA >>> 0; // B is empty
  const times = (mat: Uint32Array, vec: number): number => {
    let sum = 0;
    for (let i = 0; vec !== 0; i++, vec >>>= 1) if (vec & 1) sum ^= mat[i];
    return sum >>> 0;
  };
  const square = (out: Uint32Array, mat: Uint32Array) => {
    for (let n = 0; n < 32; n++) out[n] = times(mat, mat[n]);
  };
  const odd = new Uint32Array(32);
  const even = new Uint32Array(32);
  odd[0] = 0xedb88320; // the CRC-32 polynomial, reflected
  for (let n = 1, row = 1; n < 32; n++, row = (row << 1) >>> 0) odd[n] = row;
  square(even, odd); // two zero bits
  square(odd, even); // four
  let crc = crcA >>> 0;
  let len = lengthB;
  do {
    // Apply len's bits one by one, each a zero byte-count doubled (eight zero bits, sixteen, …).
    square(even, odd);
    if (len % 2 === 1) crc = times(even, crc);
    len = Math.floor(len / 2);
    if (len === 0) break;
    square(odd, even);
    if (len % 2 === 1) crc = times(odd, crc);
    len = Math.floor(len / 2);
  } while (len !== 0);
  return (crc ^ crcB) >>> 0;
}

/**
 * The start of a gzip member (RFC 1952 §2.3, no name, OS unknown) whose first bytes are `text` in stored,
 * non-final deflate blocks (RFC 1951 §3.2.4): what follows is byte-aligned, so any deflate blocks can come
 * next. The open hour's stream puts its root element (its count changes at every render) here.
 */
export function gzipStoredHead(text: Buffer): Buffer {
  const parts: Buffer[] = [Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff])];
  for (let at = 0; at < text.length; at += 0xffff) {
    const piece = text.subarray(at, Math.min(text.length, at + 0xffff));
    const h = Buffer.alloc(5);
    h[0] = 0x00; // BFINAL=0, BTYPE=00
    h.writeUInt16LE(piece.length, 1);
    h.writeUInt16LE(~piece.length & 0xffff, 3);
    parts.push(h, piece);
  }
  return Buffer.concat(parts);
}

/** The gzip member's trailer: CRC-32 and length (mod 2^32) of everything uncompressed (RFC 1952 §2.3). */
export function gzipTrailer(crc: number, length: number): Buffer {
  const out = Buffer.alloc(8);
  out.writeUInt32LE(crc >>> 0, 0);
  out.writeUInt32LE(length % 2 ** 32, 4);
  return out;
}
