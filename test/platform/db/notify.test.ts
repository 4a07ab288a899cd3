// db.notify / db.listen on both backends: a payload reaches every listener of its channel, not others', and
// a listener that stopped hears nothing more.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, type TestApp } from '../../helpers/app.js';

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
  for (let i = 0; i < 200 && heard.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(heard, ['one', 'two']);
  assert.deepEqual(other, []);
  await stop();
  await t.app.db.notify('pingd_test_a', 'three');
  await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(heard, ['one', 'two']);
  await stopOther();
});
