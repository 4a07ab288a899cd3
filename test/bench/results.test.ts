// `npm run bench -- --write` rewrites the scenario's current page and appends one history line; before,
// every run added a dated file (51 of them in four days) and nothing was machine-readable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { recordRun, tableFigures } from '../../bench/lib/results.js';

const TABLE = [
  '| case | backend | pingd req/s | ratio (min–max; runs) | target |',
  '| --- | --- | ---: | --- | --- |',
  '| 304 | postgres | 29,634 | **94.7%** (92.8%–99.0%) | ≥ 85% ✅ met |',
  '| ping | pglite | 1,200.5 | 21.0% | – |',
].join('\n');

test('the history figures are every number of the run tables, keyed by row (and backend) and column', () => {
  assert.deepEqual(tableFigures(`### run\n\n${TABLE}\n\nprose 12 ms\n`), {
    '304 / postgres · pingd req/s': 29634,
    '304 / postgres · ratio (min–max; runs)': 0.947,
    'ping / pglite · pingd req/s': 1200.5,
    'ping / pglite · ratio (min–max; runs)': 0.21,
  });
});

test('a run rewrites its scenario page and appends one history line per run', () => {
  const root = mkdtempSync(join(tmpdir(), 'pingd-results-'));
  try {
    const started = new Date('2026-11-26T12:00:00Z');
    const first = recordRun(
      { scenario: 'wrk', title: 'HTTP ratios with wrk', started, markdown: TABLE, backends: ['postgres'], loadAtStart: 0.5 },
      root,
    );
    recordRun({ scenario: 'wrk', title: 'HTTP ratios with wrk', started, markdown: 'second run', backends: ['pglite'] }, root);
    assert.deepEqual(
      first.map((p) => p.slice(root.length)),
      ['/bench/results/history.jsonl', '/bench/results/wrk.md'],
    );
    const page = readFileSync(join(root, 'bench/results/wrk.md'), 'utf8');
    assert.match(page, /^# HTTP ratios with wrk \(`wrk`\): current figures\n\n- Date: 2026-11-26 12:00 UTC\n- Commit: /);
    assert.match(page, /\nsecond run\n/, 'the page holds the latest run only');
    assert.doesNotMatch(page, /29,634/);
    const lines = readFileSync(join(root, 'bench/results/history.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(lines.length, 2);
    assert.equal(lines[0].scenario, 'wrk');
    assert.equal(lines[0].backend, 'postgres');
    assert.equal(lines[0].load, 0.5);
    assert.equal(lines[0].figures['304 / postgres · pingd req/s'], 29634);
    assert.deepEqual(lines[1].figures, {});
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
