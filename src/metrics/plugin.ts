// Owns the Prometheus registry every module registers its metrics in, and the ping outcome counters.
// GET /metrics (text exposition format) is served from here.
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Registry, Counter, Histogram, collectDefaultMetrics } from 'prom-client';

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Registry;
  }
}

async function metricsPlugin(app: FastifyInstance): Promise<void> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'pingd_' });
  app.decorate('metrics', registry);

  const pings = new Counter({
    name: 'pingd_pings_total',
    help: 'Pings received, by method and outcome (accepted, or the refusal reason).',
    labelNames: ['method', 'outcome'] as const,
    registers: [registry],
  });
  const batchSize = new Histogram({
    name: 'pingd_commit_batch_size',
    help: 'Pings per group commit.',
    buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000],
    registers: [registry],
  });
  const commitSeconds = new Histogram({
    name: 'pingd_commit_duration_seconds',
    help: 'Time to commit one batch of pings.',
    labelNames: ['ok'] as const,
    buckets: [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
    registers: [registry],
  });

  app.addHook('onReady', async () => {
    if (!app.hasDecorator('pings')) return;
    app.pings.onOutcome((method, r) => pings.inc({ method, outcome: r.ok ? 'accepted' : r.reason }));
    app.pings.batcher.onBatch((s) => {
      batchSize.observe(s.size);
      commitSeconds.observe({ ok: String(s.ok) }, s.ms / 1000);
    });
  });

  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', registry.contentType);
    return registry.metrics();
  });
}

export default fp(metricsPlugin, { name: 'metrics' });
