// Owns `pingd weblogs remove URL` and `pingd weblogs restore URL`: taking an accepted weblog out of every
// published list (blocking only refuses its next pings) and putting it back. The weblog is marked, never
// deleted (its pings stay stored and acknowledged: removal-repository.ts), every renderer drops what it keeps
// (the removals watermark), and the live documents and each published archive hour holding its pings are
// rendered again now, with the same code and lock as `pingd render`.
import type { ParseArgsConfig } from 'node:util';
import type { Config } from '../../platform/config.js';
import { type CommandDeps, schemaBehind } from '../../platform/command-deps.js';
import type { Db } from '../../platform/db/database.js';
import { normalizeUrl, PingValidationError } from '../../intake/ping/validate.js';
import { markRemoved, pingHours, unmarkRemoved, weblogRemoval } from '../../intake/abuse/removal-repository.js';
import { archivePath } from '../documents/archive.js';
import { currentRendering, touchWatermark, WEBLOG_REMOVALS_WATERMARK } from '../rendering-repository.js';
import { commandRenderer, whenLocked } from './render-command.js';

export const WEBLOGS_USAGE = 'pingd weblogs remove URL | pingd weblogs restore URL';
export const WEBLOGS_OPTIONS: ParseArgsConfig['options'] = {};

type Deps = CommandDeps<'OK' | 'FAILURE' | 'USAGE' | 'BUSY'>;

export async function weblogsCommand(_values: Record<string, unknown>, positionals: string[], config: Config, deps: Deps): Promise<number> {
  const { EXIT } = deps;
  const [action, raw, ...rest] = positionals;
  if ((action !== 'remove' && action !== 'restore') || raw === undefined || rest.length > 0) {
    deps.err(`pingd weblogs: name remove or restore and one weblog URL\nUsage: ${WEBLOGS_USAGE}`);
    return EXIT.USAGE;
  }
  let url: string;
  try {
    url = normalizeUrl(raw);
  } catch (err) {
    if (!(err instanceof PingValidationError)) throw err;
    deps.err(`pingd weblogs: ${err.message}`);
    return EXIT.USAGE;
  }
  const db = await deps.openDb(config);
  try {
    const behind = await schemaBehind(db, 'weblogs');
    if (behind) {
      deps.err(behind);
      return EXIT.FAILURE;
    }
    const w = await weblogRemoval(db, url);
    if (!w) {
      deps.err(`pingd weblogs: pingd has no ping from ${url}`);
      return EXIT.FAILURE;
    }
    if (action === 'restore' && w.removedAt === null) {
      deps.out(`${url} is not removed: nothing to restore`);
      return EXIT.OK;
    }
    // The marker and the watermark in one transaction: a renderer that sees the one sees the other.
    await db.transaction(async (tx) => {
      if (action === 'remove') await markRemoved(tx, w.weblogId, url);
      else await unmarkRemoved(tx, w.weblogId);
      await touchWatermark(tx, WEBLOG_REMOVALS_WATERMARK);
    });
    if (action === 'restore') deps.out(`restored ${url}: listed again`);
    else if (w.removedAt !== null) deps.out(`${url} was removed already: rendering its documents again`);
    else deps.out(`removed ${url}: its ${w.pingCount} accepted ping(s) stay stored; it is listed nowhere until \`pingd weblogs restore\``);
    return await renderAgain(config, db, w.weblogId, deps);
  } finally {
    await db.close();
  }
}

/**
 * Renders the live documents and every published archive of an hour holding the weblog's pings (also for
 * `pingd spam`, whose pins list or unlist a weblog the same way). `command` names the command in messages.
 */
export async function renderAgain(config: Config, db: Db, weblogId: number, deps: Deps, command = 'pingd weblogs'): Promise<number> {
  const { EXIT } = deps;
  // Only hours whose archive is published: an hour not rendered yet lists what the reads list when it is,
  // and an archive deleted by ARCHIVE_RETENTION_DAYS is not made anew.
  const hours: number[] = [];
  for (const h of await pingHours(db, weblogId)) if (await currentRendering(db, archivePath(h))) hours.push(h);
  const renderer = commandRenderer(config, db, deps);
  const busy = () => {
    deps.err(
      `${command}: another instance is rendering (the render lock stayed busy for 30 s); the change is stored, run the command again to render its documents`,
    );
    return EXIT.BUSY;
  };
  const live = await whenLocked(() => renderer.tick({ force: true, liveOnly: true }));
  if (live === null) return busy();
  let failed = live.failed.length > 0;
  for (const f of live.failed) deps.err(`failed ${f.path}: ${f.error}`);
  if (live.rendered.length > 0) deps.out(`rendered ${live.rendered.map((r) => r.path).join(', ')}`);
  for (const h of hours) {
    const path = archivePath(h);
    try {
      const r = await whenLocked(() => renderer.renderHour(h));
      if (r === null) return busy();
      deps.out(r === 'identical' ? `${path}: unchanged` : `rendered ${path}${r.closed ? ' (closed)' : ''}`);
    } catch (err) {
      failed = true;
      deps.err(`failed ${path}: ${(err as Error).message}`);
    }
  }
  return failed ? EXIT.FAILURE : EXIT.OK;
}
