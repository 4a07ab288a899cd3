// The render schedule: node-cron on RENDER_CRON in UTC, its cadence as the live documents' max-age, a ping
// visible at the next tick, and the task gone when the app closes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import cron from 'node-cron';
import { startApp, uniqueUrl } from '../../helpers/app.js';
import { cadenceSeconds, scheduleRenders } from '../../../src/publishing/render/schedule.js';
import type { Renderer } from '../../../src/publishing/render/renderer.js';
import { ConfigError, loadConfig } from '../../../src/platform/config.js';
import { waitFor } from '../../helpers/wait.js';

test('the cadence of RENDER_CRON: the gap between runs, in seconds', () => {
  assert.equal(cadenceSeconds('*/10 * * * * *'), 10);
  assert.equal(cadenceSeconds('* * * * * *'), 1);
  assert.equal(cadenceSeconds('*/30 * * * * *'), 30);
  assert.equal(cadenceSeconds('* * * * *'), 60);
  assert.equal(cadenceSeconds('*/5 * * * *'), 300);
  assert.equal(cadenceSeconds('0 * * * *'), 3600);
  assert.equal(cadenceSeconds('0,30 * * * * *'), 30);
  assert.throws(() => cadenceSeconds('61 * * * * *'), /RENDER_CRON "61 \* \* \* \* \*" is not a valid cron expression/);
});

test('publishing configuration is validated', () => {
  assert.equal(loadConfig({}).RENDER_SCHEDULER, true);
  assert.equal(loadConfig({}).PUBLISH_DELTA_WINDOW, 900);
  assert.equal(loadConfig({}).PUBLISH_POINTER_TTL_MS, 1000);
  assert.throws(
    () => loadConfig({ PUBLISH_DELTA_WINDOW: '5' }),
    (e: Error) => e instanceof ConfigError && /PUBLISH_DELTA_WINDOW must be between 10 and 3600, got 5/.test(e.message),
  );
  assert.throws(() => loadConfig({ PUBLISH_POINTER_TTL_MS: '-1' }), /PUBLISH_POINTER_TTL_MS must be between 0 and 60000/);
  assert.throws(() => loadConfig({ RENDER_SCHEDULER: 'sometimes' }), /RENDER_SCHEDULER must be true or false/);
});

test('scheduled: a ping appears at the next tick with no manual render; max-age follows the cadence; the task stops on close', async () => {
  const t = await startApp({ RENDER_SCHEDULER: true, RENDER_CRON: '* * * * * *', PUBLISH_POINTER_TTL_MS: 0 });
  try {
    await t.app.ready();
    assert.ok(
      [...cron.getTasks().values()].some((task) => task.name === 'pingd-render'),
      'the render task is scheduled',
    );
    const url = uniqueUrl('scheduled');
    const accepted = await t.app.pings.accept({ method: 'ping', name: 'Scheduled', url });
    assert.equal(accepted.ok, true);
    // Poll (no sleeping for a fixed time): the schedule renders every second.
    const rendered = (path: string) =>
      waitFor(
        async () => {
          const res = await t.app.inject({ url: path });
          return res.body.includes(url) && res;
        },
        { what: `the ping in ${path}, rendered by the schedule`, timeoutMs: 30_000, intervalMs: 100 },
      );
    const res = await rendered('/changes.xml');
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['cache-control'], 'public, max-age=1');
    // shortChanges.xml is rendered right after changes.xml in the same tick.
    await rendered('/shortChanges.xml');
  } finally {
    await t.close();
  }
  assert.ok(![...cron.getTasks().values()].some((task) => task.name === 'pingd-render'), 'the task is destroyed on close');
});

test('a dear changes.xml waits for later ticks (shortChanges.xml does not); a cheap one, or a forced render, is done at once', async () => {
  const t = await startApp({ RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 });
  try {
    await t.app.ready();
    const first = uniqueUrl('dear-first');
    assert.equal((await t.app.pings.accept({ method: 'ping', name: 'First', url: first })).ok, true);
    await t.app.renderer.tick();
    assert.ok((await t.app.inject({ url: '/changes.xml' })).body.includes(first));
    // The rendering just made took 5 s (as 100k weblogs on the embedded database do).
    await t.app.db.query(`update renderings set render_ms = 5000 where path = '/changes.xml'`);
    const second = uniqueUrl('dear-second');
    assert.equal((await t.app.pings.accept({ method: 'ping', name: 'Second', url: second })).ok, true);
    const r = await t.app.renderer.tick();
    assert.deepEqual(
      r!.rendered.map((x) => x.path).filter((p) => !/^\/\d{4}\//.test(p)),
      ['/shortChanges.xml'],
    );
    assert.ok(r!.unchanged.includes('/changes.xml'), JSON.stringify(r));
    assert.equal((await t.app.inject({ url: '/changes.xml' })).body.includes(second), false, 'changes.xml waits');
    assert.ok((await t.app.inject({ url: '/shortChanges.xml' })).body.includes(second), 'shortChanges.xml does not');
    const metrics = (await t.app.inject({ url: '/metrics' })).body;
    assert.match(metrics, /pingd_publish_renders_total\{document="changes.xml",outcome="throttled"\} 1\n/);
    // Forced (`pingd render`), it is rendered.
    await t.app.renderer.tick({ force: true });
    assert.ok((await t.app.inject({ url: '/changes.xml' })).body.includes(second));
    // A cheap rendering: the next change is rendered on the next tick.
    await t.app.db.query(`update renderings set render_ms = 10 where path = '/changes.xml'`);
    const third = uniqueUrl('dear-third');
    assert.equal((await t.app.pings.accept({ method: 'ping', name: 'Third', url: third })).ok, true);
    await t.app.renderer.tick();
    assert.ok((await t.app.inject({ url: '/changes.xml' })).body.includes(third));
  } finally {
    await t.close();
  }
});

test('a tick that comes while the previous one still renders runs once right after it, not at the tick after', async () => {
  // The renderer's side of it, as Renderer.tick behaves with skipIfBusy (null when already rendering): the
  // first tick renders for 2–3 s (the open hour's archive late in a busy hour) while the schedule fires every
  // second. REGRESSION: those ticks were dropped, and the live documents waited for the next second's tick.
  const starts: number[] = [];
  const ends: number[] = [];
  let busy = false;
  const renderer = {
    async tick(o: { skipIfBusy?: boolean }) {
      if (o.skipIfBusy && busy) return null;
      busy = true;
      starts.push(performance.now());
      // The long one ends 50 ms after a whole second (cron's tick): a dropped tick is then ~950 ms away.
      const ms = starts.length === 1 ? Math.ceil(Date.now() / 1000) * 1000 + 2050 - Date.now() : 50;
      await new Promise((r) => setTimeout(r, ms));
      ends.push(performance.now());
      busy = false;
      return { rendered: [], failed: [], closedHours: 0 };
    },
  } as unknown as Renderer;
  const log = { debug() {}, error() {} };
  const stop = scheduleRenders(renderer, { cron: '* * * * * *', cadenceSec: 1, log });
  try {
    await waitFor(() => starts.length >= 2, { what: 'a second tick', timeoutMs: 20_000 });
    // Right after the long one (a loaded machine may delay it a little), not at the next whole second.
    assert.ok(starts[1] - ends[0] < 300, `the missed tick started ${Math.round(starts[1] - ends[0])} ms after the long one ended`);
  } finally {
    await stop();
  }
  const n = starts.length;
  // Barrier: a second schedule on the same expression, started now, ticks at start and then on each whole
  // second. The stopped one, had it gone on, would have ticked on the first of those seconds before the
  // sentinel's tick on the second (timers fire in order of their due time).
  const sentinelStarts: number[] = [];
  const sentinel = {
    async tick() {
      sentinelStarts.push(performance.now());
      return { rendered: [], failed: [], closedHours: 0 };
    },
  } as unknown as Renderer;
  const stopSentinel = scheduleRenders(sentinel, { cron: '* * * * * *', cadenceSec: 1, log });
  try {
    await waitFor(() => sentinelStarts.length >= 3, { what: "the sentinel schedule's second scheduled tick", timeoutMs: 20_000 });
  } finally {
    await stopSentinel();
  }
  assert.equal(starts.length, n, 'no tick after the schedule stopped');
});
