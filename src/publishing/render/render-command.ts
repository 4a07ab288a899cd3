// Owns `pingd render`: render every document now (live documents, the current hour, finished hours not yet
// closed), or re-render one hourly archive with `--hour 2026-11-22T08`. Same code and lock as the server.
import type { ParseArgsConfig } from 'node:util';
import type { Config } from '../../platform/config.js';
import { type CommandDeps, schemaBehind } from '../../platform/command-deps.js';
import { parseHourArg } from '../documents/archive.js';
import { documentBase } from '../../platform/public-url.js';
import { publishedDocuments } from '../documents/published.js';
import { listingFor } from '../documents/listing.js';
import { Renderer } from './renderer.js';
import type { Db } from '../../platform/db/database.js';
import type { RenderReport } from './store-rendering.js';

export const RENDER_USAGE = 'pingd render [--hour YYYY-MM-DDTHH]';
export const RENDER_OPTIONS: ParseArgsConfig['options'] = { hour: { type: 'string' } };

/** How long `render` waits for a running server to finish its own render before giving up. */
const LOCK_WAIT_MS = 30_000;

export function describe(r: RenderReport): string {
  return `rendered ${r.path}${r.closed ? ' (closed)' : ''}: ${r.entries} entries, ${r.identityLength} bytes (gzip ${r.gzipLength}, br ${r.brLength}) in ${Math.round(r.ms)} ms`;
}

export async function renderCommand(
  values: Record<string, unknown>,
  config: Config,
  deps: CommandDeps<'OK' | 'FAILURE' | 'USAGE' | 'BUSY'>,
): Promise<number> {
  const { EXIT } = deps;
  let hourMs: number | null = null;
  if (values.hour !== undefined) {
    hourMs = parseHourArg(String(values.hour));
    if (hourMs === null) {
      deps.err(`pingd render: --hour must be a UTC hour like 2026-11-22T08, got ${JSON.stringify(values.hour)}\nUsage: ${RENDER_USAGE}`);
      return EXIT.USAGE;
    }
    if (hourMs > Date.now()) {
      deps.err(`pingd render: the hour ${String(values.hour)} has not begun yet`);
      return EXIT.USAGE;
    }
  }
  const db = await deps.openDb(config);
  try {
    const behind = await schemaBehind(db, 'render');
    if (behind) {
      deps.err(behind);
      return EXIT.FAILURE;
    }
    const renderer = commandRenderer(config, db, deps);
    const busy = () => {
      deps.err('pingd render: another instance is rendering (the render lock stayed busy for 30 s); try again later');
      return EXIT.BUSY;
    };
    if (hourMs !== null) {
      const at = hourMs;
      const r = await whenLocked(() => renderer.renderHour(at));
      if (r === null) return busy();
      deps.out(
        r === 'identical' ? `${new Date(at).toISOString().slice(0, 13)}: unchanged (same bytes as the published archive)` : describe(r),
      );
      return EXIT.OK;
    }
    const r = await whenLocked(() => renderer.tick({ force: true }));
    if (r === null) return busy();
    for (const x of r.rendered) deps.out(describe(x));
    for (const f of r.failed) deps.err(`failed ${f.path}: ${f.error}`);
    if (r.rendered.length === 0 && r.failed.length === 0) deps.out('nothing to render');
    return r.failed.length ? EXIT.FAILURE : EXIT.OK;
  } finally {
    await db.close();
  }
}

/** A renderer for a command: the same documents, lock and code as the server's, warnings to `deps.err`. */
export function commandRenderer(config: Config, db: Db, deps: Pick<CommandDeps, 'err'>): Renderer {
  const log = {
    info: () => undefined,
    warn: (o: object, m?: string) => deps.err(`warning: ${m ?? ''} ${JSON.stringify(o)}`),
    error: (o: object, m?: string) => deps.err(`error: ${m ?? ''} ${JSON.stringify(o)}`),
  };
  return new Renderer(publishedDocuments(listingFor(config.VERIFY_PINGS), documentBase(config.PUBLIC_URL, config.PORT)), {
    db,
    log,
    deltaWindowSec: config.PUBLISH_DELTA_WINDOW,
    publishDir: config.PUBLISH_DIR,
  });
}

/**
 * Runs `fn` (a render that answers null while another instance holds the render lock) until it gets the
 * lock, at most LOCK_WAIT_MS (a running server's own render ends well before); null when it never did.
 */
export async function whenLocked<T>(fn: () => Promise<T | null>): Promise<T | null> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    const r = await fn();
    if (r !== null) return r;
    if (Date.now() > deadline) return null;
    await new Promise((res) => setTimeout(res, 500));
  }
}
