// Owns the web pages' static files: each is served at /assets/<name>.<hash>.<ext> (the hash is of its bytes),
// so a page names the exact version it was made with and the file can be cached for a year.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { basename, dirname, extname } from 'node:path';

export interface AssetFile {
  /** The name pages ask for (e.g. "site.css"). */
  name: string;
  /** Where the bytes are. */
  path: string;
}

export interface Asset {
  /** The URL path a page links to. */
  url: string;
  /** The served file name (under /assets/). */
  served: string;
  dir: string;
  file: string;
}

export class AssetManifest {
  private readonly byName = new Map<string, Asset>();
  private readonly byServed = new Map<string, Asset>();

  constructor(files: readonly AssetFile[]) {
    for (const f of files) {
      // 12 hex characters of SHA-256: a new version never collides with a cached one.
      const hash = createHash('sha256').update(readFileSync(f.path)).digest('hex').slice(0, 12);
      const ext = extname(f.name);
      const served = `${f.name.slice(0, f.name.length - ext.length)}.${hash}${ext}`;
      const asset = { url: `/assets/${served}`, served, dir: dirname(f.path), file: basename(f.path) };
      this.byName.set(f.name, asset);
      this.byServed.set(served, asset);
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
