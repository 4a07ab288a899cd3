// Owns running the service as a process: build the app, listen, and shut down cleanly on SIGTERM/SIGINT
// (stop accepting, finish in-flight requests and the pending batch, close the database) within a bound.
import { buildApp } from './app.js';
import type { Config } from './config.js';

export const SHUTDOWN_TIMEOUT_MS = 25_000;

export async function serve(config: Config, opts: { skipMigrations?: boolean } = {}): Promise<void> {
  const app = await buildApp({ config, skipMigrations: opts.skipMigrations });
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      app.log.error('shutdown took too long; exiting');
      process.exit(1);
    }, SHUTDOWN_TIMEOUT_MS);
    timer.unref();
    try {
      await app.close();
      app.log.info('stopped');
      process.exitCode = 0;
    } catch (err) {
      app.log.error({ err }, 'error during shutdown');
      process.exitCode = 1;
    }
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
  await app.listen({ port: config.PORT, host: config.HOST });
}
