// The reference pages made from the code's own tables (scripts/docs.ts, `npm run docs`) say what the code
// says now: a setting, error code, refusal, command or metric added without running `npm run docs` fails
// here, naming the file and its first stale line. So do docs/performance.md and the README's "How fast"
// table against the pages of bench/results/ (scripts/performance.ts): a page rewritten by a run, or a new
// one, without the docs regenerated. And the README's short settings table agrees with the configuration
// table it is a digest of.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, mkdtempSync, mkdirSync, writeFileSync, rmSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { generatedFiles, fillBlock, ROOT } from '../../scripts/docs.js';
import { performanceFiles, resultsPages, howFastBlock, commitWarnings, PERFORMANCE_PAGE } from '../../scripts/performance.js';
import { describeConfig } from '../../src/platform/config.js';

/** The first line where two texts differ, both ways, for a message a person can act on. */
function firstDifference(committed: string, expected: string): string {
  const a = committed.split('\n');
  const b = expected.split('\n');
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) return `line ${i + 1}\n  committed: ${a[i] ?? '(end of file)'}\n  generated: ${b[i] ?? '(end of file)'}`;
  }
  return '';
}

test('every generated reference page, .env.example and the compose settings are what `npm run docs` writes now', async () => {
  const files = await generatedFiles();
  const pages = ['docs/reference/cli.md', 'docs/reference/configuration.md', 'docs/reference/errors.md', 'docs/reference/metrics.md'];
  assert.deepEqual([...files.keys()].sort(), ['.env.example', 'README.md', 'docker-compose.yml', ...pages, 'docs/performance.md'].sort());
  const stale: string[] = [];
  for (const [path, expected] of files) {
    const full = join(ROOT, path);
    const committed = existsSync(full) ? readFileSync(full, 'utf8') : '';
    if (committed !== expected) stale.push(`${path}, first difference at ${firstDifference(committed, expected)}`);
  }
  assert.ok(stale.length === 0, `stale; run \`npm run docs\` and commit the result:\n${stale.join('\n')}`);
});

test('the generated blocks keep the hand-written text around them', () => {
  const page = 'intro\n\n<!-- generated:x -->\nold\n<!-- /generated -->\n\nafter\n';
  assert.equal(fillBlock(page, 'x', '| new |'), 'intro\n\n<!-- generated:x -->\n| new |\n<!-- /generated -->\n\nafter\n');
  assert.throws(() => fillBlock('no markers', 'x', 'y', 'page.md'), /page\.md has no <!-- generated:x -->/);
});

test('the README\'s settings table names real settings with their real defaults', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const spec = new Map(describeConfig().map((c) => [c.name, c.default]));
  const rows = [...readme.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \| (`[^`]*`|unset) \|/gm)];
  assert.ok(rows.length >= 10, `the README lists the settings people change (found ${rows.length})`);
  for (const [, name, shown] of rows) {
    assert.ok(spec.has(name), `README: ${name} is not a pingd setting`);
    const expected = spec.get(name) === '' ? 'unset' : `\`${spec.get(name)}\``;
    assert.equal(shown, expected, `README: ${name} defaults to ${expected}`);
  }
});

/** A results page as bench/lib/results.ts writes one. */
function resultsPage(title: string, commit: string | null, body: string): string {
  const head = ['- Date: 2026-12-01 10:00 UTC', ...(commit === null ? [] : [`- Commit: ${commit}`]), '- Machine: 2 × test', '- Load: 0.50 at start'];
  return [`# ${title}: current figures`, '', ...head, '', body, ''].join('\n');
}

test('docs/performance.md takes every results page, known ones in PAGE_ORDER, new ones after them by name', () => {
  const root = mkdtempSync(join(tmpdir(), 'pingd-perf-page-'));
  try {
    const dir = join(root, 'bench/results');
    mkdirSync(dir, { recursive: true });
    mkdirSync(join(root, 'docs'));
    writeFileSync(join(root, 'README.md'), '# x\n\n<!-- generated:how-fast -->\n<!-- /generated -->\n');
    writeFileSync(join(dir, 'README.md'), '# not a results page\n');
    writeFileSync(join(dir, 'zeta.md'), resultsPage('Zeta (`zeta`)', 'abc1234 (uncommitted changes in 2 file(s) under src/ or migrations/)', '## Run\n\n| a | b |\n| --- | ---: |\n| x | 1 |\n\nIn [history.jsonl](history.jsonl).'));
    writeFileSync(join(dir, 'alpha.md'), resultsPage('Alpha', null, '| a | b |\n| --- | ---: |\n| y | 2 |'));
    writeFileSync(join(dir, 'push.md'), resultsPage('Push to subscribers (`push`)', 'def5678', '| a | b |\n| --- | ---: |\n| z | 3 |'));
    writeFileSync(join(dir, 'intake.md'), resultsPage('Intake (`ping`)', 'not recorded', '| a | b |\n| --- | ---: |\n| w | 4 |'));
    assert.deepEqual(
      resultsPages(root).map((p) => p.name),
      ['intake', 'push', 'alpha', 'zeta'],
    );
    const page = performanceFiles(root).get(PERFORMANCE_PAGE) ?? '';
    const sections = [...page.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
    assert.deepEqual(sections, ['Current results', 'Intake', 'Push fan-out', 'Alpha', 'Zeta']);
    assert.match(page, /## Alpha\n\nFrom \[`bench\/results\/alpha.md`\]\(\.\.\/bench\/results\/alpha.md\)\. \*\*Commit: not recorded\.\*\*/);
    assert.match(page, /- Commit: not recorded on the page/);
    assert.match(page, /\*\*Commit: not recorded\.\*\*\n\n- Date: 2026-12-01 10:00 UTC\n- Commit: not recorded\n/);
    assert.match(page, /\*\*Tree: uncommitted changes when measured\.\*\*/);
    assert.match(page, /\| def5678 \| \[push\.md\]/);
    // The page's own links and headings, as seen from docs/.
    assert.match(page, /In \[history\.jsonl\]\(\.\.\/bench\/results\/history\.jsonl\)\./);
    assert.match(page, /^### Run$/m);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('a commit that is missing, partial or on a changed tree is said plainly', () => {
  assert.deepEqual(commitWarnings(undefined), ['commit: not recorded']);
  assert.deepEqual(commitWarnings('not recorded by the run'), ['commit: not recorded']);
  assert.deepEqual(commitWarnings('85eb1b5'), []);
  assert.deepEqual(commitWarnings('PostgreSQL 9309c4b; embedded: not recorded by that run'), ['commit: not recorded for part of the page']);
  assert.deepEqual(commitWarnings('a664bc9 (uncommitted changes in 5 file(s) under src/ or migrations/)'), ['tree: uncommitted changes when measured']);
});

test('the README\'s "How fast" rows are found on the committed results pages, and every page is on docs/performance.md', () => {
  const pages = resultsPages(ROOT);
  const block = howFastBlock(pages);
  assert.doesNotMatch(block, /not found on|no page/, block);
  const page = readFileSync(join(ROOT, PERFORMANCE_PAGE), 'utf8');
  const names = readdirSync(join(ROOT, 'bench/results')).filter((f) => f.endsWith('.md') && f !== 'README.md');
  for (const f of names) assert.ok(page.includes(`(../bench/results/${f})`), `docs/performance.md links ${f}`);
});
