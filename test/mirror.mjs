// Owns the suite's compiled copy of the checkout: src/, test/, bench/ and scripts/ transpiled to JavaScript
// once per run, so test processes run without a module loader. Under `--import tsx` every process paid
// ~0.75 s more CPU to load the app (1.4 s against 0.65 s, measured: the loader's hooks thread and its
// resolution of each module, not the transpiling), and a run starts some 300 test processes, about 100
// servers and commands, and the embedded database's threads.
//
// The copy sits where it keeps every path the same depth as in the checkout (`new URL('../../', …)` is the
// root in both): a directory whose transpiled folders hold each .js beside a link to its .ts and to
// every other file (fixtures, assets, helpers in .mjs), and whose other entries (node_modules, migrations,
// docs, package.json, …) are links to the checkout's. Node follows a link to the file's real path, so a
// test that runs a .ts (a command under tsx, a worker registering tsx) runs the checkout's own.
import { mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { transform } from 'esbuild';

/** Directories transpiled; every other top-level entry of the checkout is linked as it is. */
const TRANSPILED = new Set(['src', 'test', 'bench', 'scripts']);

/**
 * Writes the copy of `root` into `dir` (replaced if it exists) and returns it. esbuild with the checkout's
 * tsconfig, as tsx itself uses: the same output the tests ran under tsx, with inline source maps so that a
 * failure's stack names the .ts lines (`--enable-source-maps`).
 */
export async function buildMirror(root, dir) {
  const tsconfigRaw = readFileSync(join(root, 'tsconfig.json'), 'utf8');
  const tmp = `${dir}.${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  const jobs = [];
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    const from = join(root, entry.name);
    const to = join(tmp, entry.name);
    if (entry.isDirectory() && TRANSPILED.has(entry.name)) copyTree(from, to, jobs);
    else symlinkSync(from, to);
  }
  const node = `node${process.versions.node.split('.')[0]}`;
  await Promise.all(
    jobs.map(async ({ from, to }) => {
      const { code } = await transform(readFileSync(from, 'utf8'), {
        loader: 'ts',
        format: 'esm',
        target: node,
        sourcemap: 'inline',
        sourcefile: from,
        sourcesContent: false,
        tsconfigRaw,
      });
      writeFileSync(to, code);
    }),
  );
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return dir;
}

function hasTypeScript(dir) {
  return readdirSync(dir, { withFileTypes: true }).some((e) =>
    e.isDirectory() ? hasTypeScript(join(dir, e.name)) : e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'),
  );
}

// A directory with no TypeScript below it (fixtures, assets) is one link; one with some is rebuilt file by file.
function copyTree(from, to, jobs) {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const src = join(from, entry.name);
    const dst = join(to, entry.name);
    if (entry.isDirectory()) {
      if (hasTypeScript(src)) copyTree(src, dst, jobs);
      else symlinkSync(src, dst);
      continue;
    }
    symlinkSync(src, dst);
    if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
      const js = dst.replace(/\.ts$/, '.js');
      if (!existsSync(join(from, entry.name.replace(/\.ts$/, '.js')))) jobs.push({ from: src, to: js });
    }
  }
}
