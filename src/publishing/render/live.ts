// Owns a live document's render on a tick (changes.xml and every other document the registry lists): left
// for a later tick while a dear one may wait, unchanged while its fingerprint is, else its window read in
// one snapshot, dated after the previous rendering, and stored; a paced document's render from kept entries
// goes on for a slice per tick (paced.ts) until it is stored.
import type { Queryable } from '../../platform/db/database.js';
import type { LiveDocument, RenderWindow, TickShared } from '../documents/document.js';
import { currentRendering } from '../rendering-repository.js';
import { cursorFor, liveMayWait, THROTTLE_FROM_MS, wholeSecond, type RenderTime } from './render-time.js';
import { afterPrevious, storeRendering, withSnapshot, type RenderOutcome, type StoreOptions } from './store-rendering.js';
import { PACED_FROM_ENTRIES, PacedRender } from './paced.js';

/** The paced renders under way, by path: each goes on at the next tick that renders its document. */
export type PacedRenders = Map<string, PacedRender>;

export interface LiveOptions extends StoreOptions {
  /** Seconds between scheduled ticks (RENDER_CRON's cadence): a throttled live document is rendered a tick early enough. */
  cadenceSec?: number;
  /** RENDER_SLICE_MS: a paced document's render time in one tick; undefined: rendered whole. */
  sliceMs?: number;
}

export async function renderLive(
  opts: LiveOptions,
  q: Queryable,
  doc: LiveDocument,
  t: RenderTime,
  shared: TickShared,
  force: boolean,
  paced?: PacedRenders,
): Promise<RenderOutcome> {
  const prev = await currentRendering(opts.db, doc.path);
  const running = paced?.get(doc.path);
  if (running) {
    // Another rendering was published since it began (another instance rendered) or everything is to be
    // rendered now: it is out of date.
    if (force || running.prevId !== prev?.id) {
      paced!.delete(doc.path);
      await running.abandon();
    } else return sliceOf(paced!, doc.path, running);
  }
  if (
    !force &&
    prev &&
    doc.maxAgeSec !== undefined &&
    liveMayWait(prev, t.clock.nowUs, doc.maxAgeSec, opts.cadenceSec ?? 0, THROTTLE_FROM_MS)
  )
    return 'throttled';
  const windowAt = (nowUs: number, updatedMs: number): RenderWindow => ({
    updatedMs,
    toUs: nowUs,
    fromUs: nowUs - doc.windowSec * 1_000_000,
  });
  return withSnapshot(opts.db, q, async () => {
    let w = windowAt(t.nowUs, wholeSecond(t.nowUs));
    let fingerprint = await doc.fingerprint(q, w, shared);
    if (!force && prev && prev.fingerprint === fingerprint) return 'unchanged';
    const later = await afterPrevious(prev, t);
    if (later) {
      w = windowAt(later.nowUs, later.updatedMs);
      fingerprint = await doc.fingerprint(q, w, shared);
    }
    const spec = {
      path: doc.path,
      document: doc.name,
      contentType: doc.contentType,
      updatedMs: w.updatedMs,
      cursorUs: cursorFor(t, w.toUs),
      fingerprint,
      closed: false,
      deltas: doc.deltas,
      basesFromUs: w.fromUs,
    };
    const sliceMs = opts.sliceMs;
    if (!doc.paced || !paced || force || sliceMs === undefined) return storeRendering(opts, spec, prev, () => doc.source(q, w, shared));
    const source = await doc.source(q, w, shared);
    // Read from the database, its pages need this tick's snapshot: rendered whole (and throttled).
    if (!source.inMemory || (source.entries ?? 0) < PACED_FROM_ENTRIES) return storeRendering(opts, spec, prev, async () => source);
    const job = new PacedRender(
      prev?.id,
      (pace, activeMs) => storeRendering(opts, spec, prev, async () => ({ ...source, pages: pace(source.pages) }), activeMs),
      pacedIdleMs(opts),
      sliceMs,
    );
    paced.set(doc.path, job);
    return sliceOf(paced, doc.path, job);
  });
}

/** A paced render not continued for this long (this instance stopped rendering) is given up. */
const pacedIdleMs = (opts: LiveOptions): number => Math.max(60_000, 3 * (opts.cadenceSec ?? 0) * 1000);

/** One slice of a paced render; forgotten once it ended (published, identical or failed). */
async function sliceOf(paced: PacedRenders, path: string, job: PacedRender): Promise<RenderOutcome> {
  try {
    return await job.slice();
  } finally {
    if (job.ended && paced.get(path) === job) paced.delete(path);
  }
}
