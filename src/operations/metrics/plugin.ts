// Owns the Prometheus registry every module registers its metrics in (`app.metrics`), request latency per
// route and the process metrics (event-loop delay among them). GET /metrics (text exposition format,
// optionally behind METRICS_TOKEN) is served from here. Intake's metrics are in intake-metrics.ts.
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify';
import { Registry, Counter, collectDefaultMetrics } from 'prom-client';
import { PlainHistogram } from '../../platform/plain-metrics.js';
import { bearerCheck } from '../../platform/bearer.js';

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Registry;
    /** Records one answer in pingd_http_request_duration_seconds (for routes that run no hooks: `config.polled`). */
    httpLatency(route: string, method: string, status: number, ms: number): void;
    /** The onResponse hook that records it (the 404 handler's, see app.ts). */
    httpLatencyHook(req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void;
  }
  interface FastifyContextConfig {
    /**
     * A route polled far more than any other (the published documents): it runs none of the per-request
     * hooks every other route gets (X-Request-Id, the latency histogram) and does their work itself,
     * cheaper (src/publishing/read/serve.ts).
     */
    polled?: boolean;
  }
}

type RouteHookName = 'onRequest' | 'onResponse';
type RouteHook = (req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void;

/**
 * Adds `hook` as a route hook to every route declared after this call, except the polled ones. Instead of
 * app.addHook: Fastify runs an app-wide hook on every route, with no way for one route to opt out. A new
 * array each time: Fastify copies a GET route's options for its HEAD route before running onRoute hooks.
 */
export function everyRoute(app: FastifyInstance, name: RouteHookName, hook: RouteHook): void {
  app.addHook('onRoute', (route: RouteOptions) => {
    if (route.config?.polled === true) return;
    const had = route[name];
    route[name] = [...(had === undefined ? [] : Array.isArray(had) ? had : [had]), hook] as never;
  });
}

/**
 * Shortest gap between the starts of two renderings of /metrics. One rendering reads gauges from the
 * database (queue depths, subscriptions) and formats every series: 2.7 ms of CPU and two statements on an
 * empty database, 13 ms with thousands of subscriptions. Scrapes that arrive meanwhile share the next
 * rendering, so a flood of scrapes costs at most four renderings a second; a Prometheus scrape (every
 * 5–60 s) waits at most this long.
 */
const METRICS_MIN_GAP_MS = 250;

/** The time PacedRender keeps its gap by, and its wait: the real ones (tests pass a clock that moves when waited on). */
export interface PaceClock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

const REAL_CLOCK: PaceClock = {
  now: () => performance.now(),
  sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
};

/**
 * Renders on demand, each answer made after the request arrived (never a stale copy), but at most one
 * rendering at a time and one per `gapMs`: requests that arrive while one runs or during the gap share
 * the next.
 */
export class PacedRender<T> {
  /** The rendering new requests join (it starts once the running one ended and the gap passed). */
  private queued: Promise<T> | undefined;
  private running: Promise<T> | undefined;
  private lastStart = -Infinity;

  constructor(
    private readonly render: () => Promise<T>,
    private readonly gapMs: number,
    private readonly clock: PaceClock = REAL_CLOCK,
  ) {}

  next(): Promise<T> {
    this.queued ??= this.schedule();
    return this.queued;
  }

  private async schedule(): Promise<T> {
    await this.running?.catch(() => undefined);
    const wait = this.lastStart + this.gapMs - this.clock.now();
    if (wait > 0) await this.clock.sleep(wait);
    this.queued = undefined;
    this.lastStart = this.clock.now();
    this.running = this.render();
    return this.running;
  }
}

export interface MetricsOptions {
  /** Log lines the process's log destination dropped so far (a serving process only). */
  logDrops?: () => number;
}

async function metricsPlugin(app: FastifyInstance, opts: MetricsOptions): Promise<void> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'pingd_' });
  app.decorate('metrics', registry);

  const logDrops = opts.logDrops;
  if (logDrops) {
    let reported = 0;
    new Counter({
      name: 'pingd_log_lines_dropped_total',
      help: 'Log lines dropped because stdout was not read fast enough (LOG_BUFFER_BYTES was full).',
      registers: [registry],
      collect() {
        const now = logDrops();
        this.inc(now - reported);
        reported = now;
      },
    });
  }

  // Per route pattern (never the raw URL: archive paths and 404 probes would make unbounded series).
  // Plain numbers (platform/plain-metrics.ts): prom-client would hash the label object on every request.
  const httpSeconds = new PlainHistogram(
    'pingd_http_request_duration_seconds',
    'Time to answer a request, by route pattern ("unmatched" for 404s), method and status code.',
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registry,
  );
  const observe = (route: string, method: string, status: number, ms: number): void => {
    const key = `${route} ${method} ${status}`;
    (httpSeconds.find(key) ?? httpSeconds.add(key, { route, method, status_code: status })).observe(ms / 1000);
  };
  app.decorate('httpLatency', observe);
  const onResponse = (req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    observe(req.routeOptions.url ?? 'unmatched', req.method, reply.statusCode, reply.elapsedTime);
    done();
  };
  app.decorate('httpLatencyHook', onResponse);
  // A route hook on every route declared from now on (this plugin is registered first), except the polled
  // ones (`config.polled`), which record their latency through their own sink: an app-wide hook would run
  // on every poll (Fastify's hook runner and the response's 'finish' work, ~10 µs of a 304).
  everyRoute(app, 'onResponse', onResponse);

  // Optional bearer token: the exposition names routes and counts, not secrets, but operators who
  // publish the port may not want it readable. The same check as the operator API's (platform/bearer.ts).
  const token = app.config.METRICS_TOKEN;
  const authorised = token ? bearerCheck(token) : () => true;

  const exposition = new PacedRender(() => registry.metrics(), METRICS_MIN_GAP_MS);
  app.get('/metrics', async (req, reply) => {
    if (!authorised(req.headers.authorization)) {
      return reply
        .code(401)
        .header('www-authenticate', 'Bearer realm="pingd metrics"')
        .header('content-type', 'text/plain; charset=utf-8')
        .send('GET /metrics needs the METRICS_TOKEN: send "Authorization: Bearer <token>".\n');
    }
    reply.header('content-type', registry.contentType).header('cache-control', 'no-store');
    return exposition.next();
  });
}

export default fp(metricsPlugin, { name: 'metrics' });
