// Test harness: `pingd serve` as a real process on a free port (for kills and restarts), its stderr kept.
import { spawn, type ChildProcess } from 'node:child_process';
import { freePort } from './private-postgres.js';
import { waitFor } from '../helpers/wait.js';
import { CLI } from '../helpers/cli.js';

const ROOT = new URL('../../', import.meta.url).pathname;

export interface Server {
  child: ChildProcess;
  port: number;
  exited: Promise<number | null>;
  stderr(): string;
}

/** Starts `pingd serve` with `env` on top of the test's environment; resolves once it answers HTTP. */
export async function startServer(env: Record<string, string>): Promise<Server> {
  const port = await freePort();
  const child = spawn(process.execPath, [...CLI, 'serve'], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', RENDER_CRON: '0 0 1 1 *', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  try {
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`it exited with ${child.exitCode}`);
        return fetch(`http://127.0.0.1:${port}/`).then(
          (r) => r.ok,
          () => false,
        );
      },
      { what: 'the server to answer', timeoutMs: 30_000, intervalMs: 100 },
    );
  } catch (e) {
    child.kill('SIGKILL');
    throw new Error(`the server did not start (${(e as Error).message}): ${err}`, { cause: e });
  }
  return { child, port, exited, stderr: () => err };
}
