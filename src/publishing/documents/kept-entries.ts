// Owns the compact form of what the render caches keep between renders (window-cache.ts, hour-cache.ts):
// each entry's keyset (id, time) in typed arrays and its element's escaped start as UTF-8 bytes in blocks, so
// the kept entries live off the JavaScript heap.
//
// Why: kept as objects holding a flat string each (~190 bytes an entry), 120,000 weblogs and 120,000 pings
// were ~46 MB of the server's heap after ten minutes at 200 new weblogs/s, and V8 lets the old generation grow
// to a multiple of what was live at its last major collection before the next one: the embedded process
// swung by ~90 MB between collections. Here an entry is its bytes plus 28 bytes of columns, and V8 only
// holds a handful of objects whatever the count.

/** One entry as it is read from the database and as tests write it. */
export interface KeptEntry {
  id: number;
  atUs: number;
  /** The element's escaped start (weblog-updates.ts's weblogStart). */
  start: string;
}

/** Bytes per block: entries are appended and never cross a block (a larger one gets a block of its own). */
const BLOCK_BYTES = 1 << 20;

/**
 * Escaped element starts appended into blocks. Bytes once written never change, so a list made earlier
 * reads the same text whatever is added later; what no list refers to any more is dropped by copying the
 * live entries into new blocks (KeptEntries.compacted).
 */
export class TextBlocks {
  private readonly blocks: Buffer[] = [];
  private used = BLOCK_BYTES;
  /** Bytes written so far. */
  bytes = 0;

  /** Appends `s` (`len` = its UTF-8 length) and returns where it is (the block's index × BLOCK_BYTES + the offset). */
  add(s: string, len: number): number {
    const ref = this.reserve(len);
    this.blocks[this.blocks.length - 1].write(s, ref % BLOCK_BYTES, len, 'utf8');
    return ref;
  }

  /** Appends a copy of the `len` bytes at `ref` in `from`. */
  addFrom(from: TextBlocks, ref: number, len: number): number {
    const to = this.reserve(len);
    const at = ref % BLOCK_BYTES;
    from.blocks[Math.floor(ref / BLOCK_BYTES)].copy(this.blocks[this.blocks.length - 1], to % BLOCK_BYTES, at, at + len);
    return to;
  }

  private reserve(len: number): number {
    if (this.used + len > BLOCK_BYTES) {
      // Not from Buffer's pool: a pooled Buffer would keep Node's 8 KB pool slabs alive.
      this.blocks.push(Buffer.allocUnsafeSlow(Math.max(BLOCK_BYTES, len)));
      this.used = 0;
    }
    const ref = (this.blocks.length - 1) * BLOCK_BYTES + this.used;
    this.used += len;
    this.bytes += len;
    return ref;
  }

  text(ref: number, len: number): string {
    const at = ref % BLOCK_BYTES;
    return this.blocks[Math.floor(ref / BLOCK_BYTES)].toString('utf8', at, at + len);
  }
}

/**
 * An ordered list of kept entries. Lists made from one another share their TextBlocks: a merge copies each
 * entry's 28 bytes of columns, not its text. A list is appended to, or read; `view` gives a part of it
 * without copying, valid until the list is appended to again.
 */
export class KeptEntries {
  private ids: Float64Array;
  private ats: Float64Array;
  private refs: Float64Array;
  private lens: Uint32Array;
  length: number;

  constructor(
    readonly text: TextBlocks = new TextBlocks(),
    capacity = 16,
    columns?: { ids: Float64Array; ats: Float64Array; refs: Float64Array; lens: Uint32Array },
  ) {
    this.ids = columns?.ids ?? new Float64Array(capacity);
    this.ats = columns?.ats ?? new Float64Array(capacity);
    this.refs = columns?.refs ?? new Float64Array(capacity);
    this.lens = columns?.lens ?? new Uint32Array(capacity);
    this.length = columns ? this.ids.length : 0;
  }

  /** A list of `entries` in their order, its text in new blocks (tests, and rows read from the database). */
  static of(entries: Iterable<KeptEntry>, text = new TextBlocks()): KeptEntries {
    const list = new KeptEntries(text);
    for (const e of entries) list.add(e);
    return list;
  }

  id(i: number): number {
    return this.ids[i];
  }

  atUs(i: number): number {
    return this.ats[i];
  }

  start(i: number): string {
    return this.text.text(this.refs[i], this.lens[i]);
  }

  /** Entry `i` against `e` in (time, id) order: negative when `i` comes first oldest first, 0 when equal. */
  compareAt(i: number, e: Pick<KeptEntry, 'id' | 'atUs'>): number {
    return this.ats[i] - e.atUs || this.ids[i] - e.id;
  }

  entry(i: number): KeptEntry {
    return { id: this.ids[i], atUs: this.ats[i], start: this.start(i) };
  }

  /** The bytes of text the entries refer to. */
  textBytes(): number {
    let n = 0;
    for (let i = 0; i < this.length; i++) n += this.lens[i];
    return n;
  }

  /** Appends an entry, writing its text. */
  add(e: KeptEntry): void {
    const len = Buffer.byteLength(e.start, 'utf8');
    this.place(this.length++, e.id, e.atUs, this.text.add(e.start, len), len);
  }

  /** Appends entry `i` of `from` (a list on the same text), copying its columns only. */
  pushFrom(from: KeptEntries, i: number): void {
    this.place(this.length++, from.ids[i], from.ats[i], from.refs[i], from.lens[i]);
  }

  /** Cuts the list to its first `n` entries (what follows is appended again). */
  truncate(n: number): void {
    this.length = Math.min(this.length, n);
  }

  /** Entries [from, to) as a list of their own, with their columns copied (the text is shared). */
  slice(from: number, to: number): KeptEntries {
    const [ids, ats, refs, lens] = [
      this.ids.slice(from, to),
      this.ats.slice(from, to),
      this.refs.slice(from, to),
      this.lens.slice(from, to),
    ];
    return new KeptEntries(this.text, 0, { ids, ats, refs, lens });
  }

  /** Entries [from, to) as a list of their own, sharing this one's columns and text. */
  view(from: number, to: number): KeptEntries {
    const [ids, ats, refs, lens] = [
      this.ids.subarray(from, to),
      this.ats.subarray(from, to),
      this.refs.subarray(from, to),
      this.lens.subarray(from, to),
    ];
    return new KeptEntries(this.text, 0, { ids, ats, refs, lens });
  }

  /** The same entries with their text copied into new blocks: drops the bytes of entries no list keeps. */
  compacted(): KeptEntries {
    const out = new KeptEntries(new TextBlocks(), Math.max(16, this.length));
    for (let i = 0; i < this.length; i++)
      out.place(out.length++, this.ids[i], this.ats[i], out.text.addFrom(this.text, this.refs[i], this.lens[i]), this.lens[i]);
    return out;
  }

  private place(i: number, id: number, atUs: number, ref: number, len: number): void {
    if (i >= this.ids.length) this.grow(Math.max(16, this.ids.length * 2));
    this.ids[i] = id;
    this.ats[i] = atUs;
    this.refs[i] = ref;
    this.lens[i] = len;
  }

  private grow(capacity: number): void {
    const grown = <T extends Float64Array | Uint32Array>(a: T, b: T): T => (b.set(a.subarray(0, this.length)), b);
    this.ids = grown(this.ids, new Float64Array(capacity));
    this.ats = grown(this.ats, new Float64Array(capacity));
    this.refs = grown(this.refs, new Float64Array(capacity));
    this.lens = grown(this.lens, new Uint32Array(capacity));
  }
}
