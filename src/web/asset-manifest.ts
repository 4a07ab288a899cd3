// Owns the web pages' static files: each is served at /assets/<name>.<hash>.<ext> (the hash is of its bytes),
// so a page names the exact version it was made with and the file can be cached for a year. The bytes are
// read once at start and kept (66 kB in all), with each coding made the first time a client asks for it.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { compressOnce, type Coding } from './compression.js';
import type { Encoding } from '../publishing/codec.js';

export interface AssetFile {
  /** The name pages ask for (e.g. "site.css"). */
  name: string;
  /** Where the bytes are. */
  path: string;
}

const TYPES: Record<string, string> = { '.css': 'text/css; charset=utf-8', '.js': 'application/javascript; charset=utf-8' };
const ETAG_SUFFIX: Record<Encoding, string> = { identity: '', gzip: '-gz', br: '-br' };

export class Asset {
  /** The served file name (under /assets/). */
  readonly served: string;
  /** The URL path a page links to. */
  readonly url: string;
  readonly type: string;
  private readonly coded = new Map<Coding, Promise<Buffer>>();

  constructor(
    name: string,
    readonly bytes: Buffer,
  ) {
    // 12 hex characters of SHA-256: a new version never collides with a cached one.
    const hash = createHash('sha256').update(bytes).digest('hex').slice(0, 12);
    const ext = extname(name);
    const type = TYPES[ext];
    if (!type) throw new Error(`no content type for asset ${name}`);
    this.type = type;
    this.served = `${name.slice(0, name.length - ext.length)}.${hash}${ext}`;
    this.url = `/assets/${this.served}`;
  }

  /** Strong ETag of one coding (each coding is a representation of its own, RFC 9110 §8.8.3). */
  etag(enc: Encoding): string {
    return `"${this.served}${ETAG_SUFFIX[enc]}"`;
  }

  /**
   * The bytes in a coding. Made when first asked for, not at start: most processes (every test app) never
   * serve an asset, and brotli 11 of all four is ~150 ms of CPU. A failure is not kept.
   */
  body(enc: Encoding): Promise<Buffer> | Buffer {
    if (enc === 'identity') return this.bytes;
    let p = this.coded.get(enc);
    if (!p) {
      p = compressOnce(enc, this.bytes);
      this.coded.set(enc, p);
      p.catch(() => this.coded.delete(enc));
    }
    return p;
  }
}

export class AssetManifest {
  private readonly byName = new Map<string, Asset>();
  private readonly byServed = new Map<string, Asset>();

  constructor(files: readonly AssetFile[]) {
    for (const f of files) {
      const asset = new Asset(f.name, readFileSync(f.path));
      this.byName.set(f.name, asset);
      this.byServed.set(asset.served, asset);
    }
  }

  /** The URL of the named asset; a template naming an unknown one is a bug, caught at its first render. */
  url(name: string): string {
    const a = this.byName.get(name);
    if (!a) throw new Error(`no asset named ${name}`);
    return a.url;
  }

  /** The asset served under `served`, if it is one of ours (an older hash is not). */
  find(served: string): Asset | undefined {
    return this.byServed.get(served);
  }
}
