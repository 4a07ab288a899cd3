// A worker thread lowers its own priority, and only its own: the process's main thread keeps its nice value.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { getPriority } from 'node:os';
import { readFileSync } from 'node:fs';

test("lowerThreadPriority sets the calling thread's nice value, not the process's", async () => {
  const before = getPriority(0);
  const url = new URL('../../../src/platform/work/thread-priority.ts', import.meta.url).href;
  const tsx = import.meta.resolve('tsx/esm/api');
  const w = new Worker(
    `import(${JSON.stringify(tsx)}).then(({ register }) => { register(); return import(${JSON.stringify(url)}); }).then(async ({ lowerThreadPriority }) => {
      const { parentPort } = await import('node:worker_threads');
      const { readlinkSync, readFileSync } = await import('node:fs');
      const ok = lowerThreadPriority(7);
      const tid = readlinkSync('/proc/thread-self').split('/').pop();
      const nice = Number(readFileSync('/proc/thread-self/stat', 'utf8').split(') ')[1].split(' ')[16]);
      parentPort.postMessage({ ok, tid, nice });
    })`,
    { eval: true },
  );
  const got = await new Promise<{ ok: boolean; tid: string; nice: number }>((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  });
  await w.terminate();
  assert.equal(got.ok, true);
  assert.equal(got.nice, 7, 'the thread runs at nice 7');
  assert.equal(getPriority(0), before, 'the main thread keeps its priority');
  assert.equal(Number(readFileSync('/proc/thread-self/stat', 'utf8').split(') ')[1].split(' ')[16]), before);
});
