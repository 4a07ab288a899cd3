// The reference pages made from the code's own tables (scripts/docs.ts, `npm run docs`) say what the code
// says now: a setting, error code, refusal, command or metric added without running `npm run docs` fails
// here, naming the file and its first stale line. And the README's short settings table agrees with the
// configuration table it is a digest of.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { generatedFiles, fillBlock, ROOT } from '../../scripts/docs.js';
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
  assert.deepEqual([...files.keys()].sort(), ['.env.example', 'docker-compose.yml', ...pages]);
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
