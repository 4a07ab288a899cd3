#!/usr/bin/env node
// Entry point for `npx pingd`: runs the compiled CLI (built by `npm install` via the prepare script).
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const compiled = join(root, 'dist', 'cli.js');
if (!existsSync(compiled)) {
  console.error('pingd: dist/cli.js is missing; run `npm run build` (npm install does it) first.');
  process.exit(70);
}
// Settings from `.env` in the working directory, as Compose reads them; the environment wins. Read before
// main() loads the configuration; `serve` logs which file it read and what it took.
const { main, loadDotEnv } = await import(pathToFileURL(compiled).href);
loadDotEnv();
const code = await main(process.argv.slice(2));
if (code >= 0) process.exitCode = code;
