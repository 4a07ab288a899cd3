// Owns the one shape every durable queue's size is exported in: `<name>{measure="depth"|"oldest_age_seconds"}`,
// read from the database at scrape time (so every instance reports the shared queue), and left out of
// that scrape when the database does not answer (/metrics still answers with the rest).
import { Gauge, type Registry } from 'prom-client';

export interface QueueStats {
  depth: number;
  oldestAgeSec: number;
}

export function queueGauge(registry: Registry, name: string, what: string, stats: () => Promise<QueueStats>): Gauge<'measure'> {
  return new Gauge({
    name,
    help: `${what} waiting (depth) and the age in seconds of the oldest (oldest_age_seconds), read at scrape time.`,
    labelNames: ['measure'] as const,
    registers: [registry],
    async collect() {
      try {
        const s = await stats();
        this.set({ measure: 'depth' }, s.depth);
        this.set({ measure: 'oldest_age_seconds' }, s.oldestAgeSec);
      } catch {
        // The database is down: /metrics still answers with the rest.
      }
    },
  });
}
