// Owns counting the SQL statements a pingd process sends to its database, from inside that process: loaded
// with --import into pingd (bench/hardening.ts), it wraps the drivers' query methods of the checkout being
// measured (its cwd), and on SIGUSR2 writes `bench-queries <n>` to stderr. Counted from the drivers, not from
// pingd's own code, so that any commit can be measured the same way; BEGIN/COMMIT/ROLLBACK are not counted
// (PGlite sends them without a query call), so both backends count the statements pingd itself issued.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const root = process.cwd();
let count = 0;
const TX_CONTROL = /^\s*(?:begin|commit|rollback)\s*;?\s*$/i;

type Fn = (this: unknown, ...args: unknown[]) => unknown;
const textOf = (q: unknown) =>
  typeof q === 'string' ? q : typeof q === 'object' && q !== null && 'text' in q ? String((q as { text: unknown }).text) : '';

// pg is CommonJS: its ESM entry re-exports the same Client class, so patching the prototype reaches the pool.
const pg = createRequire(join(root, 'package.json'))('pg') as { Client: { prototype: Record<string, Fn> } };
const pgQuery = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: unknown, ...args: unknown[]) {
  if (!TX_CONTROL.test(textOf(args[0]))) count++;
  return pgQuery.apply(this, args);
};

// PGlite is ESM only: import the file its package exports, the module instance pingd's own import gets.
const pkgDir = join(root, 'node_modules/@electric-sql/pglite');
const exp = (JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as { exports: { '.': { import: { default: string } } } })
  .exports['.'].import.default;
const { PGlite } = (await import(pathToFileURL(join(pkgDir, exp)).href)) as { PGlite: { prototype: Record<string, Fn> } };
const proto = PGlite.prototype;
for (const name of ['query', 'exec'] as const) {
  const real = proto[name];
  proto[name] = function (this: unknown, ...args: unknown[]) {
    count++;
    return real.apply(this, args);
  };
}
// A transaction's statements go through the object handed to the callback, not through query/exec.
const realTransaction = proto.transaction;
proto.transaction = function (this: unknown, ...args: unknown[]) {
  const fn = args[0] as (tx: Record<string, Fn>) => unknown;
  const counted = (tx: Record<string, Fn>) => {
    const wrap =
      (m: 'query' | 'exec'): Fn =>
      (...a) => {
        count++;
        return tx[m](...a);
      };
    return fn(new Proxy(tx, { get: (t, k) => (k === 'query' || k === 'exec' ? wrap(k) : Reflect.get(t, k)) }));
  };
  return realTransaction.apply(this, [counted, ...args.slice(1)]);
};

process.on('SIGUSR2', () => process.stderr.write(`\nbench-queries ${count}\n`));
