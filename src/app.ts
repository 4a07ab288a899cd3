// Owns assembling the service: plugins and routes on one Fastify instance. It never listens; the CLI's
// `serve` (src/server.ts) does, and tests build it in-process.
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { loadConfig, type Config } from './config.js';
import dbPlugin from './db/plugin.js';
import metricsPlugin from './metrics/plugin.js';
import pingPlugin from './ping/plugin.js';
import xmlrpcRoutes from './xmlrpc/routes.js';
import httpPingRoutes from './http-ping/routes.js';

export interface BuildOptions {
  config?: Config;
  logger?: FastifyServerOptions['logger'];
  skipMigrations?: boolean;
}

export const REDACT = ['req.headers.authorization', 'req.headers.cookie', 'req.headers["x-admin-token"]'];

export async function buildApp(opts: BuildOptions = {}): Promise<FastifyInstance> {
  const config = opts.config ?? loadConfig();
  const app = Fastify({
    logger: opts.logger ?? { level: config.LOG_LEVEL, redact: REDACT },
    trustProxy: config.TRUST_PROXY,
    bodyLimit: config.BODY_LIMIT,
    // Slow clients are cut off instead of holding a socket forever.
    requestTimeout: 30_000,
    connectionTimeout: 60_000,
    keepAliveTimeout: 65_000,
    // Requests that arrive while closing reach the handlers, which refuse pings with a clear flerror.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    // Per-request lines would double the cost of a ping at info level; they appear at debug.
    logController: new LogController({ disableRequestLogging: config.LOG_LEVEL !== 'debug' && config.LOG_LEVEL !== 'trace' }),
  });
  app.decorate('config', config);
  await app.register(metricsPlugin);
  await app.register(dbPlugin, { config, skipMigrations: opts.skipMigrations });
  await app.register(pingPlugin, { config });
  await app.register(xmlrpcRoutes, { config });
  await app.register(httpPingRoutes);
  return app;
}

declare module 'fastify' {
  interface FastifyInstance {
    config: Config;
  }
}
