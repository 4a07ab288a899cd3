// Owns the metrics of intake and of the database under it: pings by method and outcome, group-commit batch
// sizes and commit times (subscribed to what the ping service publishes), and the batcher queue and the
// connection pool, read at scrape time.
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Gauge, Histogram } from 'prom-client';
import { PlainCounter } from '../../platform/plain-metrics.js';
import { PING_METHODS } from '../../intake/ping/validate.js';

async function intakeMetricsPlugin(app: FastifyInstance): Promise<void> {
  const registry = app.metrics;
  // Counted on every ping: plain numbers (platform/plain-metrics.ts), not prom-client's per-call label hashing.
  const pings = new PlainCounter('pingd_pings_total', 'Pings received, by method and outcome (accepted, or the refusal reason).', registry);
  // The accepted series exist from the start, at 0: a fresh server's scrape already shows the counter (an
  // alert on its rate, or `grep '^pingd_pings_total'`, found nothing until the first ping). Refusals
  // appear as they happen: one series per method and reason at 0 would be 100 lines of noise.
  for (const method of PING_METHODS) pings.add(`${method} accepted`, { method, outcome: 'accepted' });
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
  app.pings.onOutcome((method, r) => {
    const outcome = r.ok ? 'accepted' : r.reason;
    const key = `${method} ${outcome}`;
    (pings.find(key) ?? pings.add(key, { method, outcome })).value++;
  });
  app.pings.onBatch((s) => {
    batchSize.observe(s.size);
    commitSeconds.observe({ ok: String(s.ok) }, s.ms / 1000);
  });

  // Read at scrape time, so they show the state when Prometheus asks.
  new Gauge({
    name: 'pingd_db_pool_connections',
    help: 'Database connections by state (total open, idle, and callers waiting for one).',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const s = app.db.poolStats();
      this.set({ state: 'total' }, s.total);
      this.set({ state: 'idle' }, s.idle);
      this.set({ state: 'waiting' }, s.waiting);
    },
  });
  new Gauge({
    name: 'pingd_db_pool_max',
    help: 'Most connections the pool may open (1 for the embedded database).',
    registers: [registry],
    collect() {
      this.set(app.db.kind === 'pglite' ? 1 : app.config.DB_POOL_MAX);
    },
  });
  new Gauge({
    name: 'pingd_ping_queue_length',
    help: 'Pings queued or committing in the group-commit batcher.',
    registers: [registry],
    collect() {
      this.set(app.pings.pending);
    },
  });
}

export default fp(intakeMetricsPlugin, { name: 'intake-metrics', dependencies: ['metrics', 'db', 'pings'] });
