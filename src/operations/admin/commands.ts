// Owns the `pingd` commands that work on a database (every one but `serve`) and running one from its argv:
// flags, usage and --help, the exit codes, output through an injected writer. The command line
// (src/cli.ts) runs them on a database it opens; the operator API (routes.ts) on the server's own.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Config } from '../../platform/config.js';
import { DatabaseError, type Db } from '../../platform/db/database.js';
import { migrate } from '../../platform/db/migrate.js';
import { PRUNE_OPTIONS, PRUNE_USAGE, pruneCommand } from '../retention/prune-command.js';
import { STATS_OPTIONS, STATS_USAGE, statsCommand } from '../stats/stats-command.js';
import { PUBLISHER_OPTIONS, PUBLISHER_USAGE, publisherCommand } from '../../intake/rss-ping/publisher-command.js';
import { RENDER_OPTIONS, RENDER_USAGE, renderCommand } from '../../publishing/render/render-command.js';
import { WEBLOGS_OPTIONS, WEBLOGS_USAGE, weblogsCommand } from '../../publishing/render/weblogs-command.js';
import { SPAM_OPTIONS, SPAM_USAGE, spamCommand } from '../../publishing/render/spam-command.js';
import { FEEDS_OPTIONS, FEEDS_USAGE, feedsCommand } from '../../verification/feeds-command.js';
import { RELAY_OPTIONS, RELAY_USAGE, relayCommand } from '../../push/relay/relay-command.js';

/** 0 ok, 1 failure, 2 usage error, 75 busy: try again later, 78 configuration error (docs/reference/cli.md). */
export const EXIT = { OK: 0, FAILURE: 1, USAGE: 2, BUSY: 75, CONFIG: 78 } as const;

/** Where a command writes: one line per call, the newline added (console.log and console.error, or a capture). */
export interface CommandOutput {
  out(text: string): void;
  err(text: string): void;
}

export interface CommandContext extends CommandOutput {
  /**
   * The database a command works on; the command closes it when done. `migrate` asks for one to apply
   * migrations on (on PostgreSQL: one connection without the usual statement timeout).
   */
  openDb(config: Config, purpose?: 'migrate'): Promise<Db>;
  /** The command runs in a running server (its admin socket, the operator API): the configuration is the server's. */
  inServer?: boolean;
}

export interface CommandArgs {
  values: Record<string, unknown>;
  positionals: string[];
}

export interface Command {
  summary: string;
  usage: string;
  options?: ParseArgsConfig['options'];
  run(args: CommandArgs, config: Config, ctx: CommandContext): Promise<number>;
}

const deps = (ctx: CommandContext) => ({ openDb: (c: Config) => ctx.openDb(c), out: ctx.out, err: ctx.err, EXIT, inServer: ctx.inServer });

export const DB_COMMANDS: Record<string, Command> = {
  migrate: {
    summary: 'Apply pending database migrations and exit.',
    usage: 'pingd migrate',
    async run(_a, config, ctx) {
      const db = await ctx.openDb(config, 'migrate');
      try {
        const applied = await migrate(db);
        ctx.out(applied.length ? `applied: ${applied.join(', ')}` : 'schema is up to date');
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
    run: ({ values }, config, ctx) => pruneCommand(values, config, deps(ctx)),
  },
  stats: {
    summary: 'Print totals, pings per hour for the last day and the most pinged weblogs.',
    usage: STATS_USAGE,
    options: STATS_OPTIONS,
    run: ({ values }, config, ctx) => statsCommand(values, config, deps(ctx)),
  },
  publisher: {
    summary: 'Register, list or remove RSS Ping publishers (publisher-side authentication).',
    usage: PUBLISHER_USAGE,
    options: PUBLISHER_OPTIONS,
    run: ({ values, positionals }, config, ctx) => publisherCommand(values, positionals, config, deps(ctx)),
  },
  render: {
    summary: 'Render changes.xml, shortChanges.xml and the hourly archives now (--hour: re-render one archive).',
    usage: RENDER_USAGE,
    options: RENDER_OPTIONS,
    run: ({ values }, config, ctx) => renderCommand(values, config, deps(ctx)),
  },
  weblogs: {
    summary: 'Remove an accepted weblog from changes.xml, the archives and /updates.xml (its pings stay stored), or restore it.',
    usage: WEBLOGS_USAGE,
    options: WEBLOGS_OPTIONS,
    run: ({ values, positionals }, config, ctx) => weblogsCommand(values, positionals, config, deps(ctx)),
  },
  spam: {
    summary: 'List spam scores and held weblogs, show why a weblog is held, or pin one: allow, deny, clear.',
    usage: SPAM_USAGE,
    options: SPAM_OPTIONS,
    run: ({ values, positionals }, config, ctx) => spamCommand(values, positionals, config, deps(ctx)),
  },
  feeds: {
    summary: 'Show what verification knows of a feed or weblog, or reset a gone or backed-off feed.',
    usage: FEEDS_USAGE,
    options: FEEDS_OPTIONS,
    run: ({ values, positionals }, config, ctx) => feedsCommand(values, positionals, config, deps(ctx)),
  },
  relay: {
    summary: "Show the relay to other ping services per target, or queue a target's dead letters again.",
    usage: RELAY_USAGE,
    options: RELAY_OPTIONS,
    run: ({ values, positionals }, config, ctx) => relayCommand(values, positionals, config, deps(ctx)),
  },
};

export function helpText(commands: Record<string, Command>): string {
  const lines = ['Usage: pingd <command> [options]', '', 'Commands:'];
  for (const [name, c] of Object.entries(commands)) lines.push(`  ${name.padEnd(10)} ${c.summary}`);
  lines.push('', 'Run `pingd <command> --help` for a command. Configuration comes from the environment (docs/reference/configuration.md).');
  return lines.join('\n');
}

/** A command line that names a command of the table and parsed against its flags. */
export interface Invocation {
  name: string;
  command: Command;
  args: CommandArgs;
}

/**
 * Reads argv against `commands`: an Invocation to run, or the exit code of what was answered already
 * (help: 0, or 2 without a command; an unknown command or flag: 2, with the usage on `io.err`).
 */
export function parseInvocation(argv: readonly string[], commands: Record<string, Command>, io: CommandOutput): Invocation | number {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    io.out(helpText(commands));
    return name ? EXIT.OK : EXIT.USAGE;
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) {
    io.err(`pingd: unknown command ${JSON.stringify(name)}\n\n${helpText(commands)}`);
    return EXIT.USAGE;
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: rest,
      options: { help: { type: 'boolean', short: 'h' }, ...(command.options ?? {}) },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    io.err(`pingd ${name}: ${(err as Error).message}\nUsage: ${command.usage}`);
    return EXIT.USAGE;
  }
  if ((parsed.values as Record<string, unknown>).help) {
    io.out(`${command.summary}\n\nUsage: ${command.usage}`);
    return EXIT.OK;
  }
  return { name, command, args: parsed as CommandArgs };
}

/**
 * Runs a parsed command; a failure it throws is reported on `ctx.err` and exits 1, or 75 (busy: try again
 * later) when the embedded database is held by another process, as the exit codes promise.
 */
export async function runInvocation(inv: Invocation, config: Config, ctx: CommandContext): Promise<number> {
  try {
    return await inv.command.run(inv.args, config, ctx);
  } catch (err) {
    ctx.err(`pingd ${inv.name}: ${(err as Error).message}`);
    return err instanceof DatabaseError && err.code === 'DB_LOCKED' ? EXIT.BUSY : EXIT.FAILURE;
  }
}
