// Owns running the service as a process: build the app, listen, and shut down cleanly on SIGTERM/SIGINT
// (stop accepting, finish in-flight requests and the pending batch, stop the scheduled jobs after their
// current run, close the database) within SHUTDOWN_TIMEOUT_MS, then exit 0.
import { setFlagsFromString } from 'node:v8';
import { buildApp } from './app.js';
import { redactedConfig, type Config } from './platform/config.js';
import { logDestination } from './platform/log-destination.js';
import { redactUrl } from './platform/redact.js';
import { dotEnvRead } from './platform/dotenv.js';
import { assertPortFree } from './platform/http-server.js';
import { markServed } from './platform/db/which-database.js';

/** Longest the last log lines may take to reach stdout's reader on the way out (the reader may be gone). */
const LAST_LINES_MS = 1000;

/** The configuration as it may be logged: what the config table marks `secret` masked. */
export function safeConfig(config: Config): Record<string, unknown> {
  return redactedConfig(config);
}

export { redactUrl };

/**
 * HEAP_GROWTH_PERCENT unset, with the embedded database. V8 lets the old generation grow to a multiple of
 * what was live after a full collection before it runs the next: with the render caches off the heap, ~30 MB
 * were live and the heap swung to 85-90 MB between collections. At 20% the soak at 200 new weblogs/s peaked
 * at 324 MB instead of 383, the old generation stayed at ~29 MB, and the p99 held (39 -> 43 ms).
 * PostgreSQL keeps V8's own: it was not measured there (more frequent full collections cost the main
 * thread, which does intake's work), and that process is not held to a memory bound.
 */
export const EMBEDDED_HEAP_GROWTH_PERCENT = 20;

/** The heap growth this process runs with (0: V8's own). */
export function heapGrowthPercent(config: Pick<Config, 'HEAP_GROWTH_PERCENT' | 'DATABASE_URL'>): number {
  return config.HEAP_GROWTH_PERCENT ?? (config.DATABASE_URL ? 0 : EMBEDDED_HEAP_GROWTH_PERCENT);
}

export async function serve(config: Config, opts: { skipMigrations?: boolean } = {}): Promise<void> {
  // A V8 flag read at each full collection, so it can be set here rather than on node's command line.
  const growth = heapGrowthPercent(config);
  if (growth > 0) setFlagsFromString(`--heap-growing-percent=${growth}`);
  // Logs go through a bounded asynchronous buffer: a reader that stops reading (a full pipe, a stalled
  // log shipper) costs dropped lines, never a blocked event loop (which would also stop the shutdown bound).
  const logs = logDestination({ maxBytes: config.LOG_BUFFER_BYTES });
  const exit = (code: number) => void logs.flushWithin(LAST_LINES_MS).then(() => process.exit(code));
  // Before the slow work (a first start creates the embedded database: seconds, more on a small machine): a port already taken is
  // said at once, naming the setting, not after the database was made.
  await assertPortFree(config.PORT, config.HOST);
  const app = await buildApp({ config, skipMigrations: opts.skipMigrations, logDestination: logs });
  app.log.info({ config: safeConfig(config), pid: process.pid, node: process.version }, 'starting');
  const env = dotEnvRead();
  if (env) {
    app.log.info(
      { envFile: env.path, taken: env.taken, overridden: env.overridden },
      `read ${env.taken.length} setting${env.taken.length === 1 ? '' : 's'} from ${env.path}` +
        (env.overridden.length ? ` (${env.overridden.length} more it names were set in the environment, which wins)` : ''),
    );
  }
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    const started = performance.now();
    app.log.info({ signal, pendingPings: app.pings.pending }, 'shutting down');
    // The bound: whatever hangs (a client that never finishes its request, a database that never
    // answers), the process is gone before the orchestrator's own kill (compose: stop_grace_period).
    const timer = setTimeout(
      () => {
        app.log.error({ timeoutMs: config.SHUTDOWN_TIMEOUT_MS, droppedLogLines: logs.dropped() }, 'shutdown took too long; exiting');
        exit(1);
      },
      Math.max(0, config.SHUTDOWN_TIMEOUT_MS - LAST_LINES_MS),
    );
    timer.unref();
    let code = 0;
    try {
      // Fastify stops accepting, lets in-flight requests finish, then runs the plugins' onClose hooks:
      // jobs stop after their current run, the batcher commits what it holds, the database closes.
      await app.close();
      app.log.info({ ms: Math.round(performance.now() - started), droppedLogLines: logs.dropped() }, 'stopped');
    } catch (err) {
      app.log.error({ err }, 'error during shutdown');
      code = 1;
    }
    // Exit now rather than wait for stray handles (keep-alive sockets of outbound requests, timers):
    // everything that matters is committed and closed; the last log lines get a bounded moment.
    exit(code);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
  // Crash loudly, as one JSON line, and let the orchestrator restart us: acknowledged pings are already
  // committed, and an exception nobody caught leaves state nobody can vouch for.
  process.on('uncaughtException', (err) => {
    app.log.fatal({ err }, 'uncaught exception; exiting');
    exit(1);
  });
  process.on('unhandledRejection', (err) => {
    app.log.fatal({ err }, 'unhandled promise rejection; exiting');
    exit(1);
  });
  try {
    await app.listen({ port: config.PORT, host: config.HOST });
    const all = config.HOST === '0.0.0.0' || config.HOST === '::';
    const where = `http://${all ? 'localhost' : config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST}:${config.PORT}/`;
    app.log.info(
      {
        url: where,
        host: config.HOST,
        port: config.PORT,
        database: config.DATABASE_URL ? redactUrl(config.DATABASE_URL) : `embedded, in ${config.DATA_DIR}`,
      },
      `listening on ${where}${all ? ' (all interfaces)' : ''}`,
    );
    // Commands warn about an embedded directory without this mark: no server ever ran there.
    if (!config.DATABASE_URL) {
      try {
        markServed(config.DATA_DIR);
      } catch (err) {
        app.log.warn({ err: { message: (err as Error).message } }, 'could not mark the data directory as served');
      }
    }
  } catch (err) {
    // Port in use, no permission: close the database (and its lock) before reporting the failure.
    await app.close().catch(() => undefined);
    throw err;
  }
}
