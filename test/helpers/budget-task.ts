// A task for the budget pool's tests, run on its worker threads: spin for a while, burn an amount of CPU
// time, allocate without end, or answer at once.
import { ownThreadId, threadCpuMs } from '../../src/platform/work/thread-cpu.js';

export default function task(
  t: { kind: 'spin'; ms: number } | { kind: 'burn'; cpuMs: number } | { kind: 'allocate' } | { kind: 'echo'; value: string },
): string {
  if (t.kind === 'echo') return t.value;
  if (t.kind === 'burn') {
    const tid = ownThreadId();
    const from = threadCpuMs(tid) ?? 0;
    let x = 0;
    while ((threadCpuMs(tid) ?? Infinity) - from < t.cpuMs) for (let i = 0; i < 100_000; i++) x += i;
    return x > 0 ? 'burnt' : 'burnt';
  }
  if (t.kind === 'spin') {
    const until = Date.now() + t.ms;
    while (Date.now() < until);
    return 'spun';
  }
  const keep: string[][] = [];
  for (;;) keep.push(Array.from({ length: 100_000 }, (_, i) => `${i}-${keep.length}`));
}
