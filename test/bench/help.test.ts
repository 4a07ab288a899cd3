// `npm run bench -- --help` prints the scenarios and flags and measures nothing (it used to start the run).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';

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
    /^Scenarios \(BENCH_SCENARIOS, comma-separated ids; default all but wrk and render-tick; a flag runs its scenario alone\):$/m,
  );
  // One module per scenario, and every module it names exists.
  const listed = [...out.matchAll(/^ {2}(\S.*?)\s+(bench\/[\w-]+\.ts): /gm)].map((m) => ({ ids: m[1], module: m[2] }));
  assert.deepEqual(
    listed.map((l) => l.module),
    [
      'bench/intake.ts',
      'bench/documents.ts',
      'bench/renders.ts',
      'bench/hardening.ts',
      'bench/web.ts',
      'bench/wrk.ts',
      'bench/render-tick.ts',
      'bench/push.ts',
      'bench/spam.ts',
      'bench/soak.ts',
      'bench/scale.ts',
      'bench/multi.ts',
      'bench/failover.ts',
    ],
  );
  for (const l of listed) assert.ok(existsSync(new URL(`../../${l.module}`, import.meta.url)), l.module);
  assert.equal(listed[0].ids, 'ping, extendedPing, pingSiteForm, ping-hosts, ping-spam, ping+render');
  assert.match(out, /^Flags: --help, --write, --soak, --scale, --multi, --failover\.$/m);
  assert.doesNotMatch(out + err, /pingd benchmark:/, 'no benchmark started');
});
