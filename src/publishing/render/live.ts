// Owns a live document's render on a tick (changes.xml and every other document the registry lists): left
// for a later tick while a dear one may wait, unchanged while its fingerprint is, else its window read in
// one snapshot, dated after the previous rendering, and stored.
import type { Queryable } from '../../platform/db/database.js';
import type { LiveDocument, RenderWindow, TickShared } from '../documents/document.js';
import { currentRendering } from '../rendering-repository.js';
import { cursorFor, liveMayWait, THROTTLE_FROM_MS, wholeSecond, type RenderTime } from './render-time.js';
import { afterPrevious, storeRendering, withSnapshot, type RenderOutcome, type StoreOptions } from './store-rendering.js';

export interface LiveOptions extends StoreOptions {
  /** Seconds between scheduled ticks (RENDER_CRON's cadence): a throttled live document is rendered a tick early enough. */
  cadenceSec?: number;
}

export async function renderLive(
  opts: LiveOptions,
  q: Queryable,
  doc: LiveDocument,
  t: RenderTime,
  shared: TickShared,
  force: boolean,
): Promise<RenderOutcome> {
  const prev = await currentRendering(opts.db, doc.path);
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
    return storeRendering(
      opts,
      {
        path: doc.path,
        document: doc.name,
        contentType: doc.contentType,
        updatedMs: w.updatedMs,
        cursorUs: cursorFor(t, w.toUs),
        fingerprint,
        closed: false,
        deltas: doc.deltas,
        basesFromUs: w.fromUs,
      },
      prev,
      () => doc.source(q, w, shared),
    );
  });
}
