// Owns starting the processes a benchmark profiles or runs compiled: pingd under tsx or compiled by tsc
// (as the image runs it), and the baseline under --cpu-prof.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT, track, wrap, startPingd, compilePingd, type Child } from './servers.js';

const env = process.env;

/**
 * The baseline (bench/baseline-server.ts) under --cpu-prof: startBaseline takes no node flags, and Node
 * refuses --cpu-prof in NODE_OPTIONS, so it is started here. It prints its port on stdout when listening.
 */
export async function startProfiledBaseline(dir: string): Promise<Child> {
  const proc = spawn(
    process.execPath,
    [
      '--cpu-prof',
      `--cpu-prof-dir=${dir}`,
      '--import',
      'tsx',
      '--import',
      new URL('./orphan-guard.ts', import.meta.url).href,
      join(ROOT, 'bench/baseline-server.ts'),
    ],
    {
      cwd: ROOT,
      env: { ...env, PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  track(proc);
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    const t = setTimeout(() => reject(new Error(`baseline not listening after 60 s: ${err}`)), 60_000);
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /LISTENING (\d+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(Number(m[1]));
      }
    });
    proc.once('exit', (code) => reject(new Error(`baseline exited with ${code}: ${err}`)));
  });
  return wrap(proc, port);
}

/** How pingd is started: under tsx from src/ (as the other scenarios do), or compiled by tsc (what ships). */
export interface Launcher {
  kind: 'tsx' | 'compiled';
  /** The compiled tree's dist/ (frames there are mapped back to src/). */
  dist?: string;
  start(env: Record<string, string>, nodeArgs?: string[]): Promise<Child>;
  dispose(): void;
}

export const tsxLauncher: Launcher = { kind: 'tsx', start: (e, nodeArgs) => startPingd({ env: e, nodeArgs }), dispose() {} };

/** pingd compiled by tsc (compilePingd), as the image runs it. */
export function compiledLauncher(log: (s: string) => void): Launcher {
  const build = compilePingd(log);
  return {
    kind: 'compiled',
    dist: build.dist,
    start: (e, nodeArgs) => startPingd({ env: e, nodeArgs, compiled: build }),
    dispose: () => build.dispose(),
  };
}
