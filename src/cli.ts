// Owns the `pingd` command line: parses a subcommand and its flags, runs it (in the running server, through
// its admin socket, when one holds the embedded database), returns an exit code (0 ok, 1 failure, 2 usage
// error, 75 busy: try again later, 78 configuration error) that scripts can rely on.
import { ConfigError, loadConfig, type Config } from './platform/config.js';
import { openDatabase } from './platform/db/database.js';
import { MIGRATION_TIMEOUT_MS } from './platform/db/migrate.js';
import { loadDotEnv } from './platform/dotenv.js';
import { DB_COMMANDS, EXIT, parseInvocation, runInvocation, type Command, type CommandOutput } from './operations/admin/commands.js';
import { runOnServer } from './operations/admin/socket-client.js';
import { databaseLine, unservedWarning } from './platform/db/which-database.js';

export { EXIT };

/** The database a command opens itself (no server holds it, or PostgreSQL); `migrate` gets its own timeout. */
export function openDb(config: Config, purpose?: 'migrate') {
  const migration = purpose === 'migrate';
  return openDatabase({
    databaseUrl: config.DATABASE_URL,
    dataDir: config.DATA_DIR,
    poolMax: migration ? 1 : 2,
    timeoutMs: migration ? MIGRATION_TIMEOUT_MS : config.DB_TIMEOUT_MS,
    embeddedCacheMb: config.EMBEDDED_CACHE_MB,
  });
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
  ...DB_COMMANDS,
};

/** Looked up at each line, so a caller that replaces console.log (a test) sees the output. */
const consoleOutput: CommandOutput = {
  out: (text) => console.log(text),
  err: (text) => console.error(text),
};

/** Captured output (lines, each ending in a newline) written again through `write`, byte for byte. */
function replay(captured: string, write: (text: string) => void): void {
  if (captured !== '') write(captured.endsWith('\n') ? captured.slice(0, -1) : captured);
}

export async function main(argv: string[]): Promise<number> {
  const inv = parseInvocation(argv, COMMANDS, consoleOutput);
  if (typeof inv === 'number') return inv;
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
  // On the embedded database a running server holds the directory: the command runs in it, through its
  // admin socket. A socket nobody answers on (a crashed server's) is passed over.
  if (inv.name !== 'serve') {
    try {
      const remote = await runOnServer(argv, config);
      if (remote) {
        replay(remote.stdout, consoleOutput.out);
        replay(remote.stderr, consoleOutput.err);
        return remote.code;
      }
    } catch (err) {
      console.error(`pingd ${inv.name}: ${(err as Error).message}`);
      return EXIT.FAILURE;
    }
  }
  // Said on stderr (stdout stays a script's): which database the command opened, and a warning for an
  // embedded directory no server has run on (a shell without the server's DATABASE_URL).
  return runInvocation(inv, config, {
    ...consoleOutput,
    openDb: (c, purpose) => {
      consoleOutput.err(databaseLine(c));
      const warning = unservedWarning(c);
      if (warning) consoleOutput.err(warning);
      return openDb(c, purpose);
    },
  });
}

export { loadDotEnv };

// Run directly (`node --import tsx src/cli.ts …`); bin/pingd.js imports main() instead.
if (import.meta.url === `file://${process.argv[1]}`) {
  loadDotEnv();
  const code = await main(process.argv.slice(2));
  if (code >= 0) process.exitCode = code;
}
