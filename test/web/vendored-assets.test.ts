// The browser files copied from npm packages into src/web/assets/vendor/ are the installed versions' bytes
// (`npm run vendor` copies them again after an upgrade), with the package's licence beside them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..', '..');
const vendor = join(root, 'src', 'web', 'assets', 'vendor');
const uplot = join(root, 'node_modules', 'uplot');

test('uPlot in src/web/assets/vendor is the installed uplot package, byte for byte, with its licence', () => {
  const version = (JSON.parse(readFileSync(join(uplot, 'package.json'), 'utf8')) as { version: string }).version;
  for (const [ours, theirs] of [
    ['uPlot.iife.min.js', 'dist/uPlot.iife.min.js'],
    ['uPlot.min.css', 'dist/uPlot.min.css'],
    ['uPlot.LICENSE', 'LICENSE'],
  ]) {
    assert.ok(
      readFileSync(join(vendor, ours)).equals(readFileSync(join(uplot, theirs))),
      `${ours} differs from uplot ${version}'s ${theirs}: run \`npm run vendor\``,
    );
  }
});
