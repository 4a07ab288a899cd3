// Owns the `pingd` command line: parses a subcommand and its flags, runs it, returns an exit code
// (0 ok, 1 failure, 2 usage error, 75 busy: try again later, 78 configuration error) that scripts can rely on.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ConfigError, loadConfig, type Config } from './platform/config.js';
import { openDatabase } from './platform/db/database.js';
import { migrate, MIGRATION_TIMEOUT_MS } from './platform/db/migrate.js';
import { PRUNE_OPTIONS, PRUNE_USAGE, pruneCommand } from './operations/retention/prune-command.js';
import { STATS_OPTIONS, STATS_USAGE, statsCommand } from './operations/stats/stats-command.js';
import { PUBLISHER_OPTIONS, PUBLISHER_USAGE, publisherCommand } from './intake/rss-ping/publisher-command.js';
import { RENDER_OPTIONS, RENDER_USAGE, renderCommand } from './publishing/render/render-command.js';
import { FEEDS_OPTIONS, FEEDS_USAGE, feedsCommand } from './verification/feeds-command.js';
import { RELAY_OPTIONS, RELAY_USAGE, relayCommand } from './push/relay/relay-command.js';

export const EXIT = { OK: 0, FAILURE: 1, USAGE: 2, BUSY: 75, CONFIG: 78 } as const;

interface Command {
  summary: string;
  usage: string;
  options?: ParseArgsConfig['options'];
  run(args: { values: Record<string, unknown>; positionals: string[] }, config: Config): Promise<number>;
}

export function openDb(config: Config) {
  return openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR, poolMax: 2, timeoutMs: config.DB_TIMEOUT_MS, embeddedCacheMb: config.EMBEDDED_CACHE_MB });
}

export const COMMANDS: Record<string, Command> = {
  serve: {
    summary: 'Run the ping server (applies migrations first).',
    usage: 'pingd serve [--no-migrate]',
    options: { 'no-migrate': { type: 'boolean' } },
    async run({ values }, config) {
      const { serve } = await import('./server.js');
      await serve(config, { skipMigrations: Boolean(values['no-migrate']) });
      return -1; // keeps running; the process exits on a signal
    },
  },
  migrate: {
    summary: 'Apply pending database migrations and exit.',
    usage: 'pingd migrate',
    async run(_a, config) {
      const db = await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR, poolMax: 1, timeoutMs: MIGRATION_TIMEOUT_MS, embeddedCacheMb: config.EMBEDDED_CACHE_MB });
      try {
        const applied = await migrate(db);
        console.log(applied.length ? `applied: ${applied.join(', ')}` : 'schema is up to date');
        return EXIT.OK;
      } finally {
        await db.close();
      }
    },
  },
  prune: {
    summary: 'Delete raw pings (and hourly archives) older than the retention limits, now.',
    usage: PRUNE_USAGE,
    options: PRUNE_OPTIONS,
    run: ({ values }, config) => pruneCommand(values, config, { openDb, EXIT }),
  },
  stats: {
    summary: 'Print totals, pings per hour for the last day and the most pinged weblogs.',
    usage: STATS_USAGE,
    options: STATS_OPTIONS,
    run: ({ values }, config) => statsCommand(values, config, { openDb, EXIT }),
  },
  publisher: {
    summary: 'Register, list or remove RSS Ping publishers (publisher-side authentication).',
    usage: PUBLISHER_USAGE,
    options: PUBLISHER_OPTIONS,
    run: ({ values, positionals }, config) => publisherCommand(values, positionals, config, { openDb, EXIT }),
  },
  render: {
    summary: 'Render changes.xml, shortChanges.xml and the hourly archives now (--hour: re-render one archive).',
    usage: RENDER_USAGE,
    options: RENDER_OPTIONS,
    run: ({ values }, config) => renderCommand(values, config, { openDb, EXIT }),
  },
  feeds: {
    summary: 'Show what verification knows of a feed or weblog, or reset a gone or backed-off feed.',
    usage: FEEDS_USAGE,
    options: FEEDS_OPTIONS,
    run: ({ values, positionals }, config) => feedsCommand(values, positionals, config, { openDb, EXIT }),
  },
  relay: {
    summary: 'Show the relay to other ping services per target, or queue a target\'s dead letters again.',
    usage: RELAY_USAGE,
    options: RELAY_OPTIONS,
    run: ({ values, positionals }, config) => relayCommand(values, positionals, config, { openDb, EXIT }),
  },
};

function help(): string {
  const lines = ['Usage: pingd <command> [options]', '', 'Commands:'];
  for (const [name, c] of Object.entries(COMMANDS)) lines.push(`  ${name.padEnd(10)} ${c.summary}`);
  lines.push('', 'Run `pingd <command> --help` for a command. Configuration comes from the environment (see README).');
  return lines.join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(help());
    return name ? EXIT.OK : EXIT.USAGE;
  }
  const cmd = COMMANDS[name];
  if (!cmd) {
    console.error(`pingd: unknown command ${JSON.stringify(name)}\n\n${help()}`);
    return EXIT.USAGE;
  }
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: { help: { type: 'boolean', short: 'h' }, ...(cmd.options ?? {}) }, allowPositionals: true, strict: true });
  } catch (err) {
    console.error(`pingd ${name}: ${(err as Error).message}\nUsage: ${cmd.usage}`);
    return EXIT.USAGE;
  }
  if ((parsed.values as Record<string, unknown>).help) {
    console.log(`${cmd.summary}\n\nUsage: ${cmd.usage}`);
    return EXIT.OK;
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`pingd: configuration error: ${err.message}`);
      return EXIT.CONFIG;
    }
    throw err;
  }
  try {
    return await cmd.run(parsed as { values: Record<string, unknown>; positionals: string[] }, config);
  } catch (err) {
    console.error(`pingd ${name}: ${(err as Error).message}`);
    return EXIT.FAILURE;
  }
}

// Run directly (`node --import tsx src/cli.ts …`); bin/pingd.js imports main() instead.
if (import.meta.url === `file://${process.argv[1]}`) {
  const code = await main(process.argv.slice(2));
  if (code >= 0) process.exitCode = code;
}
