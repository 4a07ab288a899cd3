// The listener list: every listener is called in order, and one that throws is logged, not passed on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Listeners } from '../../src/platform/listeners.js';

test('a listener that throws is logged with its event, and the listeners after it are still called', () => {
  const logged: object[] = [];
  const list = new Listeners<[n: number]>('numbers', { error: (obj) => void logged.push(obj) });
  const heard: number[] = [];
  list.add((n) => heard.push(n));
  list.add(() => {
    throw new Error('boom');
  });
  list.add((n) => heard.push(n * 10));
  assert.doesNotThrow(() => list.emit(2));
  assert.deepEqual(heard, [2, 20]);
  assert.deepEqual(logged, [{ err: { message: 'boom' }, event: 'numbers' }]);
});
