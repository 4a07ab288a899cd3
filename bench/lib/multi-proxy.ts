// Owns starting and stopping the multi-instance bench's round-robin proxy (multi-proxy-server.ts) as its own
// process, so that piping bytes does not share an event loop with the load generator, and asking it how many
// connections it handed to each backend.
import { spawn } from 'node:child_process';
import { track } from './servers.js';

export interface Proxy {
  origin: string;
  /** Connections handed to each backend so far. */
  handed(): Promise<number[]>;
  stop(): Promise<void>;
}

const GUARD = new URL('./orphan-guard.ts', import.meta.url).href;

/** Starts the proxy on `host` (a free port) in front of the backends on 127.0.0.1:`ports`. */
export async function startProxy(host: string, ports: number[]): Promise<Proxy> {
  const proc = spawn(
    process.execPath,
    ['--import', 'tsx', '--import', GUARD, new URL('./multi-proxy-server.ts', import.meta.url).pathname, host, ports.join(',')],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  track(proc);
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  let err = '';
  const waiters: ((h: number[]) => void)[] = [];
  proc.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
    for (;;) {
      const nl = err.indexOf('\n');
      if (nl < 0) break;
      const line = err.slice(0, nl);
      err = err.slice(nl + 1);
      try {
        const j = JSON.parse(line) as { handed?: number[] };
        if (j.handed) waiters.shift()?.(j.handed);
      } catch {
        process.stderr.write(`proxy: ${line}\n`);
      }
    }
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /\{"port":(\d+)\}/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    proc.once('exit', (code) => reject(new Error(`the proxy exited with ${code} before listening: ${err}`)));
  });
  return {
    origin: `http://${host}:${port}`,
    handed() {
      return new Promise((r) => {
        waiters.push(r);
        proc.kill('SIGUSR2');
      });
    },
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    },
  };
}
