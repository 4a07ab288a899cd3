// Every relative link in README.md and docs/ points to a file that exists, and a `#fragment` to a heading of
// that page (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens, repeats numbered).
// Regression guard for the documentation split: a section moved to another page must take its links along.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, existsSync, statSync } from 'node:fs';
import { join, dirname, relative, resolve } from 'node:path';

const root = join(import.meta.dirname, '..', '..');

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.isDirectory()) return markdownFiles(join(dir, e.name));
    return e.name.endsWith('.md') ? [join(dir, e.name)] : [];
  });
}

/** The page's lines outside fenced code blocks. */
function prose(text: string): string[] {
  const out: string[] = [];
  let fence = false;
  for (const line of text.split('\n')) {
    if (/^\s*```/.test(line)) fence = !fence;
    else if (!fence) out.push(line);
  }
  return out;
}

/** GitHub's anchor for a heading's text. */
function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of prose(readFileSync(file, 'utf8'))) {
    const m = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

const pages = [join(root, 'README.md'), ...markdownFiles(join(root, 'docs'))];

test('the anchors are GitHub\'s', () => {
  assert.equal(slug('`GET /weblog?url=…` ("did my ping arrive?")'), 'get-weblogurl-did-my-ping-arrive');
  assert.equal(slug('Behind a proxy: TLS and `TRUST_PROXY`'), 'behind-a-proxy-tls-and-trust_proxy');
  assert.equal(slug('`GET /api/stats?window=1h|24h`'), 'get-apistatswindow1h24h');
});

test('every relative link in README.md and docs/ points to an existing file and heading', () => {
  const broken: string[] = [];
  let checked = 0;
  for (const page of pages) {
    for (const line of prose(readFileSync(page, 'utf8'))) {
      // Code spans hold examples, not links; a link's text may be a code span, which leaves `[](target)`.
      const text = line.replace(/`[^`]*`/g, '');
      for (const m of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        const target = m[1];
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
        checked++;
        const [path, fragment] = target.split('#', 2) as [string, string | undefined];
        const file = path === '' ? page : resolve(dirname(page), decodeURI(path));
        const where = `${relative(root, page)}: ${target}`;
        if (!existsSync(file)) {
          broken.push(`${where} (no such file)`);
          continue;
        }
        if (fragment !== undefined && statSync(file).isFile() && file.endsWith('.md') && !anchorsOf(file).has(decodeURI(fragment))) {
          broken.push(`${where} (no heading #${fragment} in ${relative(root, file)})`);
        }
      }
    }
  }
  assert.ok(checked > 50, `links were found (${checked})`);
  assert.deepEqual(broken, []);
});
