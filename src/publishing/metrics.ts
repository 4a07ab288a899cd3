// Owns the publishing metrics, registered in the app's registry: render durations, document sizes and
// outcomes per document, and responses on published documents by status with the bytes sent.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { PublishMetricsSink } from './render/renderer.js';
import type { RenderReport } from './render/store-rendering.js';
import type { ResponseRecorder } from './read/serve.js';
import { PlainCounter } from '../platform/plain-metrics.js';

export function publishMetrics(registry: Registry, cachedBytes: () => number): { sink: PublishMetricsSink; responses: ResponseRecorder } {
  const renderSeconds = new Histogram({
    name: 'pingd_publish_render_duration_seconds',
    help: 'Time to render and store one document (all codings and delta cut points; a paced render: its slices, not the ticks between).',
    labelNames: ['document'] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  });
  const docBytes = new Gauge({
    name: 'pingd_publish_document_bytes',
    help: 'Size of the latest rendering of each document, by content coding (archives: the latest hour rendered).',
    labelNames: ['document', 'encoding'] as const,
    registers: [registry],
  });
  const docEntries = new Gauge({
    name: 'pingd_publish_document_entries',
    help: 'Entries (<weblog/> elements) in the latest rendering of each document.',
    labelNames: ['document'] as const,
    registers: [registry],
  });
  new Gauge({
    name: 'pingd_publish_cache_bytes',
    help: 'Bytes of published bodies this process holds in memory to answer with (current renderings only, at most 64 MiB).',
    registers: [registry],
    collect() {
      this.set(cachedBytes());
    },
  });
  const renders = new Counter({
    name: 'pingd_publish_renders_total',
    help: 'Render attempts by document and outcome (rendered, unchanged, identical, throttled, in_progress: a paced render went on for a slice, failed).',
    labelNames: ['document', 'outcome'] as const,
    registers: [registry],
  });
  const lockBusy = new Counter({
    name: 'pingd_publish_render_lock_busy_total',
    help: 'Render ticks skipped because another instance held the render lock.',
    registers: [registry],
  });
  // Counted on every poll: plain numbers (platform/plain-metrics.ts), not prom-client's per-call label hashing.
  const responses = new PlainCounter(
    'pingd_publish_responses_total',
    'Responses on published documents by status (200, 226, 304, 404, 503).',
    registry,
  );
  const bytes = new PlainCounter(
    'pingd_publish_response_bytes_total',
    'Body bytes sent for published documents (as sent, i.e. compressed), by status.',
    registry,
  );
  return {
    sink: {
      rendered(r: RenderReport) {
        renderSeconds.observe({ document: r.document }, r.ms / 1000);
        docBytes.set({ document: r.document, encoding: 'identity' }, r.identityLength);
        docBytes.set({ document: r.document, encoding: 'gzip' }, r.gzipLength);
        docBytes.set({ document: r.document, encoding: 'br' }, r.brLength);
        docEntries.set({ document: r.document }, r.entries);
      },
      outcome(document, outcome) {
        renders.inc({ document, outcome });
      },
      lockBusy() {
        lockBusy.inc();
      },
    },
    responses(document, status, n) {
      const key = `${document} ${status}`;
      (responses.find(key) ?? responses.add(key, { document, status: String(status) })).value++;
      if (n > 0) (bytes.find(key) ?? bytes.add(key, { document, status: String(status) })).value += n;
    },
  };
}
