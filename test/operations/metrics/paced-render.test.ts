// /metrics renderings are paced: a flood of scrapes shares renderings (each made after the request came),
// at most one per gap, instead of one full rendering (database gauges included) per request.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PacedRender } from '../../../src/operations/metrics/plugin.js';
import { startApp } from '../../helpers/app.js';

test('200 concurrent scrapes share renderings, and every answer was rendered after its request arrived', async () => {
  let state = 0;
  let renders = 0;
  const paced = new PacedRender(async () => {
    renders++;
    await new Promise((r) => setTimeout(r, 5));
    return state;
  }, 100);
  const answers = await Promise.all(
    Array.from({ length: 200 }, async () => {
      const seen = ++state;
      return { seen, got: await paced.next() };
    }),
  );
  for (const a of answers) assert.ok(a.got >= a.seen, `an answer rendered before its request: ${a.got} < ${a.seen}`);
  assert.ok(renders <= 2, `${renders} renderings for 200 concurrent requests`);
});

test('a scraper asking back to back gets at most one rendering per gap (a /metrics flood is bounded)', async () => {
  let renders = 0;
  // A clock that moves when waited on: 600 ms of scraping take no time, and a loaded machine changes nothing.
  let now = 0;
  const paced = new PacedRender(async () => ++renders, 100, {
    now: () => now,
    sleep: async (ms) => {
      now += ms;
    },
  });
  let answered = 0;
  // Bounded by answers too: unpaced, the clock would never move.
  while (now < 600 && answered < 1000) {
    await paced.next();
    answered++;
  }
  assert.ok(renders <= Math.ceil(now / 100) + 1, `${renders} renderings in ${now} ms`);
  assert.equal(answered, renders, 'each sequential request got its own (fresh) rendering');
});

test('GET /metrics: a burst of 100 scrapes is answered 200 with the exposition from a shared rendering', async () => {
  const t = await startApp({ RENDER_SCHEDULER: false });
  try {
    let collects = 0;
    const { Gauge } = await import('prom-client');
    new Gauge({
      name: 'pingd_test_renderings',
      help: 'test',
      registers: [t.app.metrics],
      collect() {
        collects++;
      },
    });
    const answers = await Promise.all(Array.from({ length: 100 }, () => t.app.inject({ method: 'GET', url: '/metrics' })));
    for (const a of answers) {
      assert.equal(a.statusCode, 200);
      assert.match(a.body, /pingd_test_renderings/);
    }
    assert.ok(collects <= 2, `${collects} renderings for a burst of 100`);
  } finally {
    await t.close();
  }
});
