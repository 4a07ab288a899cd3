// The code layout docs/design/architecture.md's "Code layout" section describes, checked against the code: imports point
// down (platform ← jobs; intake ← verification ← publishing ← operations), push takes only verification's polite client,
// no import cycle, and the map names every folder of src/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, dirname, relative, posix } from 'node:path';

const root = join(import.meta.dirname, '..');
const src = join(root, 'src');

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** src-relative paths a module imports (relative specifiers only). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?\bfrom\s*'(\.[^']+)'|\bimport\(\s*'(\.[^']+)'\s*\)/g)) {
    const spec = m[1] ?? m[2];
    out.push(
      posix.normalize(
        relative(src, join(dirname(file), spec))
          .split('\\')
          .join('/'),
      ),
    );
  }
  return out;
}

/** The layer a src-relative path belongs to. */
function layer(p: string): 'platform' | 'spam' | 'intake' | 'verification' | 'publishing' | 'push' | 'operations' | 'web' | 'top' {
  const first = p.split('/')[0];
  if (
    first === 'platform' ||
    first === 'spam' ||
    first === 'intake' ||
    first === 'verification' ||
    first === 'publishing' ||
    first === 'push' ||
    first === 'operations' ||
    first === 'web'
  )
    return first;
  return 'top';
}

// What each layer may import besides itself.
const ALLOWED: Record<ReturnType<typeof layer>, ReturnType<typeof layer>[]> = {
  platform: [],
  spam: ['platform'],
  intake: ['platform', 'spam'],
  verification: ['platform', 'spam', 'intake'],
  publishing: ['platform', 'spam', 'intake', 'verification'],
  push: ['platform', 'spam', 'intake', 'verification', 'publishing'],
  operations: ['platform', 'spam', 'intake', 'verification', 'publishing', 'push'],
  web: ['platform', 'spam', 'intake', 'verification', 'publishing', 'push', 'operations'],
  top: ['platform', 'spam', 'intake', 'verification', 'publishing', 'push', 'operations', 'web'],
};

test('imports point down the layers: the platform imports no job, intake no publishing or operations', () => {
  const wrong: string[] = [];
  for (const f of files(src)) {
    const from = relative(src, f).split('\\').join('/');
    for (const to of importsOf(f)) {
      const a = layer(from);
      const b = layer(to);
      if (a !== b && !ALLOWED[a].includes(b)) wrong.push(`${from} → ${to}`);
    }
  }
  // REGRESSION: xml/escape.ts imported ping/validate.ts, and config.ts imported fetch/address-policy.ts.
  assert.deepEqual(wrong, []);
});

test('the code layout in docs/design/architecture.md names every folder of src/', () => {
  const page = readFileSync(join(root, 'docs', 'design', 'architecture.md'), 'utf8');
  const at = page.indexOf('## Code layout');
  assert.ok(at >= 0, 'docs/design/architecture.md has a "Code layout" section');
  const section = page.slice(at);
  assert.ok(section.length > 100, 'docs/design/architecture.md has a "Code layout" section');
  const folders = new Set<string>();
  for (const f of files(src)) {
    const d = dirname(relative(src, f)).split('\\').join('/');
    if (d !== '.') folders.add(d);
  }
  for (const d of folders) {
    const named = section.includes(`\`src/${d}/\``) || (!d.includes('/') && section.includes(`\`src/${d}/\` (files)`));
    assert.ok(named, `src/${d}/ is missing from the code layout in docs/design/architecture.md`);
  }
});

test('push takes nothing from verification: what both need (per-host manners, retry, gates) lives in platform/', () => {
  // The instance's per-host manners are one budget every outbound request shares: platform/fetch/polite.ts
  // and its slots' SQL (fetch/host-repository.ts), reached as app.polite. REGRESSION: relay/sender.ts and
  // websub/hub.ts took retryAfter from verification/manners.ts, relay/relay.ts HostGate from verification/,
  // and websub/hub.ts and rsscloud/notifier.ts the polite client from verification/polite.ts.
  const wrong: string[] = [];
  for (const f of files(join(src, 'push'))) {
    const from = relative(src, f).split('\\').join('/');
    for (const to of importsOf(f)) if (layer(to) === 'verification') wrong.push(`${from} → ${to}`);
  }
  assert.deepEqual(wrong, []);
});

test('no module imports itself through others: the imports of src/ have no cycle', () => {
  // REGRESSION: publishing/documents/archive.ts took its cache's type from hour-cache.ts, which took HOUR_MS
  // from archive.ts.
  const graph = new Map<string, string[]>();
  for (const f of files(src)) {
    const from = relative(src, f).split('\\').join('/').replace(/\.ts$/, '.js');
    graph.set(from, importsOf(f));
  }
  const cycles: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const walk = (m: string, path: string[]): void => {
    if (state.get(m) === 'done') return;
    if (state.get(m) === 'open') {
      cycles.push([...path.slice(path.indexOf(m)), m].join(' → '));
      return;
    }
    state.set(m, 'open');
    for (const to of graph.get(m) ?? []) walk(to, [...path, m]);
    state.set(m, 'done');
  };
  for (const m of [...graph.keys()].sort()) walk(m, []);
  assert.deepEqual(cycles, []);
});
