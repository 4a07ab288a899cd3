// Owns the contract between a published document and the publishing machinery: what a live document
// declares (name, path, window, deltas), the time frame it is rendered for, and the head/entries/foot it
// produces. How documents are rendered, stored, served and delta-encoded is the same for all of them.
import type { Queryable } from '../../platform/db/database.js';

/** The time frame of one rendering. */
export interface RenderWindow {
  /** The document's `updated` time and Last-Modified: whole seconds, in ms. */
  updatedMs: number;
  /** Entries pinged in (fromUs, toUs] belong to the document (toUs = updatedMs in µs). */
  fromUs: number;
  toUs: number;
}

/** Values computed once per render tick and shared by the documents that need them. */
export interface TickShared {
  /** Total pings ever accepted (sum of weblogs.ping_count). */
  total(): Promise<number>;
}

export interface Entry {
  xml: string;
  /** The entry's time in µs; entries of a delta-capable document come newest first. */
  atUs: number;
  /**
   * How many entries `xml` holds (default 1). A document without deltas may hand over a whole page as one
   * string: fewer, short-lived objects keep the heap of a 1M-entry render small.
   */
  count?: number;
}

/** A document as its renderer produces it. */
export interface RenderSource {
  head: string;
  pages: AsyncIterable<Entry[]>;
  foot: string;
  /** How many entries are coming, when known: sizes the compressors (small documents compress harder). */
  entries?: number;
  /** Every entry names a different weblog: brotli needs no long window (codec.ts's brotliOptions). */
  distinct?: boolean;
  /** Its pages read nothing from the database (kept entries): the render may be spread over ticks (paced.ts). */
  inMemory?: boolean;
}

/**
 * A live document: re-rendered on every tick of RENDER_CRON when what it is made from changed, served with
 * conditional GET, pre-compressed codings and — when `deltas` — RFC 3229 feed deltas and `?since=`. A new
 * document is one entry in the registry (registry.ts).
 */
export interface LiveDocument {
  /** Metrics label and log name, e.g. 'changes.xml'. */
  name: string;
  /** Where it is served, e.g. '/changes.xml'. */
  path: string;
  contentType: string;
  /** Entries pinged in the last `windowSec` seconds. */
  windowSec: number;
  /** Serve RFC 3229 feed deltas (entries must then come newest first, each with its time). */
  deltas: boolean;
  /**
   * How old (now − `updated`) the served rendering may get while a dear render (a second or more) waits for
   * later ticks; undefined: rendered on every tick that changed it.
   */
  maxAgeSec?: number;
  /**
   * Its render is spread over ticks, a slice each (render/paced.ts), when its entries are kept in memory:
   * the dearest document, whose every byte changes at every render (changes.xml).
   */
  paced?: boolean;
  /**
   * A cheap signature of the state the document is rendered from: when it equals the current rendering's,
   * nothing is rendered (the bytes, ETag and Last-Modified stay, so pollers get 304).
   */
  fingerprint(q: Queryable, w: RenderWindow, shared: TickShared): Promise<string>;
  /** The document itself; pages are read lazily, so memory stays flat. */
  source(q: Queryable, w: RenderWindow, shared: TickShared): Promise<RenderSource>;
  /**
   * Drops whatever the document keeps between renders (a weblog was removed or restored: what its reads
   * list changed without a new ping); the next render reads its window anew.
   */
  forget?(): void;
}

/**
 * A page read started ahead of its turn. Its failure is the awaiter's; if the render stops first (another
 * failure) and nobody awaits it, the failure must not surface as an unhandled rejection.
 */
export function prefetch<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}
