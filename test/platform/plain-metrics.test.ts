// The hot paths' plain counters and histograms are exposed exactly as prom-client's own would be: same
// HELP/TYPE lines, sample names, label order, cumulative buckets, sums and counts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Counter, Histogram, Registry } from 'prom-client';
import { PlainCounter, PlainHistogram } from '../../src/platform/plain-metrics.js';

test('a plain histogram and counter expose the same text as prom-client for the same observations', async () => {
  const buckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
  const observations: [string, string, number, number][] = [
    ['/RPC2', 'POST', 200, 0.0004],
    ['/RPC2', 'POST', 200, 0.003],
    ['/shortChanges.xml', 'GET', 304, 0.0001],
    ['/RPC2', 'POST', 200, 0.001],
    ['unmatched', 'GET', 404, 12],
    ['/shortChanges.xml', 'GET', 304, 0.2],
  ];
  const ours = new Registry();
  const theirs = new Registry();
  const h = new PlainHistogram('x_seconds', 'Help "quoted" \\ text.', buckets, ours);
  const ph = new Histogram({
    name: 'x_seconds',
    help: 'Help "quoted" \\ text.',
    labelNames: ['route', 'method', 'status_code'],
    buckets,
    registers: [theirs],
  });
  const c = new PlainCounter('y_total', 'Counted.', ours);
  const pc = new Counter({ name: 'y_total', help: 'Counted.', labelNames: ['document', 'status'], registers: [theirs] });
  for (const [route, method, status, v] of observations) {
    const key = `${route} ${method} ${status}`;
    (h.find(key) ?? h.add(key, { route, method, status_code: status })).observe(v);
    ph.observe({ route, method, status_code: status }, v);
    const ck = `${route} ${status}`;
    (c.find(ck) ?? c.add(ck, { document: route, status: String(status) })).value += 2;
    pc.inc({ document: route, status: String(status) }, 2);
  }
  assert.equal(await ours.metrics(), await theirs.metrics());
  // As JSON too (prom-client's exemplar slots, null without exemplars, aside).
  const json = async (r: Registry) => JSON.parse(JSON.stringify(await r.getMetricsAsJSON(), (k, v) => (k === 'exemplar' ? undefined : v)));
  assert.deepEqual(await json(ours), await json(theirs));
});
