// Owns running a test's body alone among the suite's processes that ask under the same name: the runner
// runs both backends at once (test/run.mjs), and a test that measures timing on the 2 cores (the spam
// corpus replay: a farm's timer must still look like a timer) fails when its two copies starve each other.
// A directory in the run's temporary folder is the lock (mkdir is atomic); a holder that died leaves its
// pid, and a lock whose pid is gone is taken over.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

export async function alone<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const dir = join(tmpdir(), `pingd-alone-${name}`);
  for (;;) {
    try {
      mkdirSync(dir);
      writeFileSync(join(dir, 'pid'), String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let pid = NaN;
      try {
        pid = Number(readFileSync(join(dir, 'pid'), 'utf8'));
      } catch {
        // Being written: look again.
      }
      if (Number.isFinite(pid) && pid > 0 && !alive(pid)) rmSync(dir, { recursive: true, force: true });
      else await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
