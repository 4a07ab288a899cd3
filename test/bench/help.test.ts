// `npm run bench -- --help` prints the scenarios and flags and measures nothing (it used to start the run).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';

test('npm run bench -- --help lists the scenarios and flags, exits 0 and starts nothing', { timeout: 60_000 }, async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', '--help'], {
    cwd: new URL('../../', import.meta.url).pathname,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  assert.equal(code, 0, err);
  assert.match(
    out,
    /^Scenarios \(BENCH_SCENARIOS, comma-separated; default all\): ping, extendedPing, pingSiteForm, ping-hosts, ping\+render, render, hardening, web, wrk/m,
  );
  assert.match(out, /^Flags: --help, --write, --soak, --scale, --multi\.$/m);
  assert.doesNotMatch(out + err, /pingd benchmark:/, 'no benchmark started');
});
