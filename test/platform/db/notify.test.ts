// db.notify / db.listen on both backends: a payload reaches every listener of its channel, not others', and
// a listener that stopped hears nothing more.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, type TestApp } from '../../helpers/app.js';
import { waitFor } from '../../helpers/wait.js';

let t: TestApp;
after(async () => t?.close());

test('a notification reaches the listeners of its channel until they stop', async () => {
  t = await startApp({});
  const heard: string[] = [];
  const other: string[] = [];
  const stop = await t.app.db.listen('pingd_test_a', (p) => heard.push(p));
  const stopOther = await t.app.db.listen('pingd_test_b', (p) => other.push(p));
  await t.app.db.notify('pingd_test_a', 'one');
  await t.app.db.notify('pingd_test_a', 'two');
  await waitFor(() => heard.length >= 2, {
    what: () => `two notifications (heard ${JSON.stringify(heard)})`,
    timeoutMs: 2000,
    intervalMs: 10,
  });
  assert.deepEqual(heard, ['one', 'two']);
  await stop();
  await t.app.db.notify('pingd_test_a', 'three');
  // Barrier: a sentinel sent after it on a channel still listened to. It is told after 'three' (in order on
  // the embedded database; on PostgreSQL both are sent as each commits, to listening connections that read
  // them as they come), so a stopped listener that still heard would have 'three' by the time it arrives.
  await t.app.db.notify('pingd_test_b', 'sentinel');
  await waitFor(() => other.length > 0, { what: 'the sentinel on the other channel', timeoutMs: 2000, intervalMs: 10 });
  assert.deepEqual(other, ['sentinel'], 'nothing of channel a reached the listener of b');
  assert.deepEqual(heard, ['one', 'two']);
  await stopOther();
});
