// The replays' send pace (STREAM_REPLAY_BYTES_PER_SECOND): on a given clock, the budget shared equally by
// the connections replaying at the time; and through a listening server, a replay sent no faster than it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { ReplayPace } from '../../../src/push/stream/replay-pace.js';
import { startApp, type TestApp } from '../../helpers/app.js';

function paced(bytesPerSecond: number): { pace: ReplayPace; clock: { now: number } } {
  const clock = { now: 1000 };
  return { pace: new ReplayPace({ bytesPerSecond, now: () => clock.now }), clock };
}

test('a lone replay is charged its bytes at the whole budget: 500,000 bytes at 1 MB/s wait 500 ms', () => {
  const { pace } = paced(1_000_000);
  const a = {};
  pace.join(a);
  assert.equal(pace.sent(a, 500_000), 500);
  // Charged from when it was due, not from now: a second window sent at once waits for both.
  assert.equal(pace.sent(a, 500_000), 1000);
});

test('the budget is shared equally by the connections replaying at the time; one that leaves gives its share back', () => {
  const { pace, clock } = paced(1_000_000);
  const [a, b, c] = [{}, {}, {}];
  for (const o of [a, b, c]) pace.join(o);
  assert.equal(pace.replaying, 3);
  assert.equal(pace.sent(a, 100_000), 300);
  assert.equal(pace.sent(b, 100_000), 300);
  pace.leave(c);
  clock.now += 300;
  assert.equal(pace.sent(a, 100_000), 200, 'two left: 100,000 bytes at 500,000 bytes/s');
  pace.leave(b);
  clock.now += 200;
  assert.equal(pace.sent(a, 100_000), 100);
});

test('a connection slow to take its windows gains no credit: after a pause its next window is charged from now', () => {
  const { pace, clock } = paced(1_000_000);
  const a = {};
  pace.join(a);
  assert.equal(pace.sent(a, 100_000), 100);
  clock.now += 5000;
  assert.equal(pace.sent(a, 100_000), 100);
});

test('under the budget nothing waits; 0 is unpaced; a connection that never joined (a short catch-up) is not charged', () => {
  const { pace, clock } = paced(1_000_000);
  const a = {};
  pace.join(a);
  assert.equal(pace.sent(a, 1000), 1);
  clock.now += 10;
  assert.equal(pace.sent(a, 1000), 1, 'due 9 ms ago: charged from now');
  assert.equal(pace.sent({}, 10_000_000), 0);
  const off = paced(0).pace;
  off.join(a);
  assert.equal(off.sent(a, 10_000_000), 0);
});

let t: TestApp | undefined;
after(async () => {
  await t?.close();
});

test('through a listening server: a replay of 600 stored pings at 100,000 bytes/s takes at least its bytes / 100,000 seconds', async () => {
  const BUDGET = 100_000;
  t = await startApp({ PING_MIN_INTERVAL: 0, RENDER_SCHEDULER: false, STREAM_REPLAY_PAGE: 100, STREAM_REPLAY_BYTES_PER_SECOND: BUDGET });
  await t.listen();
  await t.app.db.query(
    `with w as (
       insert into weblogs (url, name, first_ping_at, last_ping_at)
       select 'http://w' || i || '.pace.example.org/', 'Paced ' || i, now(), now() from generate_series(1, 600) i
       returning id, url, name)
     insert into pings (weblog_id, received_at, method, name, url) select id, now(), 'ping', name, url from w order by id`,
  );
  const started = performance.now();
  const { bytes, events } = await new Promise<{ bytes: number; events: number }>((resolve, reject) => {
    http
      .get(`${t!.url}/stream?since=0&until=live`, { headers: { accept: 'text/event-stream' } }, (res) => {
        let bytes = 0;
        let text = '';
        res.on('data', (d: Buffer) => {
          bytes += d.length;
          text += d.toString('utf8');
        });
        res.on('end', () => resolve({ bytes, events: text.match(/^event: ping$/gm)?.length ?? 0 }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
  const ms = performance.now() - started;
  assert.equal(events, 600);
  // Everything but the retry line and the live marker went out during the replay, charged to the pace.
  const charged = bytes - 200;
  assert.ok(charged > 100_000, `${bytes} bytes`);
  assert.ok(ms >= (charged * 1000) / BUDGET, `${bytes} bytes in ${Math.round(ms)} ms: faster than ${BUDGET} bytes/s`);
});
