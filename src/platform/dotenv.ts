// Owns reading `.env` from the working directory into the environment (what the environment does not set
// already wins; Compose reads the same file itself), and remembering what it took, for the start-up log.
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseEnv } from 'node:util';

export interface DotEnvRead {
  /** The file's absolute path. */
  path: string;
  /** Settings it gave the process. */
  taken: string[];
  /** Settings it names that the environment had set already (the environment wins). */
  overridden: string[];
}

let last: DotEnvRead | undefined;

/** Loads `file` when it exists; returns what it took (undefined: there is no such file). */
export function loadDotEnv(file = '.env'): DotEnvRead | undefined {
  if (!existsSync(file)) return undefined;
  const names = Object.keys(parseEnv(readFileSync(file, 'utf8')));
  const overridden = names.filter((n) => process.env[n] !== undefined);
  process.loadEnvFile(file);
  last = { path: resolve(file), taken: names.filter((n) => !overridden.includes(n)), overridden };
  return last;
}

/** What the last loadDotEnv() of this process read, if it read a file. */
export function dotEnvRead(): DotEnvRead | undefined {
  return last;
}
