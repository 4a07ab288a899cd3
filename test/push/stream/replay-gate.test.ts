// The replay budget on its own, on a mocked clock: how many reads at once, whose turn is next, the pace
// (what each read cost delays the next, all replays together), and giving up a place.
import { test, mock, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { ReplayGate, type Turn } from '../../../src/push/stream/replay-gate.js';

beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 }));
afterEach(() => mock.timers.reset());

/** Lets granted turns' callbacks run (promise jobs; setImmediate is not mocked). */
const settle = () => new Promise((r) => setImmediate(r));

function gate(concurrency: number, rowsPerSecond: number): ReplayGate {
  return new ReplayGate({ concurrency, rowsPerSecond, now: () => Date.now() });
}

/** Asks for a turn for each owner; `granted` lists them in the order they got it. */
function ask(g: ReplayGate, owners: string[], granted: string[], turns: Map<string, Turn | null>): void {
  for (const o of owners) {
    void g.turn({ o }).then((turn) => {
      granted.push(o);
      turns.set(o, turn);
    });
  }
}

test('at most `concurrency` reads run at once; the others get their turns first come, first served', async () => {
  const g = gate(2, 1_000_000);
  const granted: string[] = [];
  const turns = new Map<string, Turn | null>();
  ask(g, ['a', 'b', 'c', 'd'], granted, turns);
  await settle();
  assert.deepEqual(granted, ['a', 'b']);
  assert.equal(g.reading, 2);
  assert.equal(g.waiting, 2);
  turns.get('b')!(0);
  turns.get('b')!(0); // a second call changes nothing
  await settle();
  assert.deepEqual(granted, ['a', 'b', 'c']);
  assert.equal(g.reading, 2);
  turns.get('a')!(0);
  await settle();
  assert.deepEqual(granted, ['a', 'b', 'c', 'd']);
  assert.equal(g.waiting, 0);
});

test('reads are paced by what they cost, all replays together: 500 rows at 1,000 rows/s delay the next read by 500 ms', async () => {
  const g = gate(4, 1000);
  const granted: string[] = [];
  const turns = new Map<string, Turn | null>();
  ask(g, ['a'], granted, turns);
  await settle();
  turns.get('a')!(500);
  ask(g, ['b', 'c'], granted, turns);
  await settle();
  assert.deepEqual(granted, ['a'], 'no read before the pace allows, though places are free');
  mock.timers.tick(499);
  await settle();
  assert.deepEqual(granted, ['a']);
  mock.timers.tick(1);
  await settle();
  // Both may start now: the next start moves on only once a read reports its cost.
  assert.deepEqual(granted, ['a', 'b', 'c']);
  turns.get('b')!(1000);
  turns.get('c')!(1000);
  ask(g, ['d'], granted, turns);
  mock.timers.tick(1999);
  await settle();
  assert.deepEqual(granted, ['a', 'b', 'c']);
  mock.timers.tick(1);
  await settle();
  assert.deepEqual(granted, ['a', 'b', 'c', 'd']);
});

test('the pace counts from when a read started: one that took as long as its cost allows the next at once', async () => {
  const g = gate(2, 1000);
  const granted: string[] = [];
  const turns = new Map<string, Turn | null>();
  ask(g, ['a'], granted, turns);
  await settle();
  mock.timers.tick(500); // the read takes 500 ms
  turns.get('a')!(500); // and cost 500 rows: 500 ms at 1,000 rows/s, already spent
  ask(g, ['b'], granted, turns);
  await settle();
  assert.deepEqual(granted, ['a', 'b'], 'no wait added to the time the read took');
  mock.timers.tick(100);
  turns.get('b')!(500); // took 100 ms: the next read waits for the other 400
  ask(g, ['c'], granted, turns);
  mock.timers.tick(399);
  await settle();
  assert.deepEqual(granted, ['a', 'b']);
  mock.timers.tick(1);
  await settle();
  assert.deepEqual(granted, ['a', 'b', 'c']);
});

test('a read made without a turn is charged to the pace too', async () => {
  const g = gate(2, 1000);
  g.charge(250);
  const granted: string[] = [];
  const turns = new Map<string, Turn | null>();
  ask(g, ['a'], granted, turns);
  await settle();
  assert.deepEqual(granted, []);
  mock.timers.tick(250);
  await settle();
  assert.deepEqual(granted, ['a']);
});

test('a cancelled owner and a closed gate get no turn (null), and a cancelled one takes no place', async () => {
  const g = gate(1, 1_000_000);
  const granted: string[] = [];
  const turns = new Map<string, Turn | null>();
  const b = { o: 'b' };
  ask(g, ['a'], granted, turns);
  void g.turn(b).then((turn) => {
    granted.push('b');
    turns.set('b', turn);
  });
  ask(g, ['c'], granted, turns);
  await settle();
  g.cancel(b);
  await settle();
  assert.deepEqual(granted, ['a', 'b']);
  assert.equal(turns.get('b'), null);
  turns.get('a')!(0);
  await settle();
  assert.deepEqual(granted, ['a', 'b', 'c'], 'the next in line goes after a');
  ask(g, ['d'], granted, turns);
  g.close();
  await settle();
  assert.equal(turns.get('d'), null);
  assert.equal(await g.turn({}), null);
});
