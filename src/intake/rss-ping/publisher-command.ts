// Owns `pingd publisher add|list|remove`: registering the publishers allowed to use publisher-side
// authentication (RSS Ping). A password is generated and printed when none is given; it is stored sealed
// under RSSPING_SECRET (see secret-box.ts for why it is encrypted rather than hashed).
import type { Config } from '../../platform/config.js';
import type { CommandDeps } from '../../platform/command-deps.js';
import { pendingMigrations } from '../../platform/db/migrate.js';
import { normalizeUrl, PingValidationError } from '../ping/validate.js';
import { addPublisher, listPublishers, removePublisher } from './publisher-repository.js';
import { deriveKey, generatePassword, sealPassword } from './secret-box.js';

export const PUBLISHER_OPTIONS = {
  password: { type: 'string' },
  replace: { type: 'boolean' },
  json: { type: 'boolean' },
} as const;

export const PUBLISHER_USAGE = `pingd publisher add <site_uri> [--password <pw>] [--replace] [--json]
pingd publisher list [--json]
pingd publisher remove <site_uri>

  add      register a publisher for publisher-side authentication; without --password a password is
           generated and printed (once). Needs RSSPING_SECRET. --replace sets a new password for a
           publisher that exists.
  list     the registered publishers and how many unexpired tokens each holds
  remove   unregister a publisher (its outstanding tokens stop working)

Exit codes: 0 done, 1 failure (e.g. already registered, not found), 2 usage error, 78 RSSPING_SECRET unset.`;

export const MIN_PASSWORD_LENGTH = 12;
export const MAX_PASSWORD_LENGTH = 1024;

/** `publisher add` without the key (tests compare them whole). */
export const PUBLISHER_REFUSALS = {
  noSecret:
    'pingd publisher: RSSPING_SECRET is not set; publisher passwords are encrypted with it (e.g. RSSPING_SECRET=$(openssl rand -hex 32); see docs/reference/rss-ping.md).',
  serverNoSecret:
    'pingd publisher: the running server has no RSSPING_SECRET: set it in its environment and restart it (publisher passwords are encrypted with it; see docs/reference/rss-ping.md). The command ran in the server, so the RSSPING_SECRET of this shell is not used.',
} as const;

const usage = (msg: string) => `pingd publisher: ${msg}\nUsage: ${PUBLISHER_USAGE}`;

export async function publisherCommand(
  values: Record<string, unknown>,
  positionals: string[],
  config: Config,
  deps: CommandDeps<'OK' | 'FAILURE' | 'USAGE' | 'CONFIG'>,
): Promise<number> {
  const { EXIT } = deps;
  const [sub, site, ...extra] = positionals;
  if (!sub || !['add', 'list', 'remove'].includes(sub)) {
    deps.err(usage(sub ? `unknown subcommand ${JSON.stringify(sub)}` : 'a subcommand is required'));
    return EXIT.USAGE;
  }
  const wantsSite = sub !== 'list';
  if ((wantsSite && (!site || extra.length > 0)) || (!wantsSite && site !== undefined)) {
    deps.err(usage(wantsSite ? `${sub} takes exactly one <site_uri>` : 'list takes no arguments'));
    return EXIT.USAGE;
  }
  let siteUrl = '';
  if (wantsSite) {
    try {
      siteUrl = normalizeUrl(site, 'site_uri');
    } catch (err) {
      if (err instanceof PingValidationError) {
        deps.err(usage(err.message));
        return EXIT.USAGE;
      }
      throw err;
    }
  }
  const given = values.password as string | undefined;
  if (sub === 'add') {
    if (!config.RSSPING_SECRET) {
      // In a server the operator's own RSSPING_SECRET does not count: they set it and were told it was not.
      deps.err(deps.inServer ? PUBLISHER_REFUSALS.serverNoSecret : PUBLISHER_REFUSALS.noSecret);
      return EXIT.CONFIG;
    }
    if (given !== undefined && (given.length < MIN_PASSWORD_LENGTH || given.length > MAX_PASSWORD_LENGTH)) {
      deps.err(usage(`--password must be ${MIN_PASSWORD_LENGTH} to ${MAX_PASSWORD_LENGTH} characters (omit it to have one generated)`));
      return EXIT.USAGE;
    }
  } else if (given !== undefined || values.replace) {
    deps.err(usage(`--password and --replace belong to add`));
    return EXIT.USAGE;
  }

  const db = await deps.openDb(config);
  try {
    if ((await pendingMigrations(db)).some((m) => m.startsWith('003_'))) {
      deps.err('pingd publisher: the database schema is not up to date; run `pingd migrate` first.');
      return EXIT.FAILURE;
    }
    if (sub === 'add') {
      const password = given ?? generatePassword();
      const sealed = sealPassword(deriveKey(config.RSSPING_SECRET!), siteUrl, password);
      const r = await addPublisher(db, siteUrl, sealed, Boolean(values.replace));
      if (!r) {
        deps.err(`pingd publisher: ${siteUrl} is already registered (use --replace to set a new password).`);
        return EXIT.FAILURE;
      }
      const shown = given === undefined ? password : undefined;
      if (values.json) deps.out(JSON.stringify({ site_uri: siteUrl, replaced: r.replaced, ...(shown ? { password: shown } : {}) }));
      else {
        deps.out(`${r.replaced ? 'password replaced for' : 'publisher added:'} ${siteUrl}`);
        if (shown)
          deps.out(`password: ${shown}\n(shown once: give it to the publisher; it signs each ping as sha1(site_uri + password + token))`);
      }
      return EXIT.OK;
    }
    if (sub === 'remove') {
      if (!(await removePublisher(db, siteUrl))) {
        deps.err(`pingd publisher: ${siteUrl} is not registered.`);
        return EXIT.FAILURE;
      }
      deps.out(`publisher removed: ${siteUrl}`);
      return EXIT.OK;
    }
    const rows = await listPublishers(db);
    if (values.json) {
      deps.out(
        JSON.stringify(
          rows.map((r) => ({
            site_uri: r.site_url,
            created_at: new Date(r.created_at).toISOString(),
            updated_at: new Date(r.updated_at).toISOString(),
            live_tokens: r.live_tokens,
          })),
        ),
      );
    } else if (rows.length === 0) {
      deps.out('no publishers registered');
    } else {
      for (const r of rows) deps.out(`${r.site_url}\tadded ${new Date(r.created_at).toISOString()}\t${r.live_tokens} live token(s)`);
    }
    return EXIT.OK;
  } finally {
    await db.close();
  }
}
