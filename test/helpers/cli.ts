// Owns how tests start pingd's command line as a process of its own: the transpiled src/cli.js when the
// suite runs from its compiled copy (test/mirror.mjs), or src/cli.ts under tsx when a test file is run
// straight from the checkout (`node --import tsx --test test/…`).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The checkout's root (or the compiled copy's, which links everything else to the checkout). */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

const compiled = join(ROOT, 'src', 'cli.js');

/**
 * Node's arguments before the command's own: `spawn(process.execPath, [...CLI, 'serve'])`, from any working
 * directory (tsx by its path: from another directory `--import tsx` would not resolve).
 */
export const CLI: readonly string[] = existsSync(compiled)
  ? [compiled]
  : ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href, join(ROOT, 'src', 'cli.ts')];
