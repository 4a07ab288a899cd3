// Owns `pingd feeds show|reset <url>`: what pingd knows of a feed (by feed URL, or by a weblog's URL) and,
// for an operator, clearing its gone flag and backoff so the next ping of its weblog fetches it again.
import type { Config } from '../platform/config.js';
import type { CommandDeps } from '../platform/command-deps.js';
import { pendingMigrations } from '../platform/db/migrate.js';
import { feedByUrl, resetFeed, weblogView } from './feed-repository.js';
import { weblogJson } from './routes.js';
import { spamJson, spamOfWeblog } from '../spam/spam-repository.js';

export const FEEDS_OPTIONS = { json: { type: 'boolean' } } as const;

export const FEEDS_USAGE = `pingd feeds show <url> [--json]
pingd feeds reset <url>

  show     the feed's HTTP state (URL fetched, validators, last status and outcome, backoff, gone, hints,
           whether it names this server as its hub or cloud); <url> is a feed URL or a weblog's URL (then
           its weblog record, last verification and spam score too)
  reset    clear a feed's gone flag, failures and backoff (a 410 is not final if the publisher says so)

Exit codes: 0 done, 1 not found, 2 usage error.`;

export async function feedsCommand(
  values: Record<string, unknown>,
  positionals: string[],
  config: Config,
  deps: CommandDeps<'OK' | 'FAILURE' | 'USAGE'>,
): Promise<number> {
  const { EXIT } = deps;
  const [sub, url, ...extra] = positionals;
  if (!sub || !['show', 'reset'].includes(sub) || !url || extra.length > 0) {
    deps.err(
      `pingd feeds: ${!sub || ['show', 'reset'].includes(sub) ? 'a subcommand and one <url> are required' : `unknown subcommand ${JSON.stringify(sub)}`}\nUsage: ${FEEDS_USAGE}`,
    );
    return EXIT.USAGE;
  }
  const db = await deps.openDb(config);
  try {
    if ((await pendingMigrations(db)).length > 0) {
      deps.err('pingd feeds: the database schema is not up to date; run `pingd migrate` first');
      return EXIT.FAILURE;
    }
    if (sub === 'reset') {
      const n = await resetFeed(db, url);
      if (n === 0) {
        deps.err(`pingd feeds: no feed ${url}`);
        return EXIT.FAILURE;
      }
      deps.out(`reset ${url}: not gone, no failures, no backoff`);
      return EXIT.OK;
    }
    const feed = await feedByUrl(db, url);
    const weblog = feed ? undefined : await weblogView(db, url);
    if (!feed && !weblog) {
      deps.err(`pingd feeds: no feed or weblog ${url}`);
      return EXIT.FAILURE;
    }
    // A weblog's spam score too, when it has one (not under SPAM_FILTER=off).
    const spam = weblog ? await spamOfWeblog(db, weblog.id) : undefined;
    const out = feed
      ? { feed: { ...feed, seen: feed.seen.length } }
      : { ...weblogJson(weblog!), ...(spam ? { spam: spamJson(spam) } : {}) };
    if (values.json) deps.out(JSON.stringify(out, null, 2));
    else
      for (const [k, v] of Object.entries(out))
        deps.out(`${k}: ${typeof v === 'object' && v !== null ? JSON.stringify(v, null, 2) : String(v)}`);
    return EXIT.OK;
  } finally {
    await db.close();
  }
}
