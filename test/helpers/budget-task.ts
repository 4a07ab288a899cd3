// A task for the budget pool's tests, run on its worker threads: spin for a while, allocate without end,
// or answer at once.
export default function task(t: { kind: 'spin'; ms: number } | { kind: 'allocate' } | { kind: 'echo'; value: string }): string {
  if (t.kind === 'echo') return t.value;
  if (t.kind === 'spin') {
    const until = Date.now() + t.ms;
    while (Date.now() < until);
    return 'spun';
  }
  const keep: string[][] = [];
  for (;;) keep.push(Array.from({ length: 100_000 }, (_, i) => `${i}-${keep.length}`));
}
