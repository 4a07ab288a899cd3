// Owns storing one rendering: the delta bases it is cut against, its row, the pipeline that writes its
// bytes (codings, deltas, files under PUBLISH_DIR), then making it the path's current rendering, or
// discarding it when its bytes are the current rendering's; and what a stored rendering reports. Also the
// two steps every document's render takes before it stores: its reads in one snapshot, and its date after
// the previous rendering's.
import type { Db, Queryable } from '../../platform/db/database.js';
import { beginSnapshot, endSnapshot } from '../../platform/db/clock.js';
import type { RenderSource } from '../documents/document.js';
import { completeRendering, createRendering, discardRendering, recentRenderings, type RenderingMeta } from '../rendering-repository.js';
import { runPipeline, type PipelineResult } from './pipeline.js';
import { nextSecond, type RenderTime } from './render-time.js';

/** Most delta bases kept per rendering (bounds the flush points written). */
export const MAX_DELTA_BASES = 256;

export interface RenderReport {
  path: string;
  document: string;
  id: number;
  entries: number;
  closed: boolean;
  identityLength: number;
  gzipLength: number;
  brLength: number;
  ms: number;
}

/** What rendering one document came to: a new rendering, or why none was stored. */
export type RenderOutcome = RenderReport | 'unchanged' | 'identical' | 'throttled' | 'in_progress';

export interface StoreOptions {
  db: Db;
  /** Validators naming a rendering older than this get the full document, not a delta. */
  deltaWindowSec: number;
  publishDir?: string;
  /** Told of every path that got a new current rendering (the reader forgets what it remembered of it). */
  onPublished?: (path: string) => void;
}

export type RenderingSpec = Pick<
  RenderingMeta,
  'path' | 'document' | 'contentType' | 'updatedMs' | 'cursorUs' | 'fingerprint' | 'closed'
> & {
  deltas: boolean;
  /** Bases older than this get no delta: every entry of the window is newer, so it would be the whole document. */
  basesFromUs?: number;
  hourStartMs?: number;
};

/**
 * What a rendering's bytes come from: a document run through the pipeline, or bytes a producer stores
 * itself (the open hour's appended stream: open-hour-stream.ts).
 */
export type RenderingBytes = (() => Promise<RenderSource>) | { store(q: Queryable, renderingId: number): Promise<PipelineResult> };

export async function storeRendering(
  opts: StoreOptions,
  spec: RenderingSpec,
  prev: RenderingMeta | undefined,
  bytes: RenderingBytes,
  /** The time the render took, when it is not the time since it began (a paced render: its slices'). */
  activeMs?: () => number,
): Promise<RenderOutcome> {
  const db = opts.db;
  const started = performance.now();
  // A delta from a base older than the window is the whole document, a second compression of it for
  // nothing (a 5-minute shortChanges.xml with a 15-minute PUBLISH_DELTA_WINDOW ran its delta streams to the
  // end on every render): such validators get the full 200, as after PUBLISH_DELTA_WINDOW.
  const oldestBaseUs = Math.max(spec.cursorUs - opts.deltaWindowSec * 1_000_000, spec.basesFromUs ?? -Infinity);
  const bases = spec.deltas ? await recentRenderings(db, spec.path, oldestBaseUs, MAX_DELTA_BASES - 1) : [];
  const id = await createRendering(db, spec);
  if (spec.deltas) {
    // The rendering is a base for itself: `?since=` its own cursor gives what came in while rendering.
    bases.push({ id, cursorUs: spec.cursorUs });
    bases.sort((a, b) => b.cursorUs - a.cursorUs || b.id - a.id);
  }
  try {
    const result =
      typeof bytes === 'function'
        ? await runPipeline(await bytes(), {
            q: db,
            renderingId: id,
            expectedBytes: prev?.identityLength ?? 0,
            bases,
            publishDir: opts.publishDir,
            relPath: spec.path.slice(1),
          })
        : await bytes.store(db, id);
    if (prev && prev.sha256 === result.sha256 && prev.closed === spec.closed) {
      // Same bytes (a closed hour rendered again): keep the current rendering and its validators.
      result.discardFiles();
      await discardRendering(db, id);
      return 'identical';
    }
    const ms = activeMs ? activeMs() : performance.now() - started;
    await completeRendering(db, {
      id,
      path: spec.path,
      document: spec.document,
      closed: spec.closed,
      renderMs: ms,
      hourStartMs: spec.hourStartMs,
      ...result,
    });
    result.commitFiles();
    opts.onPublished?.(spec.path);
    return {
      path: spec.path,
      document: spec.document,
      id,
      entries: result.entries,
      closed: spec.closed,
      identityLength: result.identityLength,
      gzipLength: result.gzipLength,
      brLength: result.brLength,
      ms,
    };
  } catch (err) {
    await discardRendering(db, id).catch(() => undefined);
    throw err;
  }
}

/** On the server, a document's reads share one snapshot; the embedded database has one session anyway. */
export async function withSnapshot<T>(db: Db, q: Queryable, fn: () => Promise<T>): Promise<T> {
  if (db.kind !== 'postgres') return fn();
  await beginSnapshot(q);
  let ok = false;
  try {
    const v = await fn();
    ok = true;
    return v;
  } finally {
    await endSnapshot(q, ok);
  }
}

/** The next second after the previous rendering's, waited for when it is this one (render-time.ts). */
export async function afterPrevious(prev: RenderingMeta | undefined, t: RenderTime): Promise<{ nowUs: number; updatedMs: number } | null> {
  const later = nextSecond(prev, t);
  if (later?.waitMs) await new Promise((r) => setTimeout(r, later.waitMs));
  return later;
}
