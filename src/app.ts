// Owns assembling the service: plugins and routes on one Fastify instance. It never listens; the CLI's
// `serve` (src/server.ts) does, and tests build it in-process.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'fastify/types/logger.js';
import { loadConfig, type Config, type TrustProxy } from './platform/config.js';
import dbPlugin, { prepareDatabase } from './platform/db/plugin.js';
import metricsPlugin, { everyRoute } from './operations/metrics/plugin.js';
import type { LogDestination } from './platform/log-destination.js';
import intakeMetricsPlugin from './operations/metrics/intake-metrics.js';
import pingPlugin from './intake/ping/plugin.js';
import xmlrpcRoutes from './intake/xmlrpc/routes.js';
import xmlrpcMethodsPlugin from './intake/xmlrpc/method-table.js';
import publishingPlugin from './publishing/plugin.js';
import abusePlugin from './intake/abuse/plugin.js';
import healthPlugin from './operations/health/plugin.js';
import { requestIdGenerator, setRequestIdHeader } from './platform/request-id.js';
import { EarlyAnswers, closeTricklingRequests, httpServerFactory } from './platform/http-server.js';
import { rootErrorHandler } from './platform/error-handler.js';

/**
 * How long a request still sending its body at shutdown may go on: a ping's body (BODY_LIMIT, 64 KiB)
 * arrives in milliseconds from an honest client, and the whole shutdown has SHUTDOWN_TIMEOUT_MS.
 */
const TRICKLE_GRACE_MS = 2000;
import { frameworkErrors } from './operations/health/framework-errors.js';
import retentionPlugin from './operations/retention/plugin.js';
import fetchPlugin from './platform/fetch/plugin.js';
import type { LookupFn } from './platform/fetch/safe-fetch.js';
import rssPingRoutes from './intake/rss-ping/routes.js';
import verificationPlugin from './verification/plugin.js';
import websubPlugin from './push/websub/plugin.js';
import streamPlugin from './push/stream/plugin.js';
import relayPlugin from './push/relay/plugin.js';
import rsscloudPlugin from './push/rsscloud/plugin.js';
import statsPlugin from './operations/stats/plugin.js';
import adminPlugin from './operations/admin/plugin.js';
import webPlugin from './web/plugin.js';

export interface BuildOptions {
  config?: Config;
  logger?: FastifyServerOptions['logger'];
  skipMigrations?: boolean;
  /** Where the default logger writes (stdout when unset); tests capture the JSON lines. */
  logStream?: { write(line: string): void };
  /** A serving process's bounded stdout (wins over logStream); its dropped lines become a metric. */
  logDestination?: LogDestination;
  /**
   * The outbound client's resolver (tests that play many named hosts on loopback); the system resolver by
   * default. Every address it gives still passes the address policy.
   */
  lookup?: LookupFn;
}

export const REDACT = ['req.headers.authorization', 'req.headers.cookie', 'req.headers["x-admin-token"]'];

export async function buildApp(opts: BuildOptions = {}): Promise<FastifyInstance> {
  const config = opts.config ?? loadConfig();
  const logStream = opts.logDestination?.stream ?? opts.logStream;
  const genReqId = requestIdGenerator(config.TRUST_PROXY !== false);
  const requestLogging = config.LOG_LEVEL === 'debug' || config.LOG_LEVEL === 'trace';
  // The published documents' 304s are answered before Fastify (platform/http-server.ts), with the same ids.
  const early = new EarlyAnswers(genReqId);
  early.enabled = !requestLogging;
  const app = Fastify({
    logger: opts.logger ?? { level: config.LOG_LEVEL, redact: REDACT, ...(logStream ? { stream: logStream } : {}) },
    serverFactory: httpServerFactory(early),
    genReqId,
    // A request's child logger is made when the request first logs (at LOG_LEVEL=warn a served poll never
    // does): pino's child() serialises the bindings, ~5 µs of a 304 (bench/results/evidence/2026-11-23-wrk.md).
    childLoggerFactory: (logger, bindings, opts) => new LazyChildLogger(logger, bindings, opts),
    trustProxy: proxyTrust(config.TRUST_PROXY),
    // Each plugin's own set-up (reading state, starting timers) on a starved machine. Opening and migrating
    // the database is not a plugin's start (prepareDatabase, below) and no timeout bounds it.
    pluginTimeout: 60_000,
    bodyLimit: config.BODY_LIMIT,
    // Slow clients are cut off instead of holding a socket forever.
    requestTimeout: config.REQUEST_TIMEOUT_MS,
    // Node checks those deadlines only every connectionsCheckingInterval (30 s by default).
    http: {
      headersTimeout: Math.min(60_000, config.REQUEST_TIMEOUT_MS),
      connectionsCheckingInterval: Math.min(30_000, Math.max(250, Math.floor(config.REQUEST_TIMEOUT_MS / 4))),
    },
    // No idle timer per socket (connectionTimeout): Node re-arms it on every request (~1.5 µs of a 304).
    // requestTimeout and headersTimeout bound a slow request, keepAliveTimeout an idle keep-alive socket,
    // and forceCloseConnections the sockets still open at shutdown.
    connectionTimeout: 0,
    keepAliveTimeout: 65_000,
    // Requests that arrive while closing reach the handlers, which refuse pings with a clear flerror.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    // Before any route: a short plain answer with the request id, not Fastify's JSON echo of the path.
    frameworkErrors,
    // Per-request lines would double the cost of a ping at info level; they appear at debug.
    logController: new LogController({ disableRequestLogging: !requestLogging }),
  });
  app.decorate('config', config);
  app.decorate('earlyAnswers', early);
  // One root handler for what no scope formats itself; registered before the plugins, which inherit it.
  app.setErrorHandler(rootErrorHandler);
  // Requests still sending their body when the shutdown starts get a short grace, then are cut off.
  app.addHook('preClose', (done) => {
    void closeTricklingRequests(app.server, TRICKLE_GRACE_MS).then(
      (n) => n && app.log.warn({ requests: n }, 'shutdown: closed requests still sending their body'),
    );
    done();
  });
  // X-Request-Id on every route declared from here on, except the polled documents (they set it themselves).
  everyRoute(app, 'onRequest', setRequestIdHeader);
  try {
    await app.register(metricsPlugin, { logDrops: opts.logDestination?.dropped });
    // A 404 runs the not-found context's hooks, not a route's: it gets the same two explicitly (Fastify's
    // own 404 answer, no handler given).
    // Fastify's types list only preValidation/preHandler here; four-oh-four.js takes every lifecycle hook.
    app.setNotFoundHandler({ onRequest: setRequestIdHeader, onResponse: app.httpLatencyHook } as never, undefined as never);
    // Outside any plugin, so that no plugin timeout bounds it: a first start or a long migration takes what
    // it takes, and says so as it goes (platform/db/plugin.ts).
    const db = await prepareDatabase(config, app.log, { skipMigrations: opts.skipMigrations });
    await app.register(dbPlugin, { db });
    await app.register(healthPlugin);
    await app.register(fetchPlugin, { config, lookup: opts.lookup });
    // Intake: the shared path, its screens and metrics, then the protocols that feed it.
    await app.register(pingPlugin, { config });
    await app.register(abusePlugin, { config });
    await app.register(intakeMetricsPlugin);
    await app.register(xmlrpcMethodsPlugin);
    await app.register(xmlrpcRoutes, { config });
    await app.register(rssPingRoutes, { config });
    // Verification of what was pinged, then publishing and operations.
    await app.register(verificationPlugin, { config });
    await app.register(publishingPlugin, { config });
    await app.register(websubPlugin, { config });
    await app.register(streamPlugin, { config });
    await app.register(relayPlugin, { config });
    await app.register(rsscloudPlugin, { config });
    await app.register(statsPlugin);
    await app.register(retentionPlugin, { config });
    // The operator API: the CLI's commands run in this process (its socket, or HTTP with ADMIN_TOKEN).
    await app.register(adminPlugin, { config });
    // Pages for people, last: they read every resource above.
    await app.register(webPlugin);
  } catch (err) {
    // A plugin that failed to start must not leave the ones before it open (the embedded database keeps
    // its lock file, a pool keeps the process alive).
    await app.close().catch(() => {});
    throw err;
  }
  return app;
}

/**
 * Fastify's trustProxy from TRUST_PROXY: a hop count as the function proxy-addr calls with each hop's
 * index (0 = the socket's peer), a list of proxies as is.
 */
function proxyTrust(t: TrustProxy): boolean | string[] | ((addr: string, hop: number) => boolean) {
  if (t === false) return false;
  if (typeof t === 'number') return (_addr, hop) => hop < t;
  return [...t];
}

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * A request's logger that becomes `parent.child(bindings, opts)` the first time a line is written at an
 * enabled level; below it, a call costs a level comparison. Anything else (child(), bindings, a level
 * change) makes the real child first.
 */
class LazyChildLogger implements FastifyBaseLogger {
  private real: FastifyBaseLogger | undefined;
  /** pino's level table, and the numeric level at and above which lines are written. */
  private readonly values: Record<string, number> | undefined;
  private readonly threshold: number;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly opts: ChildLoggerOptions,
  ) {
    this.values = (parent as { levels?: { values: Record<string, number> } }).levels?.values;
    // A logger without pino's level table (a custom one) decides per line itself.
    this.threshold = this.values?.[opts.level ?? parent.level] ?? -Infinity;
  }

  private get log(): FastifyBaseLogger {
    return (this.real ??= this.parent.child(this.bindings, this.opts));
  }

  private write(level: Level, args: unknown[]): void {
    if (this.real === undefined) {
      const v = this.values?.[level];
      if (v !== undefined && v < this.threshold) return;
    }
    (this.log[level] as (...a: unknown[]) => void)(...args);
  }

  get level(): string {
    return this.real ? this.real.level : (this.opts.level ?? this.parent.level);
  }

  set level(l: string) {
    this.log.level = l;
  }

  fatal(...args: unknown[]): void {
    this.write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.write('error', args);
  }
  warn(...args: unknown[]): void {
    this.write('warn', args);
  }
  info(...args: unknown[]): void {
    this.write('info', args);
  }
  debug(...args: unknown[]): void {
    this.write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.write('trace', args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.log.child(bindings, options);
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    config: Config;
  }
}
