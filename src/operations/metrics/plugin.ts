// Owns the Prometheus registry every module registers its metrics in (`app.metrics`), request latency per
// route and the process metrics (event-loop delay among them). GET /metrics (text exposition format,
// optionally behind METRICS_TOKEN) is served from here. Intake's metrics are in intake-metrics.ts.
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { timingSafeEqual, createHash } from 'node:crypto';
import { Registry, Histogram, Counter, collectDefaultMetrics } from 'prom-client';

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Registry;
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
  const httpSeconds = new Histogram({
    name: 'pingd_http_request_duration_seconds',
    help: 'Time to answer a request, by route pattern ("unmatched" for 404s), method and status code.',
    labelNames: ['route', 'method', 'status_code'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  // One labelled child per (route, method, status), looked up by a flat key: prom-client would otherwise
  // hash the label object on every request (a measurable share of a 304's cost).
  const httpChildren = new Map<string, ReturnType<typeof httpSeconds.labels>>();
  app.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions.url ?? 'unmatched';
    const key = `${route} ${req.method} ${reply.statusCode}`;
    let child = httpChildren.get(key);
    if (!child) {
      child = httpSeconds.labels({ route, method: req.method, status_code: reply.statusCode });
      httpChildren.set(key, child);
    }
    child.observe(reply.elapsedTime / 1000);
    done();
  });

  // Optional bearer token: the exposition names routes and counts, not secrets, but operators who
  // publish the port may not want it readable. Compared by hash so the time taken reveals nothing.
  const token = app.config.METRICS_TOKEN;
  const tokenHash = token ? createHash('sha256').update(token).digest() : undefined;
  const authorised = (header: string | undefined): boolean => {
    if (!tokenHash) return true;
    const m = /^Bearer\s+(.+?)\s*$/i.exec(header ?? '');
    return m !== null && timingSafeEqual(createHash('sha256').update(m[1]).digest(), tokenHash);
  };

  app.get('/metrics', async (req, reply) => {
    if (!authorised(req.headers.authorization)) {
      return reply
        .code(401)
        .header('www-authenticate', 'Bearer realm="pingd metrics"')
        .header('content-type', 'text/plain; charset=utf-8')
        .send('GET /metrics needs the METRICS_TOKEN: send "Authorization: Bearer <token>".\n');
    }
    reply.header('content-type', registry.contentType).header('cache-control', 'no-store');
    return registry.metrics();
  });
}

export default fp(metricsPlugin, { name: 'metrics' });
